"""Score prediction files in the official USB record shape.

Reading: the official converter's windowed EXT / EVEXT records (`sub_index`) are stitched
back into one record per item first (tasks.windowed). Every JSON line must name its `task` (a
registered name or alias); records are validated by `task.validate_record` (fields, types,
finite probabilities in [0, 1]); a record whose identity (tasks.identity: task, `id`,
`summ_idx` and the task's `identity_extra`; the text fields `claim` and `summary_sent` stand in
for a missing `summ_idx`) repeats an earlier one is an error naming both places.

Scoring: `task.score(records)` and `task.headline(scores)` are the only task-specific code. Each
task's result is `{metric: value, ..., "headline", "n_records", "length_mismatches",
"undefined"}`; length mismatches (predictions truncated or padded officially) are counted and
reported on stderr, not rejected. A metric undefined on the data (e.g. AUC with one class) keeps
its key with the value None (JSON null), is listed in `"undefined"` and reported on stderr with
the reason; the headline is None when its metric is. With `bootstrap=N`, `"ci95": {metric: [low,
high]}` holds percentile intervals over N resamples of the task's records (seed `seed`, the same
for every task, so a task's interval does not depend on which other tasks are scored; records are
resampled in the order of their identity digests, so the interval does not depend on the order of
the records or on how they are split into files); the point estimates stay those of the full data.
A metric undefined on a resample is left out of its own interval only (`"bootstrap":
{"undefined_resamples": {metric: count}}`); one undefined on every resample has the interval None.
Resamples are drawn from the task's per-record `score_examples` and scored with its
`aggregate_scores`, so nothing is re-scored per resample.
"""
from __future__ import annotations

import math
import os
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from tasks import canonical_task_name, get_task
from tasks.gold import GoldCheck
from tasks.identity import describe, in_identity_order, record_digest, record_key
from tasks.metrics import rouge
from tasks.metrics.bootstrap import bootstrap as run_bootstrap
from tasks.metrics.classification import UNDEFINED_REASONS, UndefinedMetricError, undefined_reasons
from tasks.plumbing.chunk_workers import ChunkWorkers
from tasks.plumbing.errors import DataError, SumbenchError, UnknownNameError, json_type
from tasks.plumbing.io import check_distinct_files, iter_jsonl
from tasks.plumbing.registry import TASKS
from tasks.validation import require_index, require_str
from tasks.windowed import stitch_windows


class _Tasks:
    """Task instances by any registered name, created once, each with the scoring options it
    takes (`Task.option_names`, e.g. the ROUGE aggregate of text tasks)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self._by_name: dict[str, Any] = {}
        self.options = dict(options or {})

    def get(self, name: str):
        if name not in self._by_name:
            taken = TASKS.get(canonical_task_name(name)).option_names
            self._by_name[name] = get_task(name, **{key: value for key, value in
                                                    self.options.items() if key in taken})
        return self._by_name[name]


# ---- validation ------------------------------------------------------------------------
def _checked_record(tasks: _Tasks, record: dict, path: str, line: int) -> tuple[Any, dict]:
    """(task, record with the canonical task name), or a DataError naming path and line."""
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {json_type(record)}",
                        path=path, line=line)
    name = record.get("task")
    if not isinstance(name, str):
        raise DataError("missing field" if "task" not in record else
                        f"expected a task name, got {json_type(name)}",
                        path=path, line=line, field="task")
    try:
        task = tasks.get(name)
    except UnknownNameError as error:
        raise DataError(str(error), path=path, line=line, field="task") from None
    record = dict(record, task=task.name)
    try:
        task.validate_record(record)
        _check_identity(record)
    except DataError as error:
        raise error.located(path, line) from None
    return task, record


def _check_identity(record: dict) -> None:
    """An `id` is a string and a `summ_idx` a non-negative integer where present: a record
    whose `summ_idx` is 0.0 or "0" would otherwise escape the duplicate check."""
    if "id" in record:
        require_str(record, "id")
    if "summ_idx" in record:
        require_index(record, "summ_idx")


def collect_records(located: Iterable[tuple[str, int, dict]]) -> dict[str, list[dict]]:
    """Validate (path, line, record) triples and group the records by canonical task name."""
    tasks, seen = _Tasks(), {}
    by_task: dict[str, list[dict]] = {}
    for path, line, raw in located:
        task, record = _checked_record(tasks, raw, path, line)
        key = record_key(task, record)
        if key in seen:
            first_path, first_line = seen[key]
            raise DataError(f"duplicate record ({describe(task, record)}), first seen at "
                            f"{first_path}:{first_line}", path=path, line=line, field="id")
        seen[key] = (path, line)
        by_task.setdefault(task.name, []).append(record)
    return by_task


def read_prediction_files(paths: Sequence[str | os.PathLike]) -> dict[str, list[dict]]:
    """Records of all files, validated, grouped by canonical task name (file order kept)."""
    if not paths:
        raise SumbenchError("no prediction files given")
    check_distinct_files(paths)

    by_task = collect_records(stitch_windows(
        (str(path), line, record) for path in paths for line, record in iter_jsonl(path)))
    if not by_task:
        raise DataError("no prediction records", path=", ".join(map(str, paths)))
    return by_task


# ---- scoring ---------------------------------------------------------------------------
def _official_keys(task, scores: Mapping[str, Any]) -> tuple[str, ...]:
    keys = tuple(task.metric_names) or tuple(
        key for key in scores if key not in ("length_mismatches", UNDEFINED_REASONS))
    missing = [key for key in keys if key not in scores]
    if missing:
        raise SumbenchError(f"task {task.name} returned no {', '.join(missing)}")
    bad = [key for key in keys
           if scores[key] is not None and not math.isfinite(float(scores[key]))]
    if bad:
        raise SumbenchError(f"task {task.name} returned non-finite {', '.join(bad)}")
    return keys


def _headline(task, scores: Mapping[str, Any]) -> float | None:
    """The task's headline as a float, None when its metric is undefined."""
    value = task.headline(scores)
    return None if value is None else float(value)


def _statistic(task, aggregate, keys: tuple[str, ...]):
    def statistic(sample: list) -> dict:
        scores = aggregate(sample)
        return {**{key: scores[key] for key in keys}, "headline": _headline(task, scores)}
    return statistic


def bootstrap_task(task, examples: Sequence, keys: tuple[str, ...], *,
                   n_resamples: int, seed: int) -> dict:
    """{"ci95": {metric: [low, high] or None}, "bootstrap": {...}} for one task, from its
    per-record material (`task.score_examples`)."""
    from tqdm.auto import tqdm

    result = run_bootstrap(
        examples, _statistic(task, task.aggregate_scores, keys),
        n_resamples=n_resamples, seed=seed,
        progress=lambda rows, total: tqdm(rows, total=total, desc=f"bootstrap {task.name}",
                                          disable=None, file=sys.stderr, leave=False))
    for key, count in result.undefined.items():
        if count:
            effect = ("no interval" if count == n_resamples else
                      f"its interval uses the other {n_resamples - count}")
            print(f"sumbench score: {task.name}: {key} undefined on {count} of {n_resamples} "
                  f"bootstrap resamples ({effect})", file=sys.stderr)
    return {"ci95": result.intervals,
            "bootstrap": {"resamples": n_resamples, "seed": seed,
                          "undefined_resamples": result.undefined,
                          "confidence": result.confidence}}


def _report_undefined(task, reasons: Mapping[str, str]) -> None:
    for key, reason in reasons.items():
        headline = "; the headline is null" if key == task.main_metric else ""
        print(f"sumbench score: {task.name}: {key} undefined: {reason}{headline}",
              file=sys.stderr)


def score_task_examples(task, records: Sequence[dict], *,
                        report: bool = True) -> tuple[dict, list]:
    """(the task's result as `score_task` gives it without bootstrap, the per-record material
    of `task.score_examples` it was aggregated from, in record order); `report` prints
    undefined metrics and length mismatches on stderr."""
    examples = task.score_examples(records)
    try:
        scores = dict(task.aggregate_scores(examples))
    except UndefinedMetricError as error:
        raise UndefinedMetricError(f"{task.name}: {error}") from None
    return task_result(task, scores, len(records), report=report), examples


def task_result(task, scores: Mapping[str, Any], n_records: int, *,
                report: bool = True) -> dict:
    """The official metrics (`task.aggregate_scores` output) with the headline, the record
    count, length mismatches and undefined metrics; reported on stderr when `report`."""
    scores = dict(scores)
    _official_keys(task, scores)
    reasons = undefined_reasons(scores)
    scores.pop(UNDEFINED_REASONS, None)
    result = {**scores, "headline": _headline(task, scores), "n_records": n_records,
              "length_mismatches": int(scores.get("length_mismatches", 0)),
              "undefined": list(reasons)}
    if report:
        _report_undefined(task, reasons)
        if result["length_mismatches"]:
            print(f"sumbench score: {task.name}: {result['length_mismatches']} predictions "
                  f"had the wrong length ({task.length_mismatch_effect})", file=sys.stderr)
    return result


def score_task(task, records: Sequence[dict], *, bootstrap: int = 0, seed: int = 0) -> dict:
    """Official metrics, headline, counts, undefined metrics and (optionally) bootstrap
    intervals for one task."""
    result, examples = score_task_examples(task, records)
    if bootstrap:
        keys = _official_keys(task, result)
        ordered = in_identity_order(examples, [record_digest(task, r) for r in records])
        result.update(bootstrap_task(task, ordered, keys, n_resamples=bootstrap, seed=seed))
    return result


def _score_grouped(by_task: Mapping[str, Sequence[dict]], *, bootstrap: int, seed: int,
                   workers: int, options: Mapping[str, Any] | None = None) -> dict:
    tasks = _Tasks(options)
    with rouge.using_workers(workers):
        return {name: score_task(tasks.get(name), records, bootstrap=bootstrap, seed=seed)
                for name, records in sorted(by_task.items())}


def score_records(records_by_task: Mapping[str, Sequence[dict]], *, bootstrap: int = 0,
                  seed: int = 0, workers: int = 1, options: Mapping[str, Any] | None = None,
                  locations: Mapping[str, Sequence[tuple[str, int]]] | None = None) -> dict:
    """Validate and score in-memory records grouped by task name (aliases accepted).

    Error messages name `locations[task][i]`, the (file, line) record i came from, when
    given; else its position in its list (1-based) as a line of `<records of TASK>`.
    """
    located = []
    for name, records in records_by_task.items():
        places = (locations or {}).get(name)
        if places is not None and len(places) != len(records):
            raise SumbenchError(f"{len(places)} locations for {len(records)} records of {name}")
        for number, record in enumerate(records, start=1):
            if isinstance(record, dict) and "task" not in record:
                record = dict(record, task=name)
            path, line = places[number - 1] if places is not None \
                else (f"<records of {name}>", number)
            located.append((path, line, record))
    by_task = collect_records(located)
    tasks = _Tasks()
    expected = {tasks.get(name).name for name in records_by_task}
    if set(by_task) - expected:
        raise DataError(f"records name tasks {sorted(set(by_task) - expected)} outside the "
                        f"groups {sorted(records_by_task)}", field="task")
    return _score_grouped(by_task, bootstrap=bootstrap, seed=seed, workers=workers,
                          options=options)


def score_files(paths: Sequence[str | os.PathLike], *, bootstrap: int = 0, seed: int = 0,
                workers: int = 1, options: Mapping[str, Any] | None = None,
                gold: GoldCheck | None = None) -> dict:
    """Read, validate and score prediction files: {task: {metric: value, ...}}; `options`
    go to the tasks that take them (e.g. {"rouge_aggregate": "bootstrap-mid",
    "rouge_seed": 3}). With `gold`, every record must be a gold item with the gold
    references, and every gold item of a scored task must have a record (tasks.gold).

    Streaming: records are validated and turned into their per-record scoring material
    (`task.score_examples`) CHUNK_RECORDS at a time, so only that material (a few numbers per
    record) and one 8-byte digest per record identity (for duplicates) stay in memory — never
    the records. The numbers are those of scoring all records at once. With `workers` > 1
    (and `fork`), full chunks are scored in up to `workers` child processes while this one
    reads on (`tasks.plumbing.chunk_workers`); the numbers do not change."""
    if not paths:
        raise SumbenchError("no prediction files given")
    check_distinct_files(paths)

    def located() -> Iterable[tuple[str, int, dict]]:
        return stitch_windows((str(path), line, record) for path in paths
                              for line, record in iter_jsonl(path))

    tasks = _Tasks(options)
    with ChunkWorkers(workers, min_chunk=CHUNK_RECORDS) as chunk_workers, \
            rouge.using_workers(1 if chunk_workers.workers > 1 else workers):
        streams = stream_examples(located(), tasks, rescan=located, workers=chunk_workers,
                                  gold=gold)
    if not streams:
        raise DataError("no prediction records", path=", ".join(map(str, paths)))
    if gold is not None:
        gold.check_complete(", ".join(map(str, paths)))
    return {name: _stream_result(stream, bootstrap=bootstrap, seed=seed)
            for name, stream in sorted(streams.items())}


#: records validated and scored per task at a time by `score_files`
CHUNK_RECORDS = 4096


def chunk_material(task, records: Sequence[dict]) -> list:
    """A chunk's per-record scoring material, compacted where the task can."""
    examples = task.score_examples(records)
    compact = getattr(task, "compact_examples", None)
    return compact(examples) if compact else examples


class TaskStream:
    """One task's per-record scoring material, built CHUNK_RECORDS records at a time (full
    chunks in worker processes when `workers` allows; the material keeps record order)."""

    def __init__(self, task, workers: ChunkWorkers | None = None) -> None:
        self.task, self.pending, self.parts, self.n_records = task, [], [], 0
        self.digests = array("Q")  # identity digest of each record, in record order
        self.workers = workers or ChunkWorkers(1)
        self._examples: list | None = None

    def add(self, record: dict, digest: int) -> None:
        self.pending.append(record)
        self.digests.append(digest)
        if len(self.pending) >= CHUNK_RECORDS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.parts.append(self.workers.submit(partial(chunk_material, self.task),
                                                  self.pending, kind=self.task.name))
            self.n_records += len(self.pending)
            self.pending, self._examples = [], None

    @property
    def examples(self) -> list:
        if self._examples is None:
            self._examples = [example for part in self.parts for example in part.result()]
        return self._examples


def stream_examples(located: Iterable[tuple[str, int, dict]], tasks: _Tasks | None = None, *,
                    rescan=None, workers: ChunkWorkers | None = None,
                    gold: GoldCheck | None = None) -> dict[str, TaskStream]:
    """Validate (path, line, record) triples and score them chunk by chunk per task (full
    chunks on `workers`). A duplicate record is an error naming both places (the first one
    found by `rescan()`, a second pass over the same input, since only digests are kept).
    With `gold`, each record is checked against the gold items (`GoldCheck.check`)."""
    tasks = tasks or _Tasks()
    seen: set[int] = set()
    streams: dict[str, TaskStream] = {}
    for path, line, raw in located:
        task, record = _checked_record(tasks, raw, path, line)
        digest = record_digest(task, record)
        if digest in seen:
            raise _duplicate(task, record, path, line, digest, rescan, tasks)
        seen.add(digest)
        if gold is not None:
            gold.check(task, record, digest, path, line)
        if task.name not in streams:
            streams[task.name] = TaskStream(task, workers)
        streams[task.name].add(record, digest)
    for stream in streams.values():
        stream.flush()
    return streams


def _duplicate(task, record, path, line, digest, rescan, tasks) -> DataError:
    first = None
    for first_path, first_line, raw in (rescan() if rescan else ()):
        other_task, other = _checked_record(tasks, raw, first_path, first_line)
        if record_digest(other_task, other) == digest:
            first = f"{first_path}:{first_line}"
            break
    where = f", first seen at {first}" if first else ""
    return DataError(f"duplicate record ({describe(task, record)}){where}", path=path,
                     line=line, field="id")


def _stream_result(stream: TaskStream, *, bootstrap: int, seed: int) -> dict:
    task, examples = stream.task, stream.examples
    try:
        scores = dict(task.aggregate_scores(examples))
    except UndefinedMetricError as error:
        raise UndefinedMetricError(f"{task.name}: {error}") from None
    result = task_result(task, scores, stream.n_records)
    if bootstrap:
        keys = _official_keys(task, result)
        ordered = in_identity_order(examples, stream.digests)
        result.update(bootstrap_task(task, ordered, keys, n_resamples=bootstrap, seed=seed))
    return result
