"""Reading the official converter's windowed EXT / EVEXT prediction files.

The USB release's Flan-T5 conversion cuts an article's lines into windows and its prediction
files keep one record per window: `sub_index` numbers the windows (0, 1, ...), `input_lines`
and `labels` are the window's (EXT: 0/1 per window line; EVEXT: indices of the window's
evidence lines, counted from the window's first line), `prediction` the window's
probabilities, and EVEXT records name their claim by `summ_idx`. The official evaluation
pools every window's (labels, prediction) after cutting or zero-padding each window's
prediction to the window's lines. `stitch_windows` turns the windows of one item back into
one record in sumbench's shape: lines and labels concatenated (EVEXT indices shifted by the
window's offset), each window's prediction cut or padded to its lines and concatenated — the
same pooled lines and probabilities, so the same scores — with the number of windows whose
prediction had the wrong length kept in `window_length_mismatches` (counted as length
mismatches by the scoring).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from tasks import canonical_task_name, get_task
from tasks.plumbing.errors import DataError, UnknownNameError
from tasks.validation import require_index, require_str, require_str_list

WINDOWED_TASKS = ("extractive_summarization", "evidence_extraction")
Located = tuple[str, int, dict]
#: fields of an item that its official windows do not carry (EVEXT's claim is only inside
#: their input_string), so a record stitched from them lacks
NOT_IN_WINDOWS = ("claim",)


def _canonical(name) -> str | None:
    try:
        return canonical_task_name(name) if isinstance(name, str) else None
    except UnknownNameError:
        return None


def is_window(record: dict) -> bool:
    return "sub_index" in record and _canonical(record.get("task")) in WINDOWED_TASKS


def _group_key(task: str, entry: Located) -> tuple:
    """(task, id, summ_idx or None) of a window whose naming fields are checked."""
    path, line, record = entry
    try:
        require_str(record, "id")
        require_index(record, "sub_index")
        if task == "evidence_extraction":
            require_index(record, "summ_idx")
    except DataError as error:
        raise error.located(path, line) from None
    return (task, record["id"], record["summ_idx"] if task == "evidence_extraction" else None)


def _fit(values: list, size: int) -> tuple[list, bool]:
    fitted = [float(value) for value in values][:size]
    return fitted + [0.0] * (size - len(fitted)), len(values) != size


def _stitch(task, windows: list[Located]) -> Located:
    path, line, first = windows[0]
    ordered = sorted(windows, key=lambda item: item[2]["sub_index"])
    numbers = [item[2]["sub_index"] for item in ordered]
    if numbers != list(range(len(ordered))):
        where = next(item for position, item in enumerate(ordered)
                     if item[2]["sub_index"] != position)  # the first out of sequence
        raise DataError(f"windows of {task.name} id={first.get('id')!r} have sub_index "
                        f"{numbers}; expected 0..{len(ordered) - 1} once each",
                        path=where[0], line=where[1], field="sub_index")
    lines, labels, prediction, mismatches = [], [], [], 0
    for window_path, window_line, window in ordered:
        try:
            require_str_list(window, "input_lines")
            task.validate_record(dict(window, task=task.name))
        except DataError as error:
            raise error.located(window_path, window_line) from None
        size = len(window["input_lines"])
        if task.name == "evidence_extraction":
            labels.extend(len(lines) + index for index in window["labels"])
        else:
            labels.extend(window["labels"])
        fitted, mismatched = _fit(window["prediction"], size)
        prediction.extend(fitted)
        mismatches += mismatched
        lines.extend(window["input_lines"])
    stitched = {key: value for key, value in first.items()
                if key not in ("sub_index", "input_string", "output_string")}
    stitched.update(task=task.name, input_lines=lines, labels=labels, prediction=prediction,
                    windows=len(ordered), window_length_mismatches=mismatches)
    return path, line, stitched


def stitch_windows(located: Iterable[Located]) -> Iterator[Located]:
    """The records with every item's windows replaced by one stitched record; other records
    pass through at once (streaming). Windows are held until the input ends (an item's windows
    may lie anywhere in it), then their stitched records follow in the order of each item's
    first window."""
    groups: dict[tuple, list[Located]] = {}
    for entry in located:
        record = entry[2]
        if isinstance(record, dict) and is_window(record):
            groups.setdefault(_group_key(_canonical(record["task"]), entry), []).append(entry)
        else:
            yield entry
    for key, windows in groups.items():
        yield _stitch(get_task(key[0]), windows)
