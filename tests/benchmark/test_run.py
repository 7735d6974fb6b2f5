"""`sumbench run` end to end on the shared USB fixture with tiny local models: fine-tuning
(LoRA) and few-shot (causal LM) modes, re-scoring, resuming, batch-size independence, errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.cli import main
from tasks.scoring import score_files

from helpers import sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, usb_tokenizer) -> dict[str, Path]:
    """A tiny tokenizer shared by a tiny T5 ("t5") and a tiny Llama ("causal")."""
    from trainers.models.tiny import build_tiny_causal_lm, build_tiny_t5

    root = tmp_path_factory.mktemp("tiny-models")
    build_tiny_t5(usb_tokenizer, save_dir=root / "t5", seed=1)
    build_tiny_causal_lm(usb_tokenizer, save_dir=root / "causal", seed=1)
    return {"t5": root / "t5", "causal": root / "causal"}


def rescored_equal(out: Path, results: dict) -> None:
    """The prediction files re-score (as `sumbench score` does) to the results' numbers."""
    paths = [out / entry["path"] for entry in results["predictions"].values()]
    assert score_files(paths) == results["scores"]
    for row in results["table"]:
        assert row["value"] == results["scores"][row["task"]]["headline"]


def finetune_args(model: Path, data: Path, out: Path, *extra) -> list:
    return ["run", "--model", model, "--tasks", "FAC,ABS", "--mode", "finetune",
            "--profile", "tiny", "--lora", "--max-steps", 3, "--early-stopping", "none",
            "--data", data, "--out", out, "--max-new-tokens", 8, *extra]


@pytest.mark.slow
def test_finetune_run_scores_rescores_and_resumes(tmp_path, capsys, tiny_models, data_dir):
    import shutil

    data_dir = shutil.copytree(data_dir, tmp_path / "data")  # its training data changes below
    out = tmp_path / "ft"
    code, stdout, stderr = sumbench(capsys, *finetune_args(tiny_models["t5"], data_dir, out,
                                                           "--batch-size", 2, "--seed", 1))
    assert code == 0, stderr
    assert [line.split()[:2] for line in stdout.splitlines()[2:]] == [
        ["factuality_classification", "auc"], ["abstractive_summarization", "rouge_gmean"]]
    results = json.loads((out / "results.json").read_text())
    assert results["spec"]["tasks"] == ["factuality_classification", "abstractive_summarization"]
    training = results["training"]["train"]
    assert training["result"]["global_step"] == 3 and training["result"]["final"] == "adapter"
    assert training["spec"] == results["provenance"]["config"]["finetune_spec"]
    assert training["spec"]["max_steps"] == 3 and training["spec"]["lora"] is True
    assert training["tasks"] == results["spec"]["tasks"]
    assert training["resumes"] == [] and training["result"]["provenance"]["seeds"] == {"seed": 1}
    assert training["result"]["provenance"]["config"]["spec"] == training["spec"]
    for info in results["models"].values():
        assert info["adapter"] == str(out / "train" / "adapter")
        assert info["model"] == str(tiny_models["t5"])
    config = results["provenance"]["config"]
    assert config["finetune_spec"]["lora"] is True and config["finetune_spec"]["seed"] == 1
    assert config["finetune_spec"]["max_steps"] == 3
    assert config["predict_spec"]["max_new_tokens"] == 8
    assert results["provenance"]["seeds"] == {"seed": 1, "training": 1}
    assert results["scores"]["factuality_classification"]["n_records"] == 14
    assert results["decoding"]["text_and_span_tasks"] == {"num_beams": 4}  # the release's
    assert results["decoding"]["label_tasks"] == {"num_beams": 1, "label_rule": "official"}
    assert "decoding: text/span tasks 4 beams, label tasks greedy (1 beam)" in stderr
    rescored_equal(out, results)

    adapter = out / "train" / "adapter" / "adapter_model.safetensors"
    stamp = adapter.stat().st_mtime_ns
    code, _, stderr = sumbench(capsys, *finetune_args(tiny_models["t5"], data_dir, out,
                                                      "--batch-size", 5, "--seed", 1,
                                                      "--resume"))
    assert code == 0, stderr
    assert "training: finished run found" in stderr
    assert "fine-tuning" not in stderr
    assert "predict factuality_classification: 14 records (0 windows computed, 14 reused)" \
        in stderr
    assert adapter.stat().st_mtime_ns == stamp
    again = json.loads((out / "results.json").read_text())
    assert again["scores"] == results["scores"] and again["spec"]["batch_size"] == 5

    code, _, stderr = sumbench(capsys, *finetune_args(tiny_models["t5"], data_dir, out))
    assert code == 2 and "already holds a run; pass --resume" in stderr
    code, _, stderr = sumbench(capsys, *finetune_args(tiny_models["t5"], data_dir, out,
                                                      "--seed", 2, "--resume"))
    assert code == 2 and "the run used a different seed" in stderr

    fac_train = data_dir / "all/factuality_classification/train.jsonl"
    rows = [json.loads(line) for line in fac_train.read_text().splitlines()]
    rows[0]["label"] = 1 - rows[0]["label"]  # a finished run on other data is not reused
    fac_train.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, _, stderr = sumbench(capsys, *finetune_args(tiny_models["t5"], data_dir, out,
                                                      "--seed", 1, "--resume"))
    assert code == 2 and f"cannot resume {out / 'train'}: the training examples changed" \
        in stderr
    assert "finished run found" not in stderr and adapter.stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_per_task_training_selects_each_model_on_its_validation_metric(tmp_path, capsys,
                                                                       tiny_models, data_dir):
    out = tmp_path / "per-task"
    code, _, stderr = sumbench(
        capsys, "run", "--model", tiny_models["t5"], "--tasks", "FAC,FIX", "--profile", "tiny",
        "--lora", "--training", "per-task", "--max-steps", 2, "--early-stopping", "metric",
        "--set", "max_output_tokens=8", "--data", data_dir, "--out", out)
    assert code == 0, stderr
    results = json.loads((out / "results.json").read_text())
    for name in ("factuality_classification", "fixing_factuality"):
        training = results["training"][f"train/{name}"]
        assert training["tasks"] == [name]
        assert training["result"]["best_step"] == 2  # evaluated once, at the end
        assert results["models"][name]["adapter"] == str(out / "train" / name / "adapter")
        log = [json.loads(line) for line in
               (out / "train" / name / "train_log.jsonl").read_text().splitlines()]
        assert [entry["step"] for entry in log if "metric" in entry] == [2]
    rescored_equal(out, results)


@pytest.mark.slow
def test_predictions_do_not_depend_on_batch_size(tmp_path, capsys, tiny_models, data_dir):
    records = {}
    for batch_size in (1, 4):
        out = tmp_path / f"batch{batch_size}"
        code, _, stderr = sumbench(
            capsys, "run", "--model", tiny_models["t5"], "--tasks", "FAC,EXT,COMP",
            "--training", "none", "--profile", "tiny", "--data", data_dir, "--out", out,
            "--max-new-tokens", 6, "--label-rule", "positional", "--batch-size", batch_size)
        assert code == 0, stderr
        results = json.loads((out / "results.json").read_text())
        assert results["training"] == {}
        rescored_equal(out, results)
        records[batch_size] = {
            task: [json.loads(line) for line in (out / entry["path"]).read_text().splitlines()]
            for task, entry in results["predictions"].items()}
    one, four = records[1], records[4]
    assert one["multisentence_compression"] == four["multisentence_compression"]
    texts = [record["prediction"] for record in one["multisentence_compression"]]
    assert len(set(texts)) > 1  # outputs depend on the input (padding mistakes would show)
    probabilities = [record["prediction"][0] for record in one["factuality_classification"]]
    assert len(set(probabilities)) > 1  # the positional rule reads real probabilities
    for task in ("factuality_classification", "extractive_summarization"):
        for a, b in zip(one[task], four[task], strict=True):
            assert a["prediction"] == pytest.approx(b["prediction"], rel=1e-4, abs=1e-12)


def test_predictions_use_the_windows_of_the_finetuning_spec(tmp_path, capsys, tiny_models,
                                                           data_dir):
    """--set window_tokens=64: EXT inputs are cut into 64-token windows for prediction too
    (as training and validation cut them), not into the default 1024 capped at 256."""
    from transformers import AutoTokenizer

    from tasks import get_task
    from trainers.inference.predict import PredictSpec, format_windows

    out = tmp_path / "windows"
    code, _, stderr = sumbench(
        capsys, "run", "--model", tiny_models["t5"], "--tasks", "EXT", "--training", "none",
        "--profile", "tiny", "--data", data_dir, "--out", out, "--max-new-tokens", 4,
        "--set", "window_tokens=64")
    assert code == 0, stderr
    config = json.loads((out / "results.json").read_text())["provenance"]["config"]
    assert config["finetune_spec"]["window_tokens"] == config["predict_spec"]["window_tokens"] \
        == 64
    assert config["predict_spec"]["max_input_tokens"] == 256  # the tiny profile's
    task = get_task("EXT")
    instances = task.instances(task.load("test", "all", str(data_dir)))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_models["t5"]))
    windows = {tokens: len(format_windows(task, instances, tokenizer, PredictSpec(
        max_input_tokens=256, window_tokens=tokens))) for tokens in (64, 1024)}
    assert windows[64] > windows[1024] >= len(instances)
    assert (f"predict extractive_summarization: {len(instances)} records ({windows[64]} "
            f"windows computed, 0 reused)") in stderr


def test_fewshot_run_from_raw_data_with_a_causal_backend(tmp_path, capsys, tiny_models,
                                                         usb_fixture_dir):
    out = tmp_path / "fewshot"
    args = ["run", "--model", tiny_models["causal"], "--tasks", "FAC,COMP", "--mode", "fewshot",
            "--fewshot-backend", "hf-causal", "--style", "llama", "--n-shots", 2,
            "--max-new-tokens", 6, "--max-prompt-tokens", 400, "--raw", usb_fixture_dir / "raw",
            "--variant", "companies", "--seed", 3, "--out", out]
    code, stdout, stderr = sumbench(capsys, *args)
    assert code == 0, stderr
    derived = out / "data" / "companies" / "factuality_classification" / "test.jsonl"
    official = (usb_fixture_dir / "task_datasets" / "companies" / "factuality_classification"
                / "test.jsonl")
    assert derived.read_bytes() == official.read_bytes()
    results = json.loads((out / "results.json").read_text())
    for task in ("factuality_classification", "multisentence_compression"):
        report = results["fewshot"][task]
        assert report["seed"] == 3 and report["budget"]["n_shots"] == 2
        assert report["style"] == "llama" and report["generated_this_run"] == report["prompts"]
        assert results["models"][task]["backend"] == "hf-causal"
        assert results["models"][task]["commit"] is None  # a local folder
    assert results["provenance"]["seeds"] == {"seed": 3, "shots": 3}
    assert results["provenance"]["config"]["fewshot"]["style"] == "llama"
    assert results["scores"]["factuality_classification"]["n_records"] == 6
    # FAC of the paper's llama style: read from the Yes/No probabilities, unreadable counted
    fac = results["fewshot"]["factuality_classification"]
    assert fac["label_reading"] == "probabilities" and 0 <= fac["unreadable_answers"] <= 6
    assert "answers without a readable label" in stderr
    rescored_equal(out, results)

    phrases = tmp_path / "phrases"
    code, _, stderr = sumbench(capsys, *args[:-1], phrases, "--tasks", "FAC",
                               "--label-reading", "phrases")
    assert code == 0, stderr
    again = json.loads((phrases / "results.json").read_text())
    assert again["fewshot"]["factuality_classification"]["label_reading"] == "phrases"
    assert again["decoding"]["label_reading"] == "phrases"

    code, _, stderr = sumbench(capsys, *args, "--resume", "--batch-size", 3)
    assert code == 0, stderr
    assert "data: reusing" in stderr and "0 prompts generated" in stderr
    assert json.loads((out / "results.json").read_text())["scores"] == results["scores"]


def test_zero_shot_run_of_a_hub_model_records_its_commit(tmp_path, capsys, tiny_models,
                                                         data_dir):
    import shutil

    from tests.trainers.test_fewshot_backends import hub_cached_model

    commit = "89abcdef0123456789abcdef0123456789abcdef"
    repo = hub_cached_model(lambda folder: shutil.copytree(tiny_models["causal"], folder),
                            "sumbench-test/tiny-llama-run", commit)
    out = tmp_path / "zero"
    try:
        code, _, stderr = sumbench(
            capsys, "run", "--model", "sumbench-test/tiny-llama-run", "--tasks", "FAC",
            "--mode", "fewshot", "--fewshot-backend", "hf-causal", "--n-shots", 0,
            "--max-new-tokens", 4, "--data", data_dir, "--variant", "companies", "--out", out)
    finally:
        shutil.rmtree(repo)
    assert code == 0, stderr
    results = json.loads((out / "results.json").read_text())
    assert results["models"]["factuality_classification"] == {
        "model": "sumbench-test/tiny-llama-run", "revision": None, "commit": commit,
        "backend": "hf-causal"}
    report = results["fewshot"]["factuality_classification"]
    assert report["budget"]["n_shots"] == 0 and report["shots_mean"] == 0
    assert report["zero_shot_items"] == report["items"] == 6
    assert report["context_window"] == 4096
    assert results["provenance"]["config"]["fewshot"]["context_window"] == 4096
    rescored_equal(out, results)


def test_command_line_specs_and_errors(tmp_path, capsys, data_dir):
    code, stdout, _ = sumbench(capsys, "run", "--model", "some/model", "--tasks", "all",
                               "--out", tmp_path / "x", "--print-spec", "--set", "lora_r=8")
    assert code == 0
    spec = json.loads(stdout)
    assert len(spec["tasks"]) == 8 and spec["train_overrides"] == {"lora_r": "8"}
    assert not (tmp_path / "x").exists()
    code, stdout, _ = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC", "--mode",
                               "fewshot", "--fewshot-backend", "hf-causal", "--n-shots", 0,
                               "--out", tmp_path / "x", "--print-spec")
    assert code == 0 and json.loads(stdout)["n_shots"] == 0  # zero-shot is allowed
    with pytest.raises(SystemExit):
        main(["run", "--model", "m", "--tasks", "FAC", "--out", str(tmp_path / "z"),
              "--n-shots", "-1"])
    assert "--n-shots: must be >= 0, got -1" in capsys.readouterr().err
    code, _, stderr = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC,ABZ",
                               "--out", tmp_path / "y")
    assert code == 2 and "abz" in stderr.lower()
    code, _, stderr = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC",
                               "--mode", "fewshot", "--out", tmp_path / "y")
    assert code == 2 and "few-shot runs need a backend" in stderr
    code, _, stderr = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC,fac",
                               "--out", tmp_path / "y")
    assert code == 2 and "listed twice" in stderr
    code, _, stderr = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC", "--data",
                               data_dir, "--out", tmp_path / "bad", "--set", "lora_rank=8")
    assert code == 2 and "unknown spec field 'lora_rank'" in stderr
    assert not (tmp_path / "bad").exists()  # refused before anything was written
    foreign = tmp_path / "foreign"
    (foreign / "predictions").mkdir(parents=True)
    code, _, stderr = sumbench(capsys, "run", "--model", "m", "--tasks", "FAC", "--data",
                               data_dir, "--out", foreign, "--training", "none")
    assert code == 2 and "holds predictions but no run_spec.json" in stderr
    with pytest.raises(SystemExit):
        main(["run", "--model", "m", "--tasks", "FAC", "--out", str(tmp_path / "z"),
              "--data", "a", "--raw", "b"])


@pytest.mark.slow
def test_a_run_from_a_config_file_and_again_from_its_results(tmp_path, capsys, tiny_models,
                                                              data_dir):
    """`--config FILE` (YAML) sets every option the command line leaves out; results.json
    records every option (`run_config`), and `--config results.json` repeats the run: the
    same numbers."""
    config = tmp_path / "run.yaml"
    config.write_text(f"model: {tiny_models['t5']}\ntasks: FAC,ABS\nprofile: tiny\nlora: true\n"
                      f"max-steps: 2\nearly_stopping: none\ndata: {data_dir}\n"
                      f"max_new_tokens: 6\nset:\n  learning_rate: 0.001\n  seed: 3\n")
    code, _, stderr = sumbench(capsys, "run", "--config", config, "--out", tmp_path / "a",
                               "--batch-size", 4)
    assert code == 0, stderr
    first = json.loads((tmp_path / "a" / "results.json").read_text())
    recorded = first["run_config"]
    assert (recorded["tasks"], recorded["max_steps"], recorded["batch_size"]) == (
        ["FAC,ABS"], 2, 4)  # --tasks takes several words: a list, as the command line has it
    assert recorded["set"] == {"learning_rate": "0.001", "seed": "3"} and recorded["lora"]
    assert first["training"]["train"]["spec"]["learning_rate"] == 0.001
    code, _, stderr = sumbench(capsys, "run", "--config", tmp_path / "a" / "results.json",
                               "--out", tmp_path / "b")
    assert code == 0, stderr
    again = json.loads((tmp_path / "b" / "results.json").read_text())
    assert again["scores"] == first["scores"] and again["run_config"] == recorded
    bad = tmp_path / "bad.yaml"
    bad.write_text("taks: FAC\n")
    code, _, stderr = sumbench(capsys, "run", "--config", bad, "--out", tmp_path / "c")
    assert code == 2 and "bad.yaml, field 'taks': not an option of this command" in stderr
    assert "did you mean 'tasks'" in stderr
