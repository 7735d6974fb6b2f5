"""The eight USB task classes: registry, official prediction records, validation, scores."""
from __future__ import annotations

import json
import math

import pytest

from tasks import canonical_task_name, get_task, task_names
from tasks.plumbing.errors import DataError, UnknownNameError
from tasks.plumbing.io import read_jsonl
from tasks.plumbing.registry import TASKS

ALIASES = {"ABS": "abstractive_summarization", "EXT": "extractive_summarization",
           "TOPIC": "topicbased_summarization", "COMP": "multisentence_compression",
           "EVEXT": "evidence_extraction", "FAC": "factuality_classification",
           "FIX": "fixing_factuality", "UNSUP": "unsupported_span_prediction"}
MAIN_METRICS = {"ABS": "rouge_gmean", "COMP": "rouge_gmean", "TOPIC": "rouge_gmean",
                "FIX": "exactmatch", "EXT": "auc", "FAC": "auc", "EVEXT": "f1", "UNSUP": "f1"}


def dataset_records(usb_fixture_dir, name):
    return read_jsonl(usb_fixture_dir / "task_datasets" / "all" / name / "test.jsonl")


def fixture_predictions(usb_fixture_dir, name):
    return read_jsonl(usb_fixture_dir / "predictions" / f"{name}.jsonl")


def test_all_eight_tasks_are_registered_with_aliases():
    assert task_names("usb") == sorted(ALIASES.values())
    for alias, name in ALIASES.items():
        assert canonical_task_name(alias.lower()) == name
        assert TASKS.aliases_of(name) == [alias.lower()]
        task = get_task(alias)
        assert task.name == name and type(get_task(name)) is type(task)
        assert task.main_metric == MAIN_METRICS[alias]
        assert task.description and "\n" not in task.description
    with pytest.raises(UnknownNameError, match="did you mean 'evidence_extraction'"):
        get_task("evidence_extractoin")


def test_metric_names_and_output_kinds():
    kinds = {name: get_task(name).output_kind for name in ALIASES}
    assert kinds == {"ABS": "text", "EXT": "probabilities", "TOPIC": "text", "COMP": "text",
                     "EVEXT": "probabilities", "FAC": "probabilities", "FIX": "text",
                     "UNSUP": "spans"}
    assert get_task("ABS").metric_names == ("rouge1", "rouge2", "rougel", "exactmatch")
    assert get_task("FAC").metric_names == ("precision", "recall", "f1", "accuracy", "auc")
    assert get_task("UNSUP").metric_names == ("precision", "recall", "f1")


@pytest.mark.parametrize("name", sorted(ALIASES.values()))
def test_prediction_records_match_the_official_fixture(usb_fixture_dir, name):
    task = get_task(name)
    instances = task.instances(dataset_records(usb_fixture_dir, name))
    official = fixture_predictions(usb_fixture_dir, name)
    assert len(instances) == len(official)
    for instance, expected in zip(instances, official):
        record = task.prediction_record(instance, expected["prediction"])
        assert record == expected
        assert list(record) == list(expected)
        task.validate_record(record)


@pytest.mark.parametrize("name", sorted(ALIASES.values()))
def test_records_from_loaded_datasets_keep_the_official_key_order(usb_fixture_dir, name):
    """Dataset columns come in one fixed order; the records still follow the official one."""
    task = get_task(name)
    dataset = task.load("test", data_dir=str(usb_fixture_dir / "task_datasets"))
    assert len(dataset) == len(dataset_records(usb_fixture_dir, name))
    official = fixture_predictions(usb_fixture_dir, name)
    records = [task.prediction_record(instance, expected["prediction"])
               for instance, expected in zip(task.instances(dataset), official)]
    assert [list(r) for r in records] == [list(e) for e in official]
    assert records == official


def test_instances_are_copies_except_evext_which_is_per_claim(usb_fixture_dir):
    records = dataset_records(usb_fixture_dir, "abstractive_summarization")
    instances = get_task("ABS").instances(records)
    assert instances == records and instances[0] is not records[0]
    evext = get_task("EVEXT")
    articles = dataset_records(usb_fixture_dir, "evidence_extraction")
    claims = evext.instances(articles)
    assert len(claims) == sum(len(a["summary_lines"]) for a in articles) == 13
    assert claims[2]["claim"] == articles[0]["summary_lines"][2]
    assert claims[2]["labels"] == [11, 4, 7]
    assert {evext.group_key(c) for c in claims} == {a["id"] for a in articles}
    broken = dict(articles[0], evidence_labels=articles[0]["evidence_labels"][:-1])
    with pytest.raises(DataError, match="evidence_labels"):
        evext.instances([broken])


def official_record(usb_fixture_dir, name, **changes):
    record = dict(fixture_predictions(usb_fixture_dir, name)[0])
    record.update(changes)
    return record


@pytest.mark.parametrize("name, changes, field", [
    ("abstractive_summarization", {"prediction": 3}, "prediction"),
    ("fixing_factuality", {"output_string": None}, "output_string"),
    ("unsupported_span_prediction", {"annotated_summary": ["x"]}, "annotated_summary"),
    ("extractive_summarization", {"prediction": "0.3"}, "prediction"),
    ("extractive_summarization", {"prediction": [0.1, float("nan")]}, "prediction"),
    ("extractive_summarization", {"prediction": [0.1, 1.5]}, "prediction"),
    ("extractive_summarization", {"prediction": [True, 0.5]}, "prediction"),
    ("extractive_summarization", {"labels": [0, 2]}, "labels"),
    ("evidence_extraction", {"prediction": [float("inf")]}, "prediction"),
    ("evidence_extraction", {"labels": [13]}, "labels"),
    ("evidence_extraction", {"labels": "8"}, "labels"),
    ("factuality_classification", {"prediction": [-0.1]}, "prediction"),
    ("factuality_classification", {"prediction": 0.7}, "prediction"),
    ("factuality_classification", {"label": True}, "label"),
    ("factuality_classification", {"task": "fixing_factuality"}, "task"),
])
def test_validate_record_rejects_bad_fields(usb_fixture_dir, name, changes, field):
    with pytest.raises(DataError) as info:
        get_task(name).validate_record(official_record(usb_fixture_dir, name, **changes))
    assert info.value.field == field and f"field '{field}'" in str(info.value)


def test_validate_record_missing_field_and_valid_edge_cases(usb_fixture_dir):
    record = official_record(usb_fixture_dir, "multisentence_compression")
    del record["prediction"]
    with pytest.raises(DataError, match="missing field") as info:
        get_task("COMP").validate_record(record)
    assert info.value.field == "prediction"
    fac = get_task("FAC")
    for prediction in ([], [0.2, 0.3], [0], [1]):  # officially scored (as 0 when len != 1)
        fac.validate_record(official_record(usb_fixture_dir, fac.name, prediction=prediction))
    ext = get_task("EXT")  # length mismatches are truncated/padded by the metric
    ext.validate_record(official_record(usb_fixture_dir, ext.name, prediction=[0.5]))


def test_scores_and_headlines_reproduce_the_official_values(usb_fixture_dir):
    pytest.importorskip("tasks.metrics.classification")
    expected = json.loads((usb_fixture_dir / "expected_scores.json").read_text())
    for name in task_names("usb"):
        task = get_task(name)
        scores = task.score(fixture_predictions(usb_fixture_dir, name))
        for metric in task.metric_names:
            assert scores[metric] == pytest.approx(expected[name][metric], abs=1e-12), metric
        official = expected[name]
        if task.main_metric == "rouge_gmean":
            gmean = math.prod(official[k] for k in ("rouge1", "rouge2", "rougel")) ** (1 / 3)
            assert scores["rouge_gmean"] == pytest.approx(gmean, abs=1e-12)
            assert task.headline(official) == pytest.approx(100 * gmean, abs=1e-9)
        else:
            assert task.headline(official) == pytest.approx(100 * official[task.main_metric])
        assert task.headline(scores) == pytest.approx(task.headline(official), abs=1e-9)
    assert get_task("ABS").headline(expected["abstractive_summarization"]) == pytest.approx(
        96.812662, abs=1e-5)
    assert get_task("FIX").headline(expected["fixing_factuality"]) == pytest.approx(57.142857,
                                                                                     abs=1e-5)


def test_parsed_gold_targets_score_perfectly(usb_fixture_dir):
    """format -> parse -> prediction_record -> score: gold outputs give the maximum scores."""
    pytest.importorskip("tasks.metrics.classification")
    for name in task_names("usb"):
        task = get_task(name)
        records = []
        for instance in task.instances(dataset_records(usb_fixture_dir, name)):
            inputs = task.format(instance)
            parsed = [task.parse(m.target, instance, m) for m in inputs]
            records.append(task.prediction_record(instance, task.combine(parsed, instance,
                                                                         inputs)))
        for record in records:
            task.validate_record(record)
        scores = task.score(records)
        headline_key = "exactmatch" if task.output_kind == "text" else "f1"
        assert scores[headline_key] == pytest.approx(1.0), name
