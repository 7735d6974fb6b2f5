"""Classification metrics (EXT, EVEXT, FAC): official fixture numbers and the edge rules."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn import metrics as sk_metrics

from tasks.metrics import classification as C
from tasks.plumbing.io import read_jsonl


@pytest.fixture(scope="module")
def expected(usb_fixture_dir) -> dict:
    return json.loads((usb_fixture_dir / "expected_scores.json").read_text())


def fixture(usb_fixture_dir, task: str) -> list[dict]:
    return read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")


def assert_official(scores: dict, official: dict) -> None:
    assert set(official) == set(C.CLASSIFICATION_KEYS)
    for key, value in official.items():
        assert scores[key] == pytest.approx(value, abs=1e-9), key


def test_ext_fixture(usb_fixture_dir, expected):
    records = fixture(usb_fixture_dir, "extractive_summarization")
    scores = C.line_scores([r["prediction"] for r in records], [r["labels"] for r in records])
    assert_official(scores, expected["extractive_summarization"])
    assert scores["length_mismatches"] == 0


def test_evext_fixture(usb_fixture_dir, expected):
    records = fixture(usb_fixture_dir, "evidence_extraction")
    labels = [C.evidence_line_labels(r["labels"], len(r["input_lines"])) for r in records]
    scores = C.line_scores([r["prediction"] for r in records], labels)
    assert_official(scores, expected["evidence_extraction"])


def test_fac_fixture(usb_fixture_dir, expected):
    records = fixture(usb_fixture_dir, "factuality_classification")
    scores = C.fac_scores([r["prediction"] for r in records], [r["label"] for r in records])
    assert_official(scores, expected["factuality_classification"])
    assert scores["length_mismatches"] == 0


def test_align_to_labels():
    assert C.align_to_labels([0.1, 0.2, 0.3], 2) == ([0.1, 0.2], True)
    assert C.align_to_labels([0.1], 3) == ([0.1, 0, 0], True)
    assert C.align_to_labels([0.1, 0.9], 2) == ([0.1, 0.9], False)
    assert C.align_to_labels([], 0) == ([], False)


def test_rounding_is_half_to_even():
    assert C.rounded_classes([0.5, 0.5001, 0.4999, 1.0, 0.0]).tolist() == [0, 1, 0, 1, 0]
    scores = C.binary_scores([0.5, 0.9], [1, 0])
    assert scores["precision"] == 0.0 and scores["recall"] == 0.0  # 0.5 -> class 0
    assert scores["accuracy"] == 0.0 and scores["auc"] == 0.0


@pytest.mark.slow
def test_binary_scores_bit_identical_to_sklearn():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(2, 50))
        labels = rng.integers(0, 2, n)
        if len(set(labels.tolist())) < 2:
            continue
        probabilities = np.round(rng.random(n), int(rng.integers(1, 3)))
        classes = np.round(probabilities).astype(int)
        ours = C.binary_scores(probabilities.tolist(), labels.tolist())
        assert ours == {
            "precision": sk_metrics.precision_score(labels, classes, zero_division=0),
            "recall": sk_metrics.recall_score(labels, classes, zero_division=0),
            "f1": sk_metrics.f1_score(labels, classes, zero_division=0),
            "accuracy": sk_metrics.accuracy_score(labels, classes),
            "auc": sk_metrics.roc_auc_score(labels, probabilities)}


@pytest.mark.parametrize("seed", range(4))
def test_roc_auc_is_sklearn_s_bit_for_bit(seed):
    """Ties (scores rounded to 0-3 decimals, or few distinct values), collinear runs, long
    inputs and a constant score: the same float as roc_auc_score, not merely close."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.choice([2, 3, 7, 40, 500, 5000]))
        labels = rng.integers(0, 2, n)
        labels[:2] = [0, 1]
        kind = int(rng.integers(0, 4))
        scores = (rng.random(n) if kind == 0 else np.round(rng.random(n), kind)
                  if kind < 3 else rng.integers(0, 4, n).astype(float) / 3)
        if rng.random() < 0.05:
            scores[:] = 0.25
        assert C.roc_auc(labels, scores) == sk_metrics.roc_auc_score(labels, scores)


def test_roc_auc_refuses_what_sklearn_refuses():
    with pytest.raises(ValueError, match="NaN"):
        C.binary_scores([0.2, float("nan")], [0, 1])


def test_one_class_keeps_every_metric_and_makes_only_auc_null():
    # labels 0, 0; classes 0 (0.2) and 1 (0.9): one false positive
    scores = C.binary_scores([0.2, 0.9], [0, 0])
    assert scores == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.5,
                      "auc": None, C.UNDEFINED_REASONS: {
                          "auc": "only one class in the labels (all 2 are 0)"}}
    # EVEXT-like: every line is evidence; F1 (its headline) is well defined
    scores = C.line_scores([[0.3, 0.8], [0.6]], [[1, 1], [1]])
    assert scores["precision"] == 1.0 and scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(0.8) and scores["accuracy"] == pytest.approx(2 / 3)
    assert scores["auc"] is None and scores["length_mismatches"] == 0
    assert C.undefined_reasons(scores) == {"auc": "only one class in the labels (all 3 are 1)"}
    # the four defined metrics equal scikit-learn's on the same labels
    labels, classes = [1, 1, 1], [0, 1, 1]
    assert [scores[k] for k in ("precision", "recall", "f1", "accuracy")] == [
        sk_metrics.precision_score(labels, classes), sk_metrics.recall_score(labels, classes),
        sk_metrics.f1_score(labels, classes), sk_metrics.accuracy_score(labels, classes)]


def test_no_labels_make_accuracy_and_auc_null():
    scores = C.binary_scores([], [])
    assert scores["accuracy"] is None and scores["auc"] is None
    assert C.undefined_reasons(scores) == {"accuracy": "no labels", "auc": "no labels"}


def test_bad_inputs_still_raise():
    with pytest.raises(ValueError, match="1 probabilities but 2 labels"):
        C.binary_scores([0.2], [0, 1])
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        C.binary_scores([0.2, 0.3], [0, 2])


def test_undefined_helpers():
    assert C.with_undefined({"a": 1.0}, {}) == {"a": 1.0}
    marked = C.with_undefined({"a": 1.0, "b": 2.0}, {"b": "why"})
    assert marked == {"a": 1.0, "b": None, C.UNDEFINED_REASONS: {"b": "why"}}
    assert C.undefined_reasons({"a": None, "b": 0.0}) == {"a": "no reason given"}


def test_no_predicted_positive_gives_zero_precision():
    scores = C.binary_scores([0.1, 0.2, 0.3], [1, 0, 0])
    assert scores == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                      "accuracy": pytest.approx(2 / 3), "auc": 0.0}


def test_fac_probability_and_invalid_lengths():
    assert C.fac_probability([0.25]) == 0.75
    assert C.fac_probability([]) == 0
    assert C.fac_probability([0.1, 0.2]) == 0
    # unsupported (label 1) records: p_yes 0.1 -> 0.9; an empty prediction scores 0
    scores = C.fac_scores([[0.1], [], [0.8], [0.3, 0.3]], [1, 1, 0, 0])
    assert scores["length_mismatches"] == 2
    assert scores["auc"] == pytest.approx(0.625)  # scores 0.9, 0, 0.2, 0 against 1, 1, 0, 0
    assert scores["precision"] == 1.0 and scores["recall"] == 0.5


def test_evidence_line_labels():
    assert C.evidence_line_labels([3, 0, 3], 5) == [1, 0, 0, 1, 0]
    assert C.evidence_line_labels([], 2) == [0, 0]
    for bad in ([5], [-1]):
        with pytest.raises(ValueError):
            C.evidence_line_labels(bad, 5)


def test_line_scores_pool_lines_and_align_lengths():
    # record 1 is truncated to 2 lines, record 2 padded with a 0 for its third line
    scores = C.line_scores([[0.9, 0.2, 0.7], [0.6, 0.1]], [[1, 0], [1, 0, 1]])
    assert scores["length_mismatches"] == 2
    expected = C.binary_scores([0.9, 0.2, 0.6, 0.1, 0], [1, 0, 1, 0, 1])
    assert {k: scores[k] for k in C.CLASSIFICATION_KEYS} == expected
    assert expected["recall"] == pytest.approx(2 / 3) and expected["precision"] == 1.0
