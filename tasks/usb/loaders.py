"""Reading the processed USB task datasets: ``DATA/<variant>/<task>/<split>.jsonl``.

Where DATA comes from, first match wins: an explicit ``data_dir``; the ``SUMBENCH_DATA``
environment variable; the processed archive of the Hugging Face dataset ``kundank/usb``
(``processed_data.tar.gz``), downloaded once and cached (see `tasks.usb.archive`, whose
public names, and those of `tasks.usb.layout`, are importable from here too).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import DataError, json_type
from tasks.plumbing.io import iter_jsonl, refuse_non_file
from tasks.usb.archive import (  # noqa: F401  (re-exported)
    ARCHIVE_INFO_FILE,
    CACHE_ENV,
    EXTRACTED_FOLDER,
    FETCH_MESSAGES,
    HUB_FILENAME,
    HUB_REPO_ID,
    Downloader,
    FetchResult,
    default_cache_dir,
    extract_archive_safely,
    fetch_archive,
    fetch_processed_data,
)
from tasks.usb.layout import HOW_TO_GET_DATA, SPLITS, TASK_FOLDERS, find_data_root  # noqa: F401
from tasks.validation import (
    require_binary_label,
    require_binary_labels,
    require_index,
    require_index_lists,
    require_str,
    require_str_list,
)

DATA_ENV = "SUMBENCH_DATA"


# ---------------------------------------------------------------- locating the data folder

def resolve_data_dir(data_dir: str | Path | None = None, *, downloader: Downloader | None = None,
                     cache_dir: str | Path | None = None, revision: str | None = None) -> Path:
    """The processed-data folder: explicit > $SUMBENCH_DATA > the cached hub archive."""
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_ENV) or None
    if isinstance(chosen, str) and not chosen.strip():  # Path("") would be the current folder
        where = "" if data_dir is not None else f" (${DATA_ENV})"
        raise DataError(f"the data folder{where} is given empty: give a task-datasets folder")
    if chosen is not None:
        folder = Path(chosen).expanduser()
        if not folder.is_dir():
            where = "" if data_dir is not None else f" (from ${DATA_ENV})"
            raise DataError(f"data folder not found{where}. {HOW_TO_GET_DATA}", path=str(folder))
        return find_data_root(folder, max_depth=1)
    return fetch_processed_data(cache_dir=cache_dir, revision=revision, downloader=downloader)


# ---------------------------------------------------------------- reading one task split

def _check_names(task_name: str, split: str) -> None:
    if task_name not in TASK_FOLDERS:
        raise DataError(f"unknown USB task folder '{task_name}'; expected one of "
                        f"{', '.join(TASK_FOLDERS)}")
    if split not in SPLITS:
        raise DataError(f"unknown split '{split}'; expected one of {', '.join(SPLITS)}")


def _listing(folder: Path, suffix: str = "") -> str:
    """The folders in `folder` (without `suffix`: its files of that suffix, named without it),
    hidden ones left out."""
    names = sorted(p.name[: len(p.name) - len(suffix)] if suffix else p.name
                   for p in folder.iterdir() if not p.name.startswith(".") and (
                       p.is_file() and p.name.endswith(suffix) if suffix else p.is_dir())
                   ) if folder.is_dir() else []
    return ", ".join(names) or "none"


def check_variant_name(variant: str) -> None:
    """A variant names one folder of the data folder (never a path to elsewhere)."""
    if not isinstance(variant, str) or not variant or variant.startswith(".") or \
            "/" in variant or "\\" in variant or "\0" in variant:
        raise DataError(f"a variant is the name of one folder in the data folder (all, a "
                        f"domain), got {variant!r}", field="variant")


def task_split_path(data_dir: Path, task_name: str, split: str, variant: str) -> Path:
    """DATA/<variant>/<task>/<split>.jsonl; a missing file names what does exist."""
    check_variant_name(variant)
    path = data_dir / variant / task_name / f"{split}.jsonl"
    if path.is_file():
        return path
    refuse_non_file(path, "a JSON Lines file")
    if not (data_dir / variant).is_dir():
        found = f"variants present: {_listing(data_dir)}"
    elif not (data_dir / variant / task_name).is_dir():
        found = f"tasks present for '{variant}': {_listing(data_dir / variant)}"
    else:
        found = f"splits present: {_listing(path.parent, '.jsonl')}"
    raise DataError(f"task data file not found; {found}", path=str(path))


def read_task_records(task_name: str, split: str, variant: str = "all",
                      data_dir: str | Path | None = None, **source) -> list[dict]:
    """The records of one task split, in file order, each checked against the task's schema
    (see `check_record`). `source`: downloader=, cache_dir=, revision= (used only when the
    data comes from the hub archive)."""
    return [record for _, record in read_numbered_task_records(
        task_name, split, variant, data_dir, **source)[1]]


def read_numbered_task_records(task_name: str, split: str, variant: str = "all",
                               data_dir: str | Path | None = None,
                               **source) -> tuple[Path, list[tuple[int, dict]]]:
    """The split's file and its (line, record) pairs, as `read_task_records` checks them."""
    _check_names(task_name, split)
    root = resolve_data_dir(data_dir, **source)
    path = task_split_path(root, task_name, split, variant)
    return path, _checked_lines(task_name, path)


# ---------------------------------------------------------------- the task schemas

#: field kinds: a string, a list of strings, a non-negative integer, 0 or 1, a list of 0/1
#: (one per input line), lists of input line indices (one list per summary line)
TEXT, LINES, INDEX, LABEL, LINE_LABELS, EVIDENCE = (
    "text", "lines", "index", "label", "line_labels", "evidence")

#: each task's record fields and their kinds, in column order
TASK_SCHEMAS: dict[str, dict[str, str]] = {
    "abstractive_summarization": {"id": TEXT, "input_lines": LINES, "output_lines": LINES},
    "multisentence_compression": {"id": TEXT, "summ_idx": INDEX, "input_lines": LINES,
                                  "output_lines": LINES},
    "extractive_summarization": {"id": TEXT, "input_lines": LINES, "labels": LINE_LABELS},
    "evidence_extraction": {"id": TEXT, "input_lines": LINES, "summary_lines": LINES,
                            "evidence_labels": EVIDENCE},
    "factuality_classification": {"id": TEXT, "summ_idx": INDEX, "input_lines": LINES,
                                  "summary_sent": TEXT, "label": LABEL},
    "fixing_factuality": {"id": TEXT, "summ_idx": INDEX, "input_lines": LINES,
                          "initial_summary": TEXT, "fixed_summary": TEXT},
    "unsupported_span_prediction": {"id": TEXT, "summ_idx": INDEX, "input_lines": LINES,
                                    "summary": TEXT, "annotated_summary": TEXT},
    "topicbased_summarization": {"id": TEXT, "summ_idx": INDEX, "input_lines": LINES,
                                 "topic_name": TEXT, "output_lines": LINES},
}


#: each task's fields that hold its answer (what a leaderboard's public inputs leave out)
GOLD_FIELDS: dict[str, tuple[str, ...]] = {
    "abstractive_summarization": ("output_lines",),
    "multisentence_compression": ("output_lines",),
    "extractive_summarization": ("labels",),
    "evidence_extraction": ("evidence_labels",),
    "factuality_classification": ("label",),
    "fixing_factuality": ("fixed_summary",),
    "unsupported_span_prediction": ("annotated_summary",),
    "topicbased_summarization": ("output_lines",),
}


def task_features(task_name: str, labelled: bool = True):
    """The datasets.Features of a task's records (fixed, so empty splits keep their columns);
    without the answer's columns for unlabelled inputs."""
    from datasets import Features, List, Value
    text, index = Value("string"), Value("int64")
    by_kind = {TEXT: text, LINES: List(text), INDEX: index, LABEL: index,
               LINE_LABELS: List(index), EVIDENCE: List(List(index))}
    return Features({field: by_kind[kind] for field, kind in schema_of(task_name, labelled)
                     .items()})


def schema_of(task_name: str, labelled: bool = True) -> dict[str, str]:
    """The task's record fields and kinds; unlabelled inputs lack the GOLD_FIELDS."""
    schema = TASK_SCHEMAS[task_name]
    return schema if labelled else {field: kind for field, kind in schema.items()
                                    if field not in GOLD_FIELDS[task_name]}


def is_unlabelled(task_name: str, record: Any) -> bool:
    """Whether a record is an unlabelled input: it has no field of the task's answer."""
    return isinstance(record, dict) and not set(GOLD_FIELDS[task_name]) & set(record)


def _check_field(record: dict, field: str, kind: str) -> None:
    if kind == TEXT:
        require_str(record, field)
    elif kind == LINES:
        require_str_list(record, field)
    elif kind == INDEX:
        require_index(record, field)
    elif kind == LABEL:
        require_binary_label(record, field)
    elif kind == LINE_LABELS:
        labels, lines = require_binary_labels(record, field), record["input_lines"]
        if len(labels) != len(lines):
            raise DataError(f"{len(labels)} labels for {len(lines)} input lines", field=field)
    elif kind == EVIDENCE:
        evidence = require_index_lists(record, field, len(record["input_lines"]))
        if len(evidence) != len(record["summary_lines"]):
            raise DataError(f"{len(evidence)} evidence lists for "
                            f"{len(record['summary_lines'])} summary lines", field=field)


def check_record(task_name: str, record: Any, labelled: bool = True) -> None:
    """Raise DataError(field=...) unless `record` has exactly the task's fields, each of its
    kind (TASK_SCHEMAS; lists of per-line labels or evidence fit the lines they refer to);
    with `labelled` False, exactly those but the answer's (GOLD_FIELDS: public inputs).
    Fields are checked in column order, so `input_lines` and `summary_lines` are checked
    before the labels that refer to them."""
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {json_type(record)}")
    schema = schema_of(task_name, labelled)
    if set(record) != set(schema):
        missing, extra = sorted(set(schema) - set(record)), sorted(set(record) - set(schema))
        raise DataError(f"record fields differ from {task_name}'s: missing {missing}, "
                        f"unexpected {extra}", field=(missing or extra)[0])
    for field, kind in schema.items():
        _check_field(record, field, kind)


def _check_records(task_name: str, records: list, path: str | None,
                   line_numbers: list[int] | None) -> bool:
    """Check every record; returns whether they are labelled. A file of unlabelled inputs
    (no record holds an answer field, as the first one) is checked without them."""
    labelled = not (records and is_unlabelled(task_name, records[0]))
    for position, record in enumerate(records):
        try:
            check_record(task_name, record, labelled)
        except DataError as record_error:
            line = line_numbers[position] if line_numbers else position + 1
            error = record_error
            if not labelled and not is_unlabelled(task_name, record):
                error = DataError(f"the file's first record has no answer "
                                  f"({', '.join(GOLD_FIELDS[task_name])}), this one has: "
                                  f"a file holds labelled records or unlabelled inputs, "
                                  f"not both", field=GOLD_FIELDS[task_name][0])
            raise error.located(path, line) from None
    return labelled


def _checked_lines(task_name: str, path: Path) -> list[tuple[int, dict]]:
    """(line, record) pairs of a task file, every record checked (DataError: path, line)."""
    numbered = list(iter_jsonl(path))
    _check_records(task_name, [record for _, record in numbered], str(path),
                   [line for line, _ in numbered])
    return numbered


def records_to_dataset(task_name: str, records: list[dict], path: str | None = None,
                       line_numbers: list[int] | None = None):
    """A datasets.Dataset with the task's fixed columns, in record order. Every record is
    checked first (`check_record`), so nothing is cast: a bad one is a DataError naming
    `path`, its line (or 1-based position) and the field."""
    from datasets import Dataset
    labelled = _check_records(task_name, records, path, line_numbers)
    features = task_features(task_name, labelled)
    columns = {name: [record[name] for record in records] for name in features}
    return Dataset.from_dict(columns, features=features)


def load_task_split(task_name: str, split: str, variant: str = "all",
                    data_dir: str | Path | None = None, **source):
    """One task split as a datasets.Dataset, in file order (see read_task_records)."""
    _check_names(task_name, split)
    root = resolve_data_dir(data_dir, **source)
    path = task_split_path(root, task_name, split, variant)
    numbered = list(iter_jsonl(path))
    return records_to_dataset(task_name, [record for _, record in numbered], str(path),
                              [line for line, _ in numbered])
