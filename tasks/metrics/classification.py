"""Binary classification metrics of the USB evaluation (EXT, EVEXT, FAC).

Official rules (docs/usb-format.md §3-§4): labels and probabilities are pooled (EXT and EVEXT:
every input line of every record; FAC: one value per record); precision, recall, F1 and accuracy
use the probabilities rounded by numpy (half to even, so 0.5 -> 0); AUC uses the probabilities.
A probability list whose length differs from the number of labels is truncated or padded with 0.
A FAC prediction must be `[p_yes]`; the score is 1 - p_yes, and any other length scores 0.

Undefined metrics are never dropped silently: AUC needs both classes among the labels, so
with one class `binary_scores` gives `"auc": None` (JSON null; the official evaluation's
scikit-learn call fails there) and says why under `UNDEFINED_REASONS` (`{"auc": reason}`), a
key present only when some metric is undefined. Precision (no predicted positive) and recall
(no positive label) follow scikit-learn's convention and are 0; accuracy is None without labels.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.plumbing.errors import SumbenchError

CLASSIFICATION_KEYS = ("precision", "recall", "f1", "accuracy", "auc")
#: the key of a metric dict that maps each undefined (None) metric to the reason
UNDEFINED_REASONS = "undefined_reasons"


class UndefinedMetricError(SumbenchError, ValueError):
    """A metric is mathematically undefined for these labels (e.g. AUC with one class)."""


def with_undefined(scores: dict, reasons: dict[str, str]) -> dict:
    """`scores` with each metric of `reasons` set to None and the reasons under
    `UNDEFINED_REASONS` (unchanged when `reasons` is empty)."""
    if not reasons:
        return scores
    return {**scores, **{key: None for key in reasons}, UNDEFINED_REASONS: dict(reasons)}


def undefined_reasons(scores: dict) -> dict[str, str]:
    """{metric: reason} of the None metrics of `scores` ("no reason given" where none is)."""
    given = scores.get(UNDEFINED_REASONS) or {}
    return {key: given.get(key, "no reason given") for key, value in scores.items()
            if value is None}


def align_to_labels(probabilities: Sequence[float], n_labels: int) -> tuple[list[float], bool]:
    """Truncate, or pad with 0, to `n_labels` values; the flag says whether lengths differed."""
    values = list(probabilities)[:n_labels]
    values += [0] * (n_labels - len(values))
    return values, len(probabilities) != n_labels


def rounded_classes(probabilities: Sequence[float]) -> np.ndarray:
    """Numpy rounding (half to even: 0.5 -> 0, 1.5 -> 2) as integer classes."""
    return np.round(np.asarray(probabilities, dtype=float)).astype(int)


def binary_scores(probabilities: Sequence[float], labels: Sequence[int]) -> dict:
    """precision, recall, f1, accuracy (rounded probabilities) and auc (raw probabilities).

    The first four come from the confusion counts with scikit-learn's formulas (f1 =
    2·tp / (2·tp + fp + fn)), so they equal `sklearn.metrics.*_score` bit for bit without
    its per-call validation cost; auc is `sklearn.metrics.roc_auc_score`'s (`roc_auc`, the
    same). A metric that is undefined here (auc with one class) is None, with its reason (see
    `with_undefined`).
    """
    if len(probabilities) != len(labels):
        raise ValueError(f"{len(probabilities)} probabilities but {len(labels)} labels")
    y_true = np.asarray(labels, dtype=int)
    classes = sorted(np.unique(y_true).tolist())
    if not set(classes) <= {0, 1}:
        raise ValueError(f"labels must be 0 or 1, got {classes}")
    y_score = np.asarray(probabilities, dtype=float)
    scores = count_scores(y_true, rounded_classes(y_score))
    if not classes:
        return with_undefined(scores, {"accuracy": "no labels", "auc": "no labels"})
    if len(classes) == 1:
        return with_undefined(scores, {"auc": f"only one class in the labels (all "
                                              f"{len(y_true)} are {classes[0]})"})
    return {**scores, "auc": roc_auc(y_true, y_score)}


def roc_auc(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """`sklearn.metrics.roc_auc_score` of 0/1 labels (both present) bit for bit, without its
    per-call validation (a board's 1,000 bootstrap resamples per entry spent 90% of their
    time there): scikit-learn's steps in its order (scores sorted descending, one ROC point
    per distinct score, collinear points dropped, (0, 0) prepended, rates divided by their
    last value, the trapezoid sum). Non-finite scores go to scikit-learn, which refuses them."""
    if not np.all(np.isfinite(y_score)):
        from sklearn import metrics as sk_metrics

        return float(sk_metrics.roc_auc_score(y_true, y_score))
    order = np.argsort(y_score, kind="stable")[::-1]
    sorted_score = y_score[order]
    ends = np.concatenate([np.nonzero(np.diff(sorted_score))[0], [y_score.size - 1]])
    tps = np.cumsum(y_true[order].astype(np.float64))[ends]
    fps = 1 + ends.astype(np.float64) - tps
    if fps.shape[0] > 2:
        corners = np.logical_or(np.diff(fps, 2), np.diff(tps, 2))
        keep = np.nonzero(np.concatenate([[True], corners, [True]]))[0]
        fps, tps = fps[keep], tps[keep]
    fpr = np.concatenate([[0.0], fps]) / fps[-1]
    tpr = np.concatenate([[0.0], tps]) / tps[-1]
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0))


def micro_f1(probabilities: Sequence[float], labels: Sequence[int]) -> float | None:
    """F1 micro-averaged over both classes of probabilities rounded as the other metrics
    (for one label per item it equals accuracy: every item is one true or false
    prediction); None without items."""
    if not labels:
        return None
    y_true = np.asarray(labels, dtype=int)
    y_class = rounded_classes(np.asarray(probabilities, dtype=float))
    correct = int(np.sum(y_true == y_class))
    # micro precision = micro recall = correct / items, so F1 is the same fraction
    return correct / len(y_true)


def count_scores(y_true: np.ndarray, y_class: np.ndarray) -> dict:
    """precision, recall, f1 (0 where undefined, as scikit-learn) and accuracy (None for
    empty arrays) of 0/1 arrays."""
    true_positive = int(np.sum((y_true == 1) & (y_class == 1)))
    predicted, actual = int(np.sum(y_class == 1)), int(np.sum(y_true == 1))
    return {
        "precision": true_positive / predicted if predicted else 0.0,
        "recall": true_positive / actual if actual else 0.0,
        "f1": 2 * true_positive / (predicted + actual) if predicted + actual else 0.0,
        "accuracy": int(np.sum(y_true == y_class)) / len(y_true) if len(y_true) else None,
    }


# ---- FAC: one [p_yes] per record -------------------------------------------------------
def decision_scores(labels: Sequence[int], decisions: Sequence[int],
                    probabilities: Sequence[float]) -> dict:
    """Binary decisions against labels: `micro_f1` (F1 micro-averaged over both classes,
    which for one decision per item is accuracy: the QAPyramid paper's presence metric),
    precision, recall and f1 of the positive class, `balanced_accuracy` (the mean of the two
    classes' recalls; None with one class) and `auc` of the probabilities (None with one
    class); `n` items, `positives` labelled 1."""
    y_true, y_class = np.asarray(labels, dtype=int), np.asarray(decisions, dtype=int)
    scores = count_scores(y_true, y_class)
    by_probability = binary_scores(probabilities, labels)
    recalls = [float(np.mean(y_class[y_true == value] == value))
               for value in (0, 1) if np.any(y_true == value)]
    return {"micro_f1": scores["accuracy"], **scores,
            "balanced_accuracy": float(np.mean(recalls)) if len(recalls) == 2 else None,
            "auc": by_probability.get("auc"), "n": int(len(y_true)),
            "positives": int(np.sum(y_true == 1))}


def fac_probability(prediction: Sequence[float]) -> float:
    """Probability of "unsupported": 1 - p_yes for `[p_yes]`, 0 for a list of another length."""
    return 1 - prediction[0] if len(prediction) == 1 else 0


def fac_examples(predictions: Sequence[Sequence[float]],
                 labels: Sequence[int]) -> list[tuple[list[float], list[int]]]:
    """Per-record ([probability of unsupported], [label]) pairs, for pooling or resampling."""
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
    return [([fac_probability(prediction)], [label])
            for prediction, label in zip(predictions, labels)]


def fac_scores(predictions: Sequence[Sequence[float]], labels: Sequence[int]) -> dict:
    """FAC metrics; `length_mismatches` counts predictions that are not one-element lists."""
    scores = pooled_scores(fac_examples(predictions, labels))
    scores["length_mismatches"] = sum(len(prediction) != 1 for prediction in predictions)
    return scores


# ---- EXT / EVEXT: one probability per input line, pooled ------------------------------
def evidence_line_labels(indices: Sequence[int], n_lines: int) -> list[int]:
    """0/1 per input line: 1 for the evidence line indices (0-based, each < n_lines)."""
    labels = [0] * n_lines
    for index in indices:
        if not 0 <= index < n_lines:
            raise ValueError(f"evidence line index {index} outside 0..{n_lines - 1}")
        labels[index] = 1
    return labels


def line_examples(predictions: Sequence[Sequence[float]], line_labels: Sequence[Sequence[int]]
                  ) -> tuple[list[tuple[list[float], list[int]]], int]:
    """Per-record (aligned probabilities, labels) pairs and the number of length mismatches."""
    if len(predictions) != len(line_labels):
        raise ValueError(f"{len(predictions)} predictions but {len(line_labels)} label lists")
    examples, mismatches = [], 0
    for prediction, labels in zip(predictions, line_labels):
        aligned, mismatch = align_to_labels(prediction, len(labels))
        examples.append((aligned, list(labels)))
        mismatches += mismatch
    return examples, mismatches


def pooled_scores(examples: Sequence[tuple[Sequence[float], Sequence[int]]]) -> dict:
    """`binary_scores` over the concatenation of per-record (probabilities, labels) pairs."""
    if not examples:
        return binary_scores([], [])
    probabilities = np.concatenate([np.asarray(values, dtype=float) for values, _ in examples])
    labels = np.concatenate([np.asarray(record_labels, dtype=int)
                             for _, record_labels in examples])
    return binary_scores(probabilities, labels)


def flagged_scores(examples: Sequence[tuple[Sequence[float], Sequence[int], bool]]) -> dict:
    """`pooled_scores` over (probabilities, labels, mismatched) items, plus `length_mismatches`."""
    scores = pooled_scores([(values, labels) for values, labels, _ in examples])
    scores["length_mismatches"] = sum(bool(mismatched) for _, _, mismatched in examples)
    return scores


def line_scores(predictions: Sequence[Sequence[float]],
                line_labels: Sequence[Sequence[int]]) -> dict:
    """EXT/EVEXT metrics over all lines pooled, plus `length_mismatches` (records aligned)."""
    examples, mismatches = line_examples(predictions, line_labels)
    scores = pooled_scores(examples)
    scores["length_mismatches"] = mismatches
    return scores
