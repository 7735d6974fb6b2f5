"""The JSON Lines files of system summaries and references that `sumbench qapyramid
normalize` and `presence-eval` read: {system, example_id, summary} and {example_id,
reference}, one object per line, each key once."""
from __future__ import annotations

from tasks.plumbing.errors import DataError
from tasks.plumbing.io import iter_jsonl


def _string_field(record: dict, name: str, path: str, line: int, allow_empty: bool) -> str:
    value = record.get(name)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DataError(f"expected a {'' if allow_empty else 'non-empty '}string",
                        path=path, line=line, field=name)
    return value


def read_summaries(path: str) -> dict[tuple[str, str], str]:
    summaries: dict[tuple[str, str], str] = {}
    for line, record in iter_jsonl(path):
        key = (_string_field(record, "system", path, line, False),
               _string_field(record, "example_id", path, line, False))
        if key in summaries:
            raise DataError(f"duplicate summary for system {key[0]!r}, example {key[1]!r}",
                            path=path, line=line)
        summaries[key] = _string_field(record, "summary", path, line, True)
    return summaries


def read_references(path: str) -> dict[str, str]:
    references: dict[str, str] = {}
    for line, record in iter_jsonl(path):
        example = _string_field(record, "example_id", path, line, False)
        if example in references:
            raise DataError(f"duplicate reference for example {example!r}", path=path, line=line)
        references[example] = _string_field(record, "reference", path, line, False)
    return references
