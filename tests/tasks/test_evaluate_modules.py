"""The local `evaluate` modules load offline and return exactly the pure functions' numbers."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.metrics import classification, evaluate_module_path, rouge, spans
from tasks.plumbing.io import read_jsonl

MODULES = Path(__file__).resolve().parents[2] / "tasks" / "metrics" / "evaluate_modules"


@pytest.fixture(scope="module")
def evaluate():
    assert os.environ.get("HF_EVALUATE_OFFLINE") == "1"
    import evaluate as evaluate_library

    return evaluate_library


def records(usb_fixture_dir, task: str) -> list[dict]:
    return read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")


@pytest.mark.parametrize("target", ["usb_rouge", "usb_rouge/usb_rouge.py"])
def test_rouge_module(evaluate, usb_fixture_dir, target):
    data = records(usb_fixture_dir, "multisentence_compression")
    predictions = [r["prediction"] for r in data]
    references = [r["output_string"] for r in data]
    module = evaluate.load(str(MODULES / target))
    assert module.compute(predictions=predictions, references=references) == (
        rouge.rouge_scores(predictions, references))


def test_classification_module_lines(evaluate, usb_fixture_dir):
    data = records(usb_fixture_dir, "evidence_extraction")
    predictions = [r["prediction"] for r in data]
    labels = [classification.evidence_line_labels(r["labels"], len(r["input_lines"]))
              for r in data]
    module = evaluate.load(str(MODULES / "usb_classification"))
    result = module.compute(predictions=predictions, references=labels)
    assert result == classification.line_scores(predictions, labels)
    assert result["f1"] == pytest.approx(0.7297297297297297, abs=1e-9)


def test_classification_module_fac(evaluate, usb_fixture_dir):
    data = records(usb_fixture_dir, "factuality_classification")
    predictions, labels = [r["prediction"] for r in data], [r["label"] for r in data]
    module = evaluate.load(str(MODULES / "usb_classification"), config_name="fac")
    assert module.compute(predictions=predictions, references=labels) == (
        classification.fac_scores(predictions, labels))


def test_spans_module(evaluate, usb_fixture_dir):
    data = records(usb_fixture_dir, "unsupported_span_prediction")
    predictions = [r["prediction"] for r in data]
    summaries = [r["summary"] for r in data]
    annotated = [r["annotated_summary"] for r in data]
    module = evaluate.load(evaluate_module_path("usb_spans"))
    assert module.compute(predictions=predictions, references=annotated,
                          summaries=summaries) == spans.span_scores(predictions, summaries,
                                                                    annotated)
    with pytest.raises(ValueError, match="summaries"):
        module.compute(predictions=predictions, references=annotated)
