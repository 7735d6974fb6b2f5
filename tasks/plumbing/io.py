"""JSON and JSON Lines reading with precise error locations, and writing them whole (through
`tasks.plumbing.atomic`)."""
from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.errors import DataError, SumbenchError, json_type

#: a JSON escape of a UTF-16 surrogate (\ud800-\udfff)
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class DuplicateKey(ValueError):
    """A name given twice in one JSON object (json.loads would keep the last silently)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return record


_STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def strict_loads(text: str) -> Any:
    """`json.loads(text)` that refuses a name given twice in an object (DuplicateKey): RFC
    8259 leaves its meaning open, and "the last one wins" would score a value the file also
    contradicts."""
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _STRICT_DECODER.decode(text)


def duplicate_key_error(error: DuplicateKey, path: str, line: int | None = None) -> DataError:
    return DataError("given twice in one JSON object (which one is meant is ambiguous)",
                     path=path, line=line, field=error.key)


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line number, object) for each non-blank line; errors name file and line
    (`json_line_object`)."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"expected a JSON Lines file, got a folder{_folder_hint(path)}",
                        path=str(path))
    if not path.exists():
        raise DataError("file not found", path=str(path))
    with path.open("rb") as handle:
        for line_number, raw_line in enumerate(handle, start=1):
            record = json_line_object(raw_line, str(path), line_number)
            if record is not None:
                yield line_number, record


def _folder_hint(folder: Path) -> str:
    """Where the JSON Lines files of a folder given instead of a file are, if it has any."""
    for place in (folder / "predictions", folder):
        if place.is_dir() and any(place.glob("*.jsonl")):
            return f" (its JSON Lines files: {place}/*.jsonl)"
    return ""


def json_line_object(raw_line: bytes, path: str, line_number: int) -> dict | None:
    """The JSON object of one line (None for a blank line); a UTF-8 byte order mark before
    the first line is skipped."""
    if line_number == 1:
        raw_line = raw_line.removeprefix(codecs.BOM_UTF8)
    try:
        line = raw_line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"not UTF-8 text ({error.reason} at byte {error.start + 1} of "
                        "the line)", path=path, line=line_number) from None
    if not line.strip():
        return None
    try:
        record = strict_loads(line)
    except json.JSONDecodeError as error:
        document = line_number == 1 and line.strip() in ("{", "[")  # an indented JSON file
        raise DataError(f"malformed JSON ({json_error_text(error)})" + (
            "; this looks like a JSON document, not JSON Lines (one object per line)"
            if document else ""), path=path, line=line_number) from None
    except DuplicateKey as error:
        raise duplicate_key_error(error, path, line_number) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", path=path, line=line_number) from None
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {json_type(record)}",
                        path=path, line=line_number)
    if SURROGATE_ESCAPE.search(line):  # valid UTF-8 holds a lone surrogate only as an escape
        for field, value in record.items():
            if has_lone_surrogate(value):
                raise DataError("a \\ud800-\\udfff escape that is not half of a pair is not "
                                "text", path=path, line=line_number, field=field)
    return record


def json_error_text(error: json.JSONDecodeError) -> str:
    """The parser's message and column ("Invalid control character at" ends in "at")."""
    return f"{error.msg.removesuffix(' at')} at column {error.colno}"


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere in `value` holds a lone surrogate (walked without recursion:
    json.loads accepts nesting as deep as the recursion limit)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def refuse_non_file(path: Path, what: str) -> None:
    """A DataError naming `path` when something other than a regular file stands there (a
    folder, a device); nothing when it is a file or absent."""
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "a special file"
        raise DataError(f"expected {what}, got {kind}", path=str(path))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return [record for _, record in iter_jsonl(path)]


def read_text(path: str | os.PathLike, *, what: str = "file") -> str:
    """The text of a UTF-8 file, a leading byte order mark skipped. A missing file ("<what>
    not found"), an unreadable one or bytes that are not UTF-8 (with their line) is a
    DataError naming the path."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} not found", path=str(path))
    try:
        data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text ({error.reason})", path=str(path), line=line) from None
    except OSError as error:
        raise DataError(f"cannot read the {what} ({error.strerror or error})",
                        path=str(path)) from None


def text_lines(text: str) -> list[str]:
    """The lines of a text split at "\n" only (a line may hold other line separators), a
    final newline ending the last line rather than starting an empty one."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def read_lines(path: str | os.PathLike, *, what: str = "file") -> list[str]:
    """`text_lines` of a UTF-8 file."""
    return text_lines(read_text(path, what=what))


def read_item_lines(path: str | os.PathLike, count: int, *, what: str,
                    lines_for: str) -> list[str]:
    """The lines of a text file that holds one line per item, `count` of them; another count
    is a DataError "N lines for M <lines_for>" naming the path."""
    lines = read_text(path, what=what).splitlines()
    if len(lines) != count:
        raise DataError(f"{len(lines)} lines for {count} {lines_for}", path=str(path))
    return lines


def read_number_rows(path: str | os.PathLike, counts: Sequence[int], *, what: str,
                     lines_for: str, count_error: Callable[[int, int], str],
                     parse: Callable[[str], Any] = float,
                     expected: str = "TAB-separated numbers") -> list[list[float]]:
    """One line per item, TAB-separated numbers (an empty line: none; the line stripped first,
    as Lite²Pyramid reads its weights: `line.strip()` split at TABs), line i holding
    `counts[i]` of them, each read with `parse`. Errors are DataErrors naming the path and line:
    "N lines for M <lines_for>", "expected <expected>", `count_error(found, wanted)`."""
    rows = []
    lines = read_item_lines(path, len(counts), what=what, lines_for=lines_for)
    for number, (line, count) in enumerate(zip(lines, counts), start=1):
        try:
            row = [float(parse(value)) for value in line.strip().split("\t")] \
                if line.strip() else []
        except ValueError:
            raise DataError(f"expected {expected}", path=str(path), line=number) from None
        if len(row) != count:
            raise DataError(count_error(len(row), count), path=str(path), line=number)
        rows.append(row)
    return rows


def read_json(path: str | os.PathLike, *, what: str = "file") -> Any:
    """The content of a JSON file: `read_text`'s errors, and malformed JSON as a DataError
    naming the path, line and column."""
    text = read_text(path, what=what)
    try:
        return strict_loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"malformed JSON ({json_error_text(error)})",
                        path=str(Path(path)), line=error.lineno) from None
    except DuplicateKey as error:
        raise duplicate_key_error(error, str(Path(path))) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", path=str(Path(path))) from None


def dumps_record(record: dict) -> str:
    """One JSON line as the official release writes it: json.dumps defaults, raw UTF-8."""
    return json.dumps(record, ensure_ascii=False)


def file_sha256(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_bytes), b""):
            digest.update(block)
    return digest.hexdigest()


def json_text(obj: Any) -> str:
    """A result document as JSON: indent 1, sorted keys, raw UTF-8; NaN/inf is an error."""
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False)


def write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> None:
    """Write records atomically: the file appears whole or not at all."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(dumps_record(record) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) atomically: the file appears whole or not at all."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` atomically: the file appears whole or not at all."""
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(obj, handle, indent=1, sort_keys=True)
            handle.write("\n")


def check_distinct_files(paths: Sequence[str | os.PathLike]) -> None:
    """A file given twice (by any name) is an error naming both: its records would otherwise
    be reported as duplicates of themselves. Paths that cannot be read are left to the
    reader, which names them."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue
        key = (status.st_dev, status.st_ino)
        if key in seen:
            same = "" if os.fspath(path) == seen[key] else f" (as {seen[key]})"
            raise SumbenchError(f"prediction file {os.fspath(path)} is given twice{same}")
        seen[key] = os.fspath(path)
