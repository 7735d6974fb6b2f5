"""Run specs (JSON round trip, validation, resume comparison) and results files (table with
the fixture's known headline numbers, atomic writes, validation on reading)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest

from benchmark.results import (
    RESULTS_FILE,
    RunSpec,
    build_results,
    format_table,
    prediction_entries,
    read_results,
    results_table,
    write_results,
)
from tasks.plumbing.errors import DataError, SumbenchError


def full_spec() -> RunSpec:
    return RunSpec(model="google/flan-t5-large", tasks=("factuality_classification",
                                                       "abstractive_summarization"),
                   mode="finetune", seed=7, profile="flan-t5-large", lora=True,
                   training="per-task", train_overrides={"max_steps": 100, "lora_r": "8"},
                   batch_size=4, max_new_tokens=32, bootstrap=10)


def test_run_spec_round_trips_through_json():
    spec = full_spec()
    text = spec.to_json()
    assert RunSpec.from_json(text) == spec
    data = json.loads(text)
    assert data["tasks"] == ["factuality_classification", "abstractive_summarization"]
    assert data["train_overrides"] == {"lora_r": "8", "max_steps": 100}
    assert spec.train_overrides == (("lora_r", "8"), ("max_steps", 100))  # sorted pairs
    assert spec.trained_tasks == spec.tasks
    fewshot = RunSpec(model="m", tasks=("fac",), mode="fewshot", fewshot_backend="openai",
                      style="gpt-3.5", n_shots=2, base_url="http://127.0.0.1:1/v1")
    assert RunSpec.from_dict(fewshot.to_dict()) == fewshot


def test_resume_comparison_ignores_batch_size_and_device_only():
    spec = full_spec()
    assert spec.differences(dataclasses.replace(spec, batch_size=1, device="cpu")) == []
    other = dataclasses.replace(spec, seed=8, num_beams=2)
    assert spec.differences(other) == ["num_beams", "seed"]
    assert "batch_size" not in spec.result_fields()
    # a fine-tuning field a resumed training may change (deterministic) may change here too
    overridden = dataclasses.replace(spec, train_overrides={**dict(spec.train_overrides),
                                                            "deterministic": "false"})
    assert spec.differences(overridden) == []
    relearnt = dataclasses.replace(spec, train_overrides={"learning_rate": "0.1"})
    assert spec.differences(relearnt) == ["train_overrides"]


def test_zero_shots_is_a_valid_spec():
    spec = RunSpec(model="m", tasks=("fac",), mode="fewshot", fewshot_backend="hf-causal",
                   n_shots=0)
    assert RunSpec.from_json(spec.to_json()).n_shots == 0


@pytest.mark.parametrize("changes, message", [
    ({"mode": "zero-shot"}, "RunSpec.mode must be one of finetune, fewshot"),
    ({"mode": "fewshot"}, "few-shot runs need a backend"),
    ({"training": "sometimes"}, "RunSpec.training"),
    ({"model": ""}, "RunSpec.model is empty"),
    ({"tasks": ()}, "RunSpec.tasks is empty"),
    ({"data_dir": "a", "raw_dir": "b"}, "either a task-dataset folder or a raw folder"),
    ({"batch_size": 0}, "batch_size must be >= 1"),
    ({"training": "per-task", "train_tasks": ("abs",)}, "train_tasks cannot differ"),
    ({"n_shots": -1}, "RunSpec.n_shots must be >= 0, got -1"),
    ({"max_prompt_tokens": 0}, "RunSpec.max_prompt_tokens must be >= 1, got 0"),
    ({"bootstrap": -2}, "RunSpec.bootstrap must be >= 0, got -2"),
])
def test_invalid_run_specs_are_refused(changes, message):
    values = {"model": "m", "tasks": ("fac",), **changes}
    with pytest.raises(SumbenchError, match=message):
        RunSpec(**values)
    with pytest.raises(SumbenchError, match="unknown RunSpec field"):
        RunSpec.from_dict({"model": "m", "tasks": ["fac"], "temperature": 1})


def test_a_stored_run_spec_is_read_whatever_its_device_and_a_bad_one_names_its_file(tmp_path):
    """A run folder written with another device (xpu, cpu:0) is resumed; a stored spec the
    validation refuses names its file instead of only the field."""
    from benchmark.run import RUN_SPEC_FILE, prepare_out_dir

    spec = dataclasses.replace(full_spec(), device="cpu")
    stored = json.loads(spec.to_json())
    (tmp_path / RUN_SPEC_FILE).write_text(json.dumps({**stored, "device": "xpu:0"}))
    assert prepare_out_dir(spec, tmp_path, resume=True) is True
    (tmp_path / RUN_SPEC_FILE).write_text(json.dumps({**stored, "mode": "zero-shot"}))
    with pytest.raises(SumbenchError) as caught:
        prepare_out_dir(spec, tmp_path, resume=True)
    assert str(caught.value).startswith(f"{tmp_path / RUN_SPEC_FILE}: unreadable run spec "
                                        "(RunSpec.mode must be one of")


@pytest.fixture(scope="module")
def fixture_scores(usb_fixture_dir):
    from tasks.scoring import score_files

    paths = sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))
    return score_files(paths), paths


def test_table_holds_the_headline_metric_of_each_task(fixture_scores, usb_fixture_dir):
    scores, _ = fixture_scores
    expected = json.loads((usb_fixture_dir / "expected_scores.json").read_text())
    order = ["abstractive_summarization", "factuality_classification", "fixing_factuality",
             "evidence_extraction", "unsupported_span_prediction"]
    rows = results_table(scores, order)
    assert [row["task"] for row in rows] == order
    assert [row["metric"] for row in rows] == ["rouge_gmean", "auc", "exactmatch", "f1", "f1"]
    abs_scores = expected["abstractive_summarization"]
    gmean = (abs_scores["rouge1"] * abs_scores["rouge2"] * abs_scores["rougel"]) ** (1 / 3)
    assert [row["value"] for row in rows] == pytest.approx([
        100 * gmean, 100 * 0.9183673469387755, 100 * 0.5714285714285714,
        100 * 0.7297297297297297, 100 * 0.3636363636363636], abs=1e-9)
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["task", "metric", "value"]
    assert lines[3].split() == ["factuality_classification", "auc", "91.84"]
    assert lines[6].split() == ["unsupported_span_prediction", "f1", "36.36"]


def test_an_undefined_headline_is_null_in_the_table_and_n_a_when_printed(tmp_path):
    from tasks.scoring import score_records

    records = [{"id": str(i), "summ_idx": 0, "label": 1, "prediction": [0.3]} for i in range(2)]
    scores = score_records({"factuality_classification": records})
    assert scores["factuality_classification"]["headline"] is None
    rows = results_table(scores)
    assert rows == [{"task": "factuality_classification", "metric": "auc", "value": None}]
    assert format_table(rows).splitlines()[2].split() == ["factuality_classification", "auc",
                                                          "n/a"]
    results = build_results(RunSpec(model="m", tasks=("factuality_classification",)), scores,
                            predictions={}, models={})
    write_results(tmp_path, results)
    assert '"value": null' in (tmp_path / RESULTS_FILE).read_text()
    loaded = read_results(tmp_path)
    assert loaded["table"] == rows
    assert loaded["scores"]["factuality_classification"]["auc"] is None
    assert loaded["scores"]["factuality_classification"]["recall"] == 1.0


def test_results_file_round_trip_and_provenance(tmp_path, fixture_scores):
    scores, paths = fixture_scores
    out = tmp_path / "run"
    (out / "predictions").mkdir(parents=True)
    copied = {}
    for path in paths:
        target = out / "predictions" / path.name
        target.write_bytes(path.read_bytes())
        copied[path.stem] = target
    spec = RunSpec(model="m", tasks=tuple(sorted(scores)), seed=5)
    results = build_results(spec, scores, predictions=prediction_entries(out, copied, scores),
                            models={"all": {"model": "m", "revision": "abc"}},
                            config={"note": 1}, seeds={"seed": 5, "training": 5})
    path = write_results(out, results)
    assert path == out / RESULTS_FILE
    loaded = read_results(out)
    assert loaded == json.loads(json.dumps(results))
    assert RunSpec.from_dict(loaded["spec"]) == spec
    assert loaded["predictions"]["fixing_factuality"] == {
        "path": "predictions/fixing_factuality.jsonl", "records": 7,
        "sha256": hashlib.sha256(paths[4].read_bytes()).hexdigest()}
    provenance = loaded["provenance"]
    assert provenance["seeds"] == {"seed": 5, "training": 5}
    assert provenance["config"]["models"]["all"]["revision"] == "abc"
    assert provenance["config"]["note"] == 1 and provenance["config"]["run"]["seed"] == 5
    assert "commit" in provenance["git"] and provenance["packages"]["torch"]
    assert len(loaded["table"]) == 8


def test_bad_results_never_replace_a_good_file(tmp_path, fixture_scores):
    scores, _ = fixture_scores
    spec = RunSpec(model="m", tasks=("fac",))
    good = build_results(spec, {"factuality_classification":
                                scores["factuality_classification"]},
                         predictions={}, models={})
    write_results(tmp_path, good)
    before = (tmp_path / RESULTS_FILE).read_bytes()
    bad = json.loads(json.dumps(good))
    bad["scores"]["factuality_classification"]["auc"] = math.nan
    with pytest.raises(DataError, match="scores.factuality_classification.auc"):
        write_results(tmp_path, bad)
    assert (tmp_path / RESULTS_FILE).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [RESULTS_FILE]


@pytest.mark.parametrize("change, field", [
    (lambda r: r.pop("provenance"), "provenance"),
    (lambda r: r.update(format="other/9"), "format"),
    (lambda r: r["spec"].update(mode="nope"), "spec"),
    (lambda r: r["provenance"].pop("git"), "provenance.git"),
    (lambda r: r.update(provenance=["git"]), "provenance"),
    (lambda r: r.update(scores=[1]), "scores"),  # these three used to be tracebacks
    (lambda r: r["scores"].update(fac=[1]), "scores.fac"),
    (lambda r: r["scores"].update(fac={"headline": "high"}), "scores.fac.headline"),
    (lambda r: r["scores"].update(fac={"auc": 1.0}), "scores.fac.headline"),
    (lambda r: r["scores"].update(fac={"headline": 1.0, "ci95": [1, 2]}), "scores.fac.ci95"),
])
def test_reading_names_the_faulty_field(tmp_path, change, field):
    spec = RunSpec(model="m", tasks=("fac",))
    results = json.loads(json.dumps(build_results(spec, {}, predictions={}, models={})))
    change(results)
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(results))
    with pytest.raises(DataError) as error:
        read_results(path)
    assert error.value.field == field and error.value.path == str(path)
    path.write_text("{not json")
    with pytest.raises(DataError, match="malformed JSON"):
        read_results(tmp_path)
