"""Encoder runs (benchmark.encoder_run, trainers.encoders.pipeline): `sumbench run|train|predict
--profile roberta-large` on the USB fixture with a tiny random RoBERTa saved as published
(`RobertaForMaskedLM`) and the tiny RoBERTa tokenizer beside it: train, predict and score FAC,
EVEXT, EXT and UNSUP, re-scored by `sumbench score`; a trained folder predicts again; bad
requests are one-line errors that write nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.plumbing.io import read_jsonl
from tasks.scoring import score_files
from trainers.encoders.model_files import HEAD_FILE
from trainers.encoders.pipeline import checkpoint_kind, fraction_records
from trainers.encoders.spec import TABLE_10

from helpers import sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FOUR = ("factuality_classification", "evidence_extraction", "extractive_summarization",
        "unsupported_span_prediction")


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_roberta) -> dict[str, Path]:
    """The tiny random RoBERTa saved as published (RobertaForMaskedLM) with its tokenizer, and
    a folder whose config.json says T5 (no weights: the check reads the config only)."""
    root = tmp_path_factory.mktemp("encoder-models")
    (root / "t5").mkdir()
    (root / "t5" / "config.json").write_text(json.dumps({"model_type": "t5",
                                                         "architectures": ["T5Model"]}))
    return {"roberta": tiny_roberta, "t5": root / "t5"}


def run_args(model, data, out, tasks="FAC,EVEXT,EXT,UNSUP", *extra) -> list:
    return ["run", "--model", model, "--profile", "roberta-large", "--tasks", tasks,
            "--training", "per-task", "--data", data, "--out", out, "--device", "cpu",
            "--set", "num_epochs=2", *extra]


def test_run_trains_predicts_and_scores_the_four_tasks(models, data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = sumbench(capsys, *run_args(models["roberta"], data_dir, out))
    assert code == 0, stderr
    assert [line.split()[:2] for line in stdout.splitlines()[2:]] == [
        ["factuality_classification", "auc"], ["evidence_extraction", "f1"],
        ["extractive_summarization", "auc"], ["unsupported_span_prediction", "f1"]]
    results = json.loads((out / "results.json").read_text())
    assert results["spec"]["training"] == "per-task" and results["decoding"] is None
    paths = [out / results["predictions"][task]["path"] for task in FOUR]
    assert [path.relative_to(out).as_posix() for path in paths] == [
        f"predictions/{task}.jsonl" for task in FOUR]
    assert score_files(paths) == results["scores"]
    code, scored, _ = sumbench(capsys, "score", *paths)  # the command prints the same numbers
    assert code == 0 and json.loads(scored) == json.loads(json.dumps(results["scores"]))
    for task in FOUR:
        test = read_jsonl(data_dir / "all" / task / "test.jsonl")
        assert results["scores"][task]["n_records"] == (
            sum(len(r["summary_lines"]) for r in test) if task == "evidence_extraction"
            else len(test))
        training = results["training"][f"train/{task}"]
        spec = training["spec"]
        assert spec == results["provenance"]["config"]["encoder_specs"][task]
        assert (spec["learning_rate"], spec["batch_size"], spec["max_input_tokens"]) == (
            TABLE_10[task].learning_rate, TABLE_10[task].batch_size,
            TABLE_10[task].max_input_tokens)
        assert spec["num_epochs"] == 2 and spec["model"] == str(models["roberta"])
        assert training["result"]["epochs"] == 2 and training["result"]["best_epoch"] in (1, 2)
        assert (out / "train" / task / "best" / HEAD_FILE).is_file()
        assert results["models"][task]["checkpoint"] == f"train/{task}/best"
    assert results["run_config"]["training"] == "per-task"

    # resumed: a finished task's training is reused, an unfinished one starts over
    unfinished = out / "train" / "extractive_summarization"
    (unfinished / "train_result.json").unlink()
    (out / "results.json").unlink()
    kept = (out / "train" / "factuality_classification" / "train_log.jsonl").stat().st_mtime_ns
    code, _, stderr = sumbench(capsys, *run_args(models["roberta"], data_dir, out), "--resume")
    assert code == 0, stderr
    assert "finished run found in" in stderr and "starting it over" in stderr
    assert (out / "train" / "factuality_classification" / "train_log.jsonl").stat() \
        .st_mtime_ns == kept
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["scores"] == results["scores"]  # seeded: the same training again
    code, _, stderr = sumbench(capsys, *run_args(models["roberta"], data_dir, out))
    assert code == 2 and "already holds a run; pass --resume" in stderr

    # the run folder predicts again: the same records
    again = tmp_path / "again"
    code, _, stderr = sumbench(capsys, "predict", "--model", out, "--profile", "roberta-large",
                               "--tasks", "FAC,UNSUP", "--data", data_dir, "--out", again,
                               "--device", "cpu")
    assert code == 0, stderr
    for task in ("factuality_classification", "unsupported_span_prediction"):
        assert (again / "predictions" / f"{task}.jsonl").read_text() == \
            (out / "predictions" / f"{task}.jsonl").read_text()
    # and `run --training none` scores its models as they are
    untrained = tmp_path / "untrained"
    code, _, stderr = sumbench(capsys, "run", "--model", out, "--profile", "roberta-large",
                               "--tasks", "EVEXT", "--training", "none", "--data", data_dir,
                               "--out", untrained, "--device", "cpu")
    assert code == 0, stderr
    none = json.loads((untrained / "results.json").read_text())
    assert none["training"] is None and none["scores"]["evidence_extraction"] == \
        results["scores"]["evidence_extraction"]
    assert none["models"]["evidence_extraction"]["checkpoint"] == \
        str(out / "train" / "evidence_extraction" / "best")
    # `sumbench view` shows the run item by item
    code, _, stderr = sumbench(capsys, "view", out, "--out", tmp_path / "view.html")
    page = (tmp_path / "view.html").read_text()
    assert code == 0 and all(task in page for task in FOUR), stderr


def test_train_then_predict_from_the_trained_folder(models, data_dir, tmp_path, capsys):
    trained, predicted = tmp_path / "trained", tmp_path / "predicted"
    code, stdout, stderr = sumbench(capsys, "train", "--model", models["roberta"], "--profile",
                                    "roberta-large", "--tasks", "FAC", "--data", data_dir,
                                    "--out", trained, "--set", "num_epochs=1", "--device", "cpu",
                                    "--train-fraction", "0.5")
    assert code == 0, stderr
    best = trained / "factuality_classification" / "best"
    assert stdout.split() == [str(best)] and checkpoint_kind(str(trained)) == "encoder-runs"
    result = json.loads((trained / "factuality_classification" / "train_result.json")
                        .read_text())
    assert result["selection_metric"] == "auc" and result["best_epoch"] == 1
    assert result["spec"]["train_fraction"] == 0.5
    records = read_jsonl(data_dir / "all" / "factuality_classification" / "train.jsonl")
    kept = fraction_records(records, 0.5, seed=0)   # 2 of the 3 documents
    assert result["provenance"]["config"]["examples"] == len(kept) < len(records)
    folder = json.loads((trained / "train_result.json").read_text())
    assert folder["models"] == {"factuality_classification": "factuality_classification/best"}
    # no --profile: the fine-tuned model is recognised
    code, stdout, stderr = sumbench(capsys, "predict", "--model", best, "--tasks", "FAC",
                                    "--data", data_dir, "--out", predicted, "--device", "cpu")
    assert code == 0, stderr
    path = predicted / "predictions" / "factuality_classification.jsonl"
    assert stdout.split() == [str(path)]
    scores = score_files([path])["factuality_classification"]
    assert scores["n_records"] == len(read_jsonl(data_dir / "all" /
                                                 "factuality_classification" / "test.jsonl"))
    config = json.loads((predicted / "predict_config.json").read_text())
    assert config["finished"] and config["config"]["specs"]["factuality_classification"] == \
        result["spec"]


@pytest.mark.parametrize("case, needle", [
    ("abs", "the encoder profiles run FAC, EVEXT, EXT, UNSUP only, not 'abstractive_summ"),
    ("t5-with-roberta-large", "is a t5 model, but --profile roberta-large is an encoder"),
    ("roberta-with-flan-t5", "is a roberta model, but --profile flan-t5-large is a seq2seq"),
    ("train-roberta-with-flan-t5", "is a roberta model, but --profile flan-t5-large is a"),
    ("joint", "--training multitask: encoder profiles train one model per task"),
    ("lora", "--lora: encoder profiles fine-tune every weight"),
    ("unknown-field", "lora_r is not a field of the encoder spec"),
    ("predict-untrained", "holds no fine-tuned encoder model for factuality_classification"),
])
def test_bad_requests_are_one_line_errors_that_write_nothing(models, data_dir, tmp_path,
                                                             capsys, case, needle):
    out = tmp_path / "out"
    roberta, t5 = models["roberta"], models["t5"]
    args = {
        "abs": run_args(roberta, data_dir, out, "FAC,ABS"),
        "t5-with-roberta-large": run_args(t5, data_dir, out, "FAC"),
        "roberta-with-flan-t5": ["run", "--model", roberta, "--profile", "flan-t5-large",
                                 "--tasks", "FAC", "--training", "per-task", "--data",
                                 data_dir, "--out", out, "--device", "cpu"],
        "train-roberta-with-flan-t5": ["train", "--model", roberta, "--profile",
                                       "flan-t5-large", "--tasks", "FAC", "--data", data_dir,
                                       "--out", out, "--device", "cpu"],
        "joint": run_args(roberta, data_dir, out, "FAC,EXT", "--training", "multitask"),
        "lora": run_args(roberta, data_dir, out, "FAC", "--lora"),
        "unknown-field": run_args(roberta, data_dir, out, "FAC", "--set", "lora_r=8"),
        "predict-untrained": ["predict", "--model", roberta, "--profile", "roberta-large",
                              "--tasks", "FAC", "--data", data_dir, "--out", out],
    }[case]
    code, stdout, stderr = sumbench(capsys, *args)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and needle in stderr, stderr
    assert not out.exists()


def test_the_training_default_of_an_encoder_profile_is_per_task_and_print_spec(
        models, data_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, stderr = sumbench(capsys, "run", "--profile", "roberta-large", "--tasks",
                                    "EVEXT,EXT", "--out", out, "--print-spec", "--set",
                                    "dropout=0.2", "--seed", 3)
    assert code == 0, stderr
    specs = json.loads(stdout)
    assert list(specs) == ["evidence_extraction", "extractive_summarization"]
    assert specs["evidence_extraction"]["batch_size"] == 2048
    assert specs["evidence_extraction"]["selection_metric"] == "f1"
    assert specs["extractive_summarization"]["max_sentences"] == 128
    assert all(spec["model"] == "FacebookAI/roberta-large" and spec["seed"] == 3
               and spec["dropout"] == 0.2 for spec in specs.values())
    code, stdout, stderr = sumbench(capsys, "train", "--model", models["roberta"], "--profile",
                                    "roberta-large", "--tasks", "UNSUP", "--out", out,
                                    "--print-spec")
    assert code == 0, stderr
    assert json.loads(stdout)["unsupported_span_prediction"]["learning_rate"] == 2e-5
    assert not out.exists()


def test_a_transfer_experiment_trains_encoders_per_domain(models, corpus, tmp_path, capsys):
    out = tmp_path / "transfer"
    code, _, stderr = sumbench(
        capsys, "experiment", "transfer", "--raw", corpus["raw"], "--model", models["roberta"],
        "--profile", "roberta-large", "--tasks", "FAC,EXT", "--domains",
        "biographies,companies", "--train-docs", "3", "--val-docs", "1", "--test-docs", "2",
        "--max-steps", "2", "--set", "num_epochs=1", "--device", "cpu", "--out", out)
    assert code == 0, stderr
    result = json.loads((out / "transfer.json").read_text())
    assert result["rows"] == ["biographies", "companies"]
    cell = result["matrix"]["biographies"]["companies"]
    assert set(cell) == {"factuality_classification", "extractive_summarization"}
    assert all(isinstance(value, float) for value in cell.values())
    plan = [json.loads(line) for line in (out / "plan.jsonl").read_text().splitlines()]
    train, first_cell = plan[0], plan[1]
    assert train["argv"][train["argv"].index("--profile") + 1] == "roberta-large"
    assert first_cell["argv"][first_cell["argv"].index("--model") + 1] == \
        str(out / "models" / "biographies")
    trained = json.loads((out / "models" / "biographies" / "train_result.json").read_text())
    assert trained["kind"] == "encoder" and trained["models"] == {
        task: f"{task}/best" for task in ("factuality_classification",
                                          "extractive_summarization")}
    assert trained["specs"]["factuality_classification"]["max_steps"] == 2
    ran = json.loads((out / "cells" / "biographies" / "companies" / "results.json").read_text())
    assert ran["scores"]["factuality_classification"]["headline"] == \
        cell["factuality_classification"]


@pytest.mark.parametrize("extra, needle", [
    (["--tasks", "FAC,ABS"], "the encoder profiles run FAC, EVEXT, EXT, UNSUP only"),
    (["--lora"], "--lora: encoder profiles fine-tune every weight"),
    (["--set", "lora_r=8"], "lora_r is not a field of the encoder spec"),
])
def test_an_encoder_experiment_refuses_what_its_jobs_would(models, corpus, tmp_path, capsys,
                                                           extra, needle):
    out = tmp_path / "transfer"
    code, _, stderr = sumbench(
        capsys, "experiment", "transfer", "--raw", corpus["raw"], "--model", models["roberta"],
        "--profile", "roberta-large", "--domains", "biographies,companies", "--out", out,
        *extra)
    assert code == 2 and needle in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not out.exists()
