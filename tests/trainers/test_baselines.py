"""The non-neural baselines (trainers.inference.baselines) on hand-made instances with known
outputs, and
`sumbench baseline` end to end on the shared USB fixture (files that `sumbench score` reads)."""
from __future__ import annotations

import json

import pytest

from tasks import get_task, task_names
from tasks.scoring import score_files, score_records
from trainers.inference.baselines import (
    BASELINES,
    baseline_prediction,
    baseline_records,
    lead_k,
    position_prior,
)

from helpers import sumbench


def test_lead_k_takes_the_median_train_reference_length():
    train = [{"output_lines": ["a"] * n} for n in (1, 2, 2, 5)]
    assert lead_k(train) == 2 and lead_k(None) == 3
    lines = ["Title", "First.", "Second.", "Third."]
    assert baseline_prediction("abstractive_summarization", {"input_lines": lines}, k=2,
                               prior=None) == "First. Second."  # the title line is skipped
    assert baseline_prediction("multisentence_compression", {"input_lines": lines}, k=2,
                               prior=None) == "Title"


def test_position_prior_is_the_smoothed_train_label_rate():
    prior = position_prior([{"labels": [1, 0, 0]}, {"labels": [1, 1]}])
    assert [prior(j) for j in range(4)] == [0.75, 0.5, 0.3333333333333333, 0.3333333333333333]
    assert position_prior(None)(3) == 0.25


def test_lexical_overlap_makes_the_best_lines_the_evidence():
    instance = {"claim": "Marta Okafor studied painting in Lisbon.",
                "input_lines": ["Marta Okafor", "Marta studied painting in Lisbon.",
                                "She won an award."]}
    probabilities = baseline_prediction("evidence_extraction", instance, k=1, prior=None)
    # content tokens of the claim: marta, okafor, studied, painting, lisbon
    assert probabilities == pytest.approx([0.4 / 0.8, 1.0, 0.0])


def test_constant_copy_and_no_span_baselines(data_dir):
    for name, expected in (("factuality_classification", 50.0), ("fixing_factuality", 0.0)):
        task = get_task(name)
        test = task.instances(list(task.load("test", "all", str(data_dir))))
        records = baseline_records(task, test)
        assert len(records) == len(test)
        assert score_records({name: records})[name]["headline"] == expected
        if name == "fixing_factuality":
            assert [r["prediction"] for r in records] == [i["initial_summary"] for i in test]
        else:
            assert {tuple(r["prediction"]) for r in records} == {(0.5,)}
    task = get_task("UNSUP")
    test = task.instances(list(task.load("test", "all", str(data_dir))))
    assert [r["prediction"] for r in baseline_records(task, test)] == [i["summary"] for i in test]
    assert set(BASELINES) == set(task_names("usb"))


def test_baseline_command_writes_files_that_score(data_dir, tmp_path, capsys):
    out = tmp_path / "baseline"
    code, stdout, stderr = sumbench(capsys, "baseline", "--data", data_dir, "--tasks", "all",
                                    "--out", out)
    assert code == 0, stderr
    paths = sorted((out / "predictions").glob("*.jsonl"))
    assert [p.stem for p in paths] == task_names("usb")
    scores = json.loads((out / "scores.json").read_text())
    provenance = scores.pop("_provenance")  # as `sumbench score --out` writes it
    assert score_files(paths) == scores
    assert scores["factuality_classification"]["auc"] == 0.5
    assert scores["fixing_factuality"]["exactmatch"] == 0.0
    assert scores["evidence_extraction"]["f1"] > 0.3  # the best-overlap lines are evidence
    info = json.loads((out / "baseline.json").read_text())
    assert info["config"]["baselines"]["abstractive_summarization"]["baseline"] == "Lead-k"
    assert {"git", "packages", "config"} <= set(info["provenance"])
    assert provenance == info["provenance"] and provenance["config"] == info["config"]
    assert provenance["seeds"] == {} and provenance["config"]["tasks"] == task_names("usb")
    code, _, stderr = sumbench(capsys, "baseline", "--data", data_dir, "--tasks", "PRESENCE",
                               "--out", tmp_path / "other")
    assert code == 2 and "no baseline for presence_detection" in stderr
    assert not (tmp_path / "other").exists()


def test_an_empty_split_is_named_and_nothing_is_written(data_dir, tmp_path, capsys):
    import shutil

    data = shutil.copytree(data_dir, tmp_path / "data")
    empty = data / "all" / "multisentence_compression" / "test.jsonl"
    empty.write_text("")
    out = tmp_path / "out"
    code, _, stderr = sumbench(capsys, "baseline", "--data", data, "--tasks", "ABS,COMP",
                               "--out", out)
    assert code == 2 and "Traceback" not in stderr
    assert f"{empty}: the test split of multisentence_compression holds no records" in stderr
    assert not out.exists()


def test_a_duplicate_data_record_is_named_at_its_file_lines(data_dir, tmp_path, capsys):
    import shutil

    data = shutil.copytree(data_dir, tmp_path / "data")
    test = data / "all" / "evidence_extraction" / "test.jsonl"
    lines = test.read_text().splitlines()
    test.write_text("\n".join([*lines, "", lines[0]]) + "\n")  # a blank line, then line 1 again
    out = tmp_path / "out"
    code, _, stderr = sumbench(capsys, "baseline", "--data", data, "--tasks", "EVEXT",
                               "--out", out)
    assert code == 2 and "Traceback" not in stderr
    # the claim is the first one of line 1: both places are lines of the data file
    assert f"{test}:{len(lines) + 2}, field 'id': duplicate record" in stderr
    assert f"first seen at {test}:1" in stderr
    assert not out.exists()


def test_an_empty_train_split_is_a_warning_naming_the_defaults(data_dir, tmp_path, capsys):
    import shutil

    data = shutil.copytree(data_dir, tmp_path / "data")
    for name in ("abstractive_summarization", "factuality_classification"):
        (data / "all" / name / "train.jsonl").write_text("")
    out = tmp_path / "out"
    code, _, stderr = sumbench(capsys, "baseline", "--data", data, "--tasks", "ABS,FAC,EXT",
                               "--out", out)
    assert code == 0, stderr
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    # FAC's constant needs no train data; EXT's train split is there
    assert warnings == ["warning: the train split of abstractive_summarization holds no "
                        "records; its Lead-k baseline uses k = 3"]
    settings = json.loads((out / "baseline.json").read_text())["config"]["baselines"]
    assert settings["abstractive_summarization"]["train_instances"] == 0
    assert settings["abstractive_summarization"]["lead_k"] == 3
    assert settings["extractive_summarization"]["train_instances"] > 0
