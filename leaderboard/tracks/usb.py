"""Track "usb": the eight USB tasks on hidden test gold, one board per variant.

Gold is the `test` split of every variant and task of a task-datasets folder written by
`sumbench data build` (`<variant>/<task>/test.jsonl`), kept as the official prediction records
the task would write (`task.prediction_record`) minus `prediction`, in dataset order, with the
file's sha256. A submitted line needs `task`, the item's ids (`id`, plus `summ_idx` where the
task has one, and for FAC `summary_sent`, since the two records of one edited sentence share
`summ_idx`) and `prediction`; any other field (`output_string`, `label`, ...) is ignored. The
public manifest lists items sorted by their ids, never in gold order (FAC's gold order would
tell the label).
Scoring joins each prediction onto its gold record and runs `tasks.scoring` — the code of
`sumbench score` — so an entry's scores are exactly what `sumbench score --out` writes for the
same predictions with the gold fields filled in.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.ranking import headline_statistic
from leaderboard.tracks.base import (
    ErrorCollector,
    Located,
    PartScore,
    Track,
    check_id_types,
    check_item,
    gold_match_summary,
    ids_readable,
    report_missing,
    unplaced_count,
)
from leaderboard.tracks.gold_copies import copies_order, near_copy
from leaderboard.tracks.usb_public import apart_articles, hosted_usb, public_inputs
from tasks import get_task, task_names
from tasks.base import SPLITS
from tasks.gold import gold_templates
from tasks.plumbing.errors import DataError, SumbenchError, UnknownNameError, json_type
from tasks.plumbing.io import file_sha256
from tasks.scoring import score_task_examples, task_result
from tasks.validation import require_probabilities

TEST_SPLIT = "test"


#: fields that can name a test item, in this order (FAC's two records of one sentence share
#: `summ_idx` and differ in `summary_sent`)
ID_FIELDS = ("id", "summ_idx", "summary_sent")
TEXT_ID_FIELDS = ("summary_sent",)


def identity_fields(task) -> tuple[str, ...]:
    """The fields that name one test item of the task: `id`, plus `summ_idx` and
    `summary_sent` when the task's records have them."""
    return _identity_fields(tuple(getattr(task, "record_fields", ())))


@functools.cache
def _identity_fields(record_fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(field for field in ID_FIELDS if field == "id" or field in record_fields)


@functools.cache
def _has_text_field(fields: tuple[str, ...]) -> bool:
    return any(field in TEXT_ID_FIELDS for field in fields)


#: text id fields appear in the public manifest as digests (FAC's claims are COMP and FIX
#: references: the manifest must not spell them out)
DIGEST_SUFFIX = "_sha256"


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def item_key(task, item: Mapping) -> tuple:
    """The item's key: id fields, with text fields as digests (a submitted record carries the
    text, a manifest item its digest)."""
    return item_keys(task, (item,))[0]


def item_keys(task, items: Iterable[Mapping]) -> list[tuple]:
    """`item_key` of each item (the task's fields looked up once)."""
    fields = identity_fields(task)
    if not _has_text_field(fields):
        return [tuple(map(item.get, fields)) for item in items]
    plan = [(field, field in TEXT_ID_FIELDS) for field in fields]
    return [tuple(_text_key(item, field) if is_text else item.get(field)
                  for field, is_text in plan) for item in items]


def _text_key(item: Mapping, field: str):
    value = item.get(field)
    return text_digest(value) if isinstance(value, str) else item.get(field + DIGEST_SUFFIX)


def manifest_item(task, item: Mapping, length: int | None) -> dict:
    fields = identity_fields(task)
    names = [field + DIGEST_SUFFIX if field in TEXT_ID_FIELDS else field for field in fields]
    return {**dict(zip(names, item_key(task, item))), "n": length}


def key_text(task, key: tuple) -> str:
    names = [field + DIGEST_SUFFIX if field in TEXT_ID_FIELDS else field
             for field in identity_fields(task)]
    return ", ".join(f"{name}={value!r}" for name, value in zip(names, key))


def prediction_length(task, template: Mapping) -> int | None:
    """How many probabilities a prediction holds (None for text tasks): one per input line for
    line-labelling tasks, one for FAC."""
    if task.output_kind != "probabilities":
        return None
    return len(template["input_lines"]) if "input_lines" in template \
        and "label" not in template else 1


def _shape_error(task, prediction: Any, expected_length: int | None,
                 strict_lengths: bool = True) -> str | None:
    """Why a prediction has the wrong type or (with `strict_lengths`) length, or None."""
    if task.output_kind != "probabilities":
        return None if isinstance(prediction, str) else \
            f"expected a string, got {json_type(prediction)}"
    try:
        values = require_probabilities({"prediction": prediction})
    except DataError as error:
        return error.reason
    if strict_lengths and expected_length is not None and len(values) != expected_length:
        return (f"expected {expected_length} probabilities, got {len(values)} (the official "
                f"evaluation would truncate or zero-pad; this instance requires exact lengths)")
    return None


def _note_unplaced(unplaced: dict, entry: Located, tasks: Mapping, expected: Mapping) -> None:
    """Note a rejected record of a known part: its item key, or None when its ids cannot
    name one."""
    name = entry[2].get("task")
    task = tasks.get(name) if isinstance(name, str) else None
    if task is None or task.name not in expected:
        return
    readable = ids_readable(entry[2], identity_fields(task))
    unplaced.setdefault(task.name, []).append(item_key(task, entry[2]) if readable else None)


#: per task, the share of its records that are the gold answer (as its metric sees them) at
#: which an entry copies the public gold there. Text tasks: a fine-tuned Flan-T5 reproduces a
#: reference token for token on a few percent of ABS, TOPIC and COMP items, and exactly on
#: about a third of FIX items (the paper's exact match: 33-37); their copies are memorised
#: test data. Label tasks (decisions, spans): a perfect classifier's equal the gold's too, so
#: the bar is near all of them, and a copy there is flagged, never taken for memorisation.
COPY_SHARES = {"abstractive_summarization": 0.5, "topicbased_summarization": 0.5,
               "multisentence_compression": 0.5, "fixing_factuality": 0.8,
               "extractive_summarization": 0.99, "evidence_extraction": 0.99,
               "factuality_classification": 0.99, "unsupported_span_prediction": 0.99}


class UsbTrack(Track):
    name = "usb"
    title = "USB: eight summarization tasks"
    description = ("The eight USB tasks scored on the server's test gold with the official "
                   "metrics (the code of `sumbench score`).")
    part_kind = "task"
    submission_fields = ("task", "id", "summ_idx", "prediction")

    def __init__(self, strict_lengths: bool = True):
        #: refuse probability lists of another length than the item's; when False they are
        #: accepted and scored as the official evaluation does (and counted as
        #: length_mismatches)
        self.strict_lengths = strict_lengths

    # ---- gold ---------------------------------------------------------------------------
    def load_gold(self, source: str) -> dict[str, dict[str, dict]]:
        root = Path(source)
        if not root.is_dir():
            raise SumbenchError(f"{root}: no such task-datasets folder")
        gold: dict[str, dict[str, dict]] = {}
        for variant_dir in sorted(path for path in root.iterdir() if path.is_dir()):
            for name in task_names("usb"):
                path = variant_dir / name / f"{TEST_SPLIT}.jsonl"
                if path.is_file():
                    task = get_task(name)
                    templates = gold_templates(task, str(root), variant_dir.name, TEST_SPLIT)
                    if templates:
                        gold.setdefault(variant_dir.name, {})[name] = {
                            "task": name, "sha256": file_sha256(path), "templates": templates}
        if not gold:
            raise SumbenchError(f"{root}: no <variant>/<task>/{TEST_SPLIT}.jsonl files of USB "
                                f"tasks (splits: {', '.join(SPLITS)})")
        return gold

    def hosted(self, gold, hosting) -> tuple[dict[str, dict[str, dict]], list]:
        return hosted_usb(gold, hosting)

    def apart(self, stored, hosted, board: str) -> dict[str, list[str]]:
        return apart_articles(stored, hosted, board)

    def inputs(self, gold, board: str) -> dict[str, list[dict]]:
        return public_inputs(gold, board, item_key)

    def subset_result(self, part: str, material: Sequence) -> dict:
        task = get_task(part)
        return task_result(task, task.aggregate_scores(list(material)), len(material),
                           report=False)

    def manifest(self, gold, board: str) -> dict:
        parts = {}
        for name, payload in sorted(gold[board].items()):
            task = get_task(name)
            items = [manifest_item(task, template, prediction_length(task, template))
                     for template in payload["templates"]]
            parts[name] = sorted(items, key=lambda item, task=task: item_key(task, item))
        return {"track": self.name, "board": board, "parts": parts}

    def manifest_from_records(self, located: Sequence[Located], board: str) -> dict:
        parts: dict[str, dict[tuple, dict]] = {}
        for _, _, record in located:
            try:
                task = get_task(str(record.get("task")))
            except UnknownNameError:
                continue
            if ids_readable(record, identity_fields(task)):
                parts.setdefault(task.name, {}).setdefault(
                    item_key(task, record), manifest_item(task, record, None))
        return {"track": self.name, "board": board,
                "parts": {name: list(items.values()) for name, items in parts.items()}}

    # ---- validation ---------------------------------------------------------------------
    def check(self, located: Iterable[Located], manifest: Mapping) -> dict[str, list[dict]]:
        errors = ErrorCollector()
        expected = {name: dict(zip(item_keys(get_task(name), items), items))
                    for name, items in manifest["parts"].items()}
        apart = {name: set(articles) for name, articles in manifest.get("apart", {}).items()}
        seen: dict[str, dict[tuple, tuple[str, int]]] = {}
        checked: dict[str, dict[tuple, dict]] = {}
        tasks: dict[str, Any] = {}  # task name or alias -> task, looked up once
        unplaced: dict[str, list] = {}  # part -> item keys (None: unreadable) of rejected
        for entry in located:              # records (unplaced_count leaves out given items)
            if self._not_hosted(entry, apart, tasks):
                continue
            outcome = self._check_line(errors, entry, manifest, expected, seen, tasks)
            if outcome is not None:
                task, key, record = outcome
                checked.setdefault(task.name, {})[key] = record
            else:
                _note_unplaced(unplaced, entry, tasks, expected)
        for name in seen:
            task = get_task(name)
            report_missing(errors, name, list(expected[name]), seen[name],
                           lambda key, task=task: key_text(task, key),
                           unplaced_count(unplaced.get(name, []), seen[name]))
        if not seen and not errors.errors:
            errors.add("the submission holds no prediction records")
        errors.raise_if_any()
        return {name: [checked[name][key] for key in expected[name]] for name in sorted(seen)}

    @staticmethod
    def _not_hosted(entry: Located, apart: Mapping[str, set], tasks: dict) -> bool:
        """Whether the record is of an article the board does not host for its task (linked
        parts are hosted on other articles): such records are left out, not refused, so the
        predictions of the whole test set submit as they are."""
        name, article = entry[2].get("task"), entry[2].get("id")
        if not apart or not isinstance(name, str) or not isinstance(article, str):
            return False
        try:
            task = tasks[name] if name in tasks else tasks.setdefault(name, get_task(name))
        except UnknownNameError:
            return False
        return article in apart.get(task.name, ())

    def _check_line(self, errors: ErrorCollector, entry: Located, manifest: Mapping,
                    expected: Mapping, seen: dict, tasks: dict) -> tuple | None:
        """(task, item key, minimal record) of a valid line; None (with an error) otherwise."""
        path, line, record = entry
        name = record.get("task")
        if not isinstance(name, str):
            errors.add("missing field" if name is None else "expected a task name",
                       path=path, line=line, field="task")
            return None
        try:
            task = tasks[name] if name in tasks else tasks.setdefault(name, get_task(name))
        except UnknownNameError as error:
            errors.add(str(error), path=path, line=line, field="task")
            return None
        if task.name not in expected:
            errors.add(f"task {task.name} has no test gold on board {manifest['board']!r} "
                       f"(tasks: {', '.join(sorted(expected))})",
                       path=path, line=line, field="task")
            return None
        if not check_id_types(errors, entry, identity_fields(task)):
            return None
        if "prediction" not in record:
            errors.add("missing field", path=path, line=line, field="prediction")
            return None
        key = item_key(task, record)
        if not check_item(errors, entry, seen.setdefault(task.name, {}), key,
                          expected[task.name], lambda: f"{task.name}: {key_text(task, key)}"):
            return None
        problem = _shape_error(task, record["prediction"], expected[task.name][key]["n"],
                               self.strict_lengths)
        if problem:
            errors.add(problem, path=path, line=line, field="prediction")
            return None
        minimal = {field: record[field] for field in identity_fields(task)}
        return task, key, {"task": task.name, **minimal, "prediction": record["prediction"]}

    # ---- scoring ------------------------------------------------------------------------
    def joined_records(self, name: str, records: Sequence[dict], gold, board: str) -> list[dict]:
        """The official records: each gold template with the submitted prediction."""
        task = get_task(name)
        by_key = dict(zip(item_keys(task, records), records))
        templates = gold[board][name]["templates"]
        keys = item_keys(task, templates)
        missing = sum(key not in by_key for key in keys)
        if missing or len(by_key) != len(templates):
            raise DataError(f"{name}: the predictions do not cover the current test gold "
                            f"({missing} missing of {len(templates)})", field="id")
        joined = []
        for template, key in zip(templates, keys):
            full = {**template, "prediction": by_key[key]["prediction"]}
            task.validate_record(full)
            joined.append(full)
        return joined

    def score(self, checked, gold, board: str) -> dict[str, PartScore]:
        parts = {}
        for name, records in sorted(checked.items()):
            task = get_task(name)
            result, material = score_task_examples(
                task, self.joined_records(name, records, gold, board), report=False)
            parts[name] = PartScore(result, result["headline"], list(material))
        return parts

    def gold_match(self, checked, gold, board: str, headlines=None) -> dict:
        """Records whose prediction is the gold answer as the task's metric sees it
        (task.reproduces_gold), per part, against each task's COPY_SHARES; AUC parts also by
        the gold's order, and the entry by its headlines (`leaderboard.tracks.gold_copies`)."""
        if headlines is None:
            headlines = {part: scored.headline
                         for part, scored in self.score(checked, gold, board).items()}
        counts, order_copies = {}, []
        for name, records in sorted(checked.items()):
            task = get_task(name)
            joined = self.joined_records(name, records, gold, board)
            counts[name] = (sum(task.reproduces_gold(record) for record in joined), len(joined),
                            task.output_kind == "text")
            if copies_order(task, joined, headlines.get(name)):
                order_copies.append(name)
        text_parts = [name for name, (_, _, text) in counts.items() if text]
        return gold_match_summary(counts, COPY_SHARES, order_copies,
                                  near_copy(headlines, text_parts))

    def statistic(self, part: str, gold, board: str):
        return headline_statistic(get_task(part))

    def headline_name(self, part: str) -> str:
        return get_task(part).main_metric

    def part_title(self, part: str) -> str:
        return get_task(part).display_name()

    def part_help(self, part: str) -> str:
        task = get_task(part)
        return f"{part}: {task.main_metric} x100. {task.description}"

    def breakdown(self, checked, gold, board: str,
                  materials: Mapping[str, Sequence] | None = None) -> dict | None:
        """Per-domain scores of an `all` entry's public items: domain -> task -> result (the
        domain is the first component of the item id, e.g. `biographies/...`).

        With `materials` (a part's per-record material as `score` returned it, for this same
        gold), a domain's result aggregates the material of its records: the same numbers as
        scoring the domain's records again, without scoring every record a second time."""
        if board != "all":
            return None
        domains: dict[str, dict[str, dict]] = {}
        for name, records in sorted(checked.items()):
            task = get_task(name)
            templates = gold[board][name]["templates"]
            private = set(gold[board][name].get("private", ()))
            material = (materials or {}).get(name)
            if material is None or len(material) != len(templates):
                material = task.score_examples(self.joined_records(name, records, gold, board))
            by_domain: dict[str, list] = {}
            for index, (template, example) in enumerate(zip(templates, material)):
                if index not in private:
                    by_domain.setdefault(str(template["id"]).split("/")[0], []).append(example)
            for domain, subset in sorted(by_domain.items()):
                domains.setdefault(domain, {})[name] = task_result(
                    task, task.aggregate_scores(subset), len(subset), report=False)
        return domains
