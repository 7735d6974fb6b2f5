"""RoSE's human ACUs as a units file (tasks.units.unit_files' TAB form, one line per example),
the input of `semiautoacu` (SemiAutoACU) and of `pyramid` (Lite²Pyramid with ACUs).

RoSE is not shipped with sumbench. Its ACUs come from the Hugging Face dataset
`Salesforce/rose` (configuration `cnndm_test`: 500 examples, each with `reference_acus`, the
list of the reference's ACUs, and `annotations[system]["acu"]`, the human ACU score), or from
Yale-LILY/ROSE's demo file `docs/_data/acu-cnndm-test.json` on its `page` branch (records
`{id, reference, acu}`). Either, saved as a JSON list or JSON lines, converts with
`write_rose_units(records_file, units_file)`; the lines follow the records' order, which must
be the summaries' order when scoring."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tasks.plumbing.errors import DataError
from tasks.units.unit_files import write_unit_rows

#: the keys of a record's ACUs: the Hugging Face dataset's, then the demo file's
ACU_KEYS = ("reference_acus", "acu")


def read_records(path: str | Path) -> list[dict]:
    """RoSE records from a JSON list or a JSON-lines file; errors name the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"cannot read the RoSE records: {error}", path=str(path)) from None
    if text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise DataError(f"not JSON: {error.msg}", path=str(path), line=error.lineno) \
                from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DataError(f"not JSON: {error.msg}", path=str(path), line=number) \
                    from None
    return records


def rose_units(records: Sequence[dict], path: str | None = None) -> list[list[str]]:
    """Each record's ACUs (`reference_acus` or `acu`: a non-empty list of strings)."""
    rows = []
    for number, record in enumerate(records, start=1):
        key = next((key for key in ACU_KEYS if isinstance(record, dict) and key in record),
                   None)
        if key is None:
            raise DataError(f"record {number} has no ACUs (expected one of "
                            f"{', '.join(ACU_KEYS)})", path=path)
        units = record[key]
        if not isinstance(units, list) or not units or \
                not all(isinstance(unit, str) and unit.strip() for unit in units):
            raise DataError(f"record {number}: expected a non-empty list of non-empty strings",
                            path=path, field=key)
        rows.append(units)
    return rows


def write_rose_units(records_path: str | Path, units_path: str | Path) -> int:
    """Convert RoSE records to a TAB-separated units file; the number of examples written."""
    rows = rose_units(read_records(records_path), str(records_path))
    write_unit_rows(units_path, rows)
    return len(rows)
