"""Per-item metric values, for looking at results item by item (`sumbench view`).

They come from the same material `sumbench score` aggregates (`task.score_examples` of the
records, tasks.scoring.score_task_examples), one dict per record:

- text tasks (ABS, COMP, TOPIC, FIX): rouge1, rouge2, rougel, exactmatch and their geometric
  mean; the task's rouge1, rouge2, rougel and exactmatch are the means of these (with the
  default `--rouge-aggregate mean`), its rouge_gmean the geometric mean of those means;
- FAC: p(Yes) against the gold label, and whether the decision at 0.5 is right; the task's
  accuracy is the mean of those, its AUC, precision, recall and F1 are over all records;
- EXT, EVEXT: per article, the share of lines decided right at 0.5 and the line counts; every
  task metric is over all lines pooled (accuracy: the line-weighted mean of these);
- UNSUP: per summary, its span counts and the precision, recall and F1 they give; the task's
  are over the counts of all summaries pooled.

`item_kind(task)` says which; `MEAN_METRICS` names the task metrics that are plain means of
an item value (tests/tasks/test_item_values.py checks them against `sumbench score`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.metrics.rouge import geometric_mean

#: item kind -> {task metric: the item value whose plain mean it is}
MEAN_METRICS = {"text": {name: name for name in ("rouge1", "rouge2", "rougel", "exactmatch")},
                "fac": {"accuracy": "correct"}, "lines": {}, "spans": {}}
#: item kind -> the item value items are sorted and filtered by
PRIMARY = {"text": "rouge_gmean", "fac": "correct", "lines": "accuracy", "spans": "f1"}
#: item kind -> what the task's other metrics are, as the viewer says it
CORPUS_NOTES = {
    "text": "rouge_gmean is the geometric mean of the mean ROUGE-1, -2 and -L, not a mean of "
            "the items' values",
    "fac": "AUC, precision, recall and F1 are over all records together, not means of items",
    "lines": "every metric is over all lines of all items pooled (accuracy: the line-weighted "
             "mean of the items')",
    "spans": "precision, recall and F1 are over the span counts of all items pooled, not "
             "means of items",
}


def primary_value(task) -> str:
    """The item value items are sorted and filtered by: the task's headline metric when it is
    a mean of items (FIX's exact match), else the kind's main value."""
    kind = item_kind(task)
    means = MEAN_METRICS[kind]
    return means[task.main_metric] if task.main_metric in means else PRIMARY[kind]


def item_kind(task) -> str:
    """"text", "fac", "lines" or "spans": how the task's items are scored."""
    if task.output_kind == "spans":
        return "spans"
    if task.output_kind != "probabilities":
        return "text"
    return "fac" if "label" in getattr(task, "record_fields", ()) else "lines"


def item_values(kind: str, material) -> dict[str, Any]:
    """The per-item values of one record's material (`task.score_examples`)."""
    return _VALUES[kind](material)


def _text(material: dict) -> dict[str, Any]:
    values = {key: float(material[key]) for key in ("rouge1", "rouge2", "rougel", "exactmatch")}
    values["rouge_gmean"] = geometric_mean([values["rouge1"], values["rouge2"], values["rougel"]])
    return values


def _decided(probability: float) -> int:
    """The decision at 0.5, rounded as numpy rounds (0.5 goes to 0)."""
    return 1 if probability > 0.5 else 0


def _fac(material: Sequence) -> dict[str, Any]:
    scores, labels, mismatched = material
    unsupported, label = float(scores[0]), int(labels[0])
    return {"p_yes": 1.0 - unsupported, "label": label,
            "correct": int(_decided(unsupported) == label), "length_mismatch": bool(mismatched)}


def _lines(material: Sequence) -> dict[str, Any]:
    probabilities, labels, mismatched = material
    right = sum(_decided(float(p)) == int(label) for p, label in zip(probabilities, labels))
    return {"accuracy": right / len(labels) if len(labels) else None, "lines": len(labels),
            "right": right, "gold_positive": int(sum(labels)),
            "predicted_positive": sum(_decided(float(p)) for p in probabilities),
            "length_mismatch": bool(mismatched)}


def _spans(material: Sequence) -> dict[str, Any]:
    correct, predicted, gold = (int(value) for value in material)
    precision = correct / predicted if predicted else None
    recall = correct / gold if gold else None
    f1 = None
    if predicted or gold:
        p, r = precision or 0.0, recall or 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"correct": correct, "predicted": predicted, "gold": gold, "precision": precision,
            "recall": recall, "f1": f1}


_VALUES = {"text": _text, "fac": _fac, "lines": _lines, "spans": _spans}
