"""Unit files of the SCU-approximation study (Nawrath et al., NAACL 2024), in either form:

- TAB-separated: one line per reference, its units separated by TABs (what `pyramid --units
  file` reads and every `sumbench units` command writes);
- the paper's JSON: a list of `{"instance_id", "summary", "<kind>": [...]}` (kind scus, stus,
  smus or sgus; SMU files also carry `summary_trees` and `tree`), or the SGU wrapper
  `{"model", "samples_used", "data": [{"instance_id", "sgus", ...}]}`. A record keyed by
  another spelling of a kind (tasks.units.kinds: `ssus`, `scu`, ...) loads as that kind.

The paper made its SCU and STU JSON from the TAB files dropping every unit without a space
(SCE `scripts/load_data/create_json_from_source.py:13-17`): `paper_units` applies that rule
to those two kinds, and uses SMUs, SGUs and the rest as given.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import DataError
from tasks.plumbing.io import text_lines, write_text
from tasks.units.kinds import UnitKind, check_unit_kind, spellings, unit_kind_or_none

KINDS = spellings(UnitKind.SCUS, UnitKind.STUS, UnitKind.SMUS, UnitKind.SGUS, UnitKind.NGRAMS,
                  UnitKind.SENTENCES)
#: the kinds whose paper JSON dropped units without a space
SPACELESS_DROPPED = spellings(UnitKind.SCUS, UnitKind.STUS)


@dataclass(frozen=True)
class UnitFile:
    path: str
    units: tuple[tuple[str, ...], ...]
    ids: tuple[str, ...] | None = None     # the JSON's instance ids (None for TAB)
    kind: str | None = None                # the JSON's kind (None for TAB)


def unit_key(record: dict) -> str | None:
    """The key of a JSON record that holds its units: the first of KINDS it has, else the
    first key spelling one of them another way (`ssus` for sentences, `scu` for scus)."""
    return next((name for name in KINDS if name in record), None) or next(
        (key for key in record if unit_kind_or_none(key) in KINDS), None)


def _json_units(path: Path, data) -> UnitFile:
    records, key = data, None
    if isinstance(data, dict):
        records, key = data.get("data"), "sgus"
    if not isinstance(records, list) or not records:
        raise DataError("expected the paper's JSON: a list of {instance_id, <kind>: [...]} or "
                        "an SGU file {data: [...]}", path=str(path))
    if key is None and isinstance(records[0], dict):
        key = unit_key(records[0])
    units, ids = [], []
    for number, record in enumerate(records):
        where = {"path": str(path), "field": f"[{number}]"}
        if not isinstance(record, dict) or key is None or key not in record:
            raise DataError(f"expected an object with a unit list ({key or ', '.join(KINDS)})",
                            **where)
        values = record[key]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise DataError(f"expected a list of strings under {key!r}", **where)
        units.append(tuple(values))
        ids.append(str(record.get("instance_id", number)))
    return UnitFile(str(path), tuple(units), tuple(ids), check_unit_kind(key, KINDS))


def read_unit_file(path: str | Path) -> UnitFile:
    """A TAB-separated or JSON unit file (see the module); errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"cannot read the units file: {error}", path=str(path)) from None
    if text.lstrip()[:1] in ("[", "{"):
        try:
            return _json_units(path, json.loads(text))
        except json.JSONDecodeError as error:
            raise DataError(f"not JSON: {error.msg}", path=str(path), line=error.lineno) \
                from None
    lines = text_lines(text)
    if not lines:
        raise DataError("no lines (one line of units per reference)", path=str(path))
    return UnitFile(str(path), tuple(tuple(unit for unit in line.split("\t") if unit.strip())
                                     for line in lines))


def read_example_units(path: str | Path, count: int) -> tuple[tuple[str, ...], ...]:
    """The units of a file for a Pyramid folder of `count` examples: one line or record per
    example, in ids.txt order. An example may have none (an empty line): its summaries then
    score 0, as Lite²Pyramid scores them."""
    found = read_unit_file(path)
    if len(found.units) != count:
        raise DataError(f"{len(found.units)} examples but the folder has {count} (one line or "
                        f"record per example, in ids.txt order)", path=str(path))
    if not any(found.units):
        raise DataError("no example has a unit (an empty units file?)", path=str(path))
    return found.units


def write_unit_rows(path: str | Path, rows) -> None:
    """The TAB-separated form, one line per reference: inside a unit, white space (line
    breaks and TABs included) becomes one space, and an empty unit is left out (the form
    cannot hold either)."""
    write_text(path, "".join("\t".join(" ".join(unit.split()) for unit in row if unit.strip())
                             + "\n" for row in rows))


def paper_units(file: UnitFile, kind: str) -> list[list[str]]:
    """The units as the paper scored them: for SCUs and STUs, those with a space (`kind` in
    any spelling)."""
    if unit_kind_or_none(kind) in SPACELESS_DROPPED:
        return [[unit for unit in units if " " in unit] for units in file.units]
    return [list(units) for units in file.units]


def aligned_ids(first: UnitFile, second: UnitFile) -> list[str]:
    """The references' ids (a JSON file's instance ids, else positions); an error when the
    files differ in length or in ids."""
    if len(first.units) != len(second.units):
        raise DataError(f"{len(first.units)} references in {first.path} but "
                        f"{len(second.units)} in {second.path} (one line or record per "
                        f"reference in both)", path=second.path)
    if first.ids and second.ids and first.ids != second.ids:
        position = next(i for i, (a, b) in enumerate(zip(first.ids, second.ids)) if a != b)
        raise DataError(f"reference {position} is {first.ids[position]!r} in {first.path} but "
                        f"{second.ids[position]!r} here", path=second.path)
    return list(first.ids or second.ids or (str(i) for i in range(len(first.units))))
