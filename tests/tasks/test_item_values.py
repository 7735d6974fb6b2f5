"""Per-item values (tasks.item_values, what `sumbench view` shows) come from the material
`sumbench score` aggregates: the task metrics that are means of items equal the mean of the
items' values, and the pooled ones equal what the items' counts pool to, on the fixture's
official sample predictions of every task."""
from __future__ import annotations

import pytest

from tasks import get_task
from tasks.item_values import MEAN_METRICS, PRIMARY, item_kind, item_values
from tasks.scoring import read_prediction_files, score_task_examples

TASKS = ("abstractive_summarization", "multisentence_compression", "topicbased_summarization",
         "fixing_factuality", "factuality_classification", "extractive_summarization",
         "evidence_extraction", "unsupported_span_prediction")


@pytest.fixture(scope="module")
def scored(usb_fixture_dir):
    records = read_prediction_files(sorted((usb_fixture_dir / "predictions").glob("*.jsonl")))
    out = {}
    for name in TASKS:
        task = get_task(name)
        result, material = score_task_examples(task, records[name], report=False)
        kind = item_kind(task)
        out[name] = (kind, result, [item_values(kind, item) for item in material])
    return out


@pytest.mark.parametrize("name", TASKS)
def test_item_values_aggregate_to_the_task_score(scored, name):
    kind, result, values = scored[name]
    assert values and all(PRIMARY[kind] in item for item in values)
    for metric, value in MEAN_METRICS[kind].items():
        assert sum(item[value] for item in values) / len(values) == \
            pytest.approx(result[metric], abs=1e-12), metric
    if kind == "lines":
        assert sum(item["right"] for item in values) / sum(item["lines"] for item in values) \
            == pytest.approx(result["accuracy"], abs=1e-12)
    if kind == "spans":
        correct, predicted, gold = (sum(item[key] for item in values)
                                    for key in ("correct", "predicted", "gold"))
        assert (result["precision"], result["recall"]) == (
            pytest.approx(correct / predicted if predicted else 0.0),
            pytest.approx(correct / gold if gold else 0.0))


def test_each_task_has_its_kind():
    assert [item_kind(get_task(name)) for name in TASKS] == [
        "text", "text", "text", "text", "fac", "lines", "lines", "spans"]


def test_fac_items_show_p_yes_against_the_gold_label():
    assert item_values("fac", ([0.25], [1], False)) == {
        "p_yes": 0.75, "label": 1, "correct": 0, "length_mismatch": False}
    assert item_values("fac", ([0.5], [0], False))["correct"] == 1   # 0.5 decides 0
    assert item_values("spans", (0, 0, 0))["f1"] is None
