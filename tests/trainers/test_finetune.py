"""The fine-tuning runner on a tiny T5 and the USB fixture: profiles, outputs, resume, early
stopping (an undefined metric included), the training data a resumed run must share, and the
`sumbench train` command."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from tasks.plumbing.errors import SumbenchError, UnknownNameError
from tasks.plumbing.io import read_json, read_jsonl
from trainers.finetuning.profiles import (
    FinetuneSpec,
    SpecError,
    get_profile,
    prediction_budgets,
    profile_names,
)

from helpers import assert_same_weights, model_weights, sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def spec(tiny_base):
    return get_profile("tiny", model=str(tiny_base), max_input_tokens=128, max_output_tokens=48)


# ---- profiles and specs ------------------------------------------------------------------

def test_profiles_carry_the_paper_hyperparameters():
    large, xl = get_profile("flan-t5-large"), get_profile("flan-t5-xl")
    assert (large.model, large.learning_rate, large.batch_size, large.max_input_tokens,
            large.max_output_tokens) == ("google/flan-t5-large", 5e-5, 32, 8192, 768)
    assert (xl.model, xl.learning_rate, xl.batch_size, xl.max_input_tokens,
            xl.max_output_tokens) == ("google/flan-t5-xl", 5e-5, 64, 1536, 512)
    assert large.accumulation_steps(1) == 16 and large.accumulation_steps(4) == 4
    assert xl.accumulation_steps(2) == 8
    with pytest.raises(SpecError, match="per_device_batch_size"):
        large.accumulation_steps(3)
    with pytest.raises(UnknownNameError, match="flan-t5-large"):
        get_profile("flan-t5-larg")


def test_t5_large_differs_from_flan_t5_large_only_in_its_checkpoint(capsys, tmp_path):
    t5, flan = get_profile("t5-large"), get_profile("flan-t5-large")
    differing = {name for name, value in t5.to_dict().items() if flan.to_dict()[name] != value}
    assert differing == {"profile", "model"} and t5.model == "google-t5/t5-large"
    assert prediction_budgets(t5) == prediction_budgets(flan) == (8192, 767)
    with pytest.raises(SpecError, match="precision 'fp16' is not supported: T5 activations"):
        get_profile("t5-large", precision="fp16")
    code, printed, _ = sumbench(capsys, "train", "--profile", "t5-large", "--tasks", "FAC",
                                "--out", tmp_path / "x", "--print-spec")
    spec = json.loads(printed)
    assert code == 0 and (spec["learning_rate"], spec["batch_size"], spec["max_input_tokens"],
                          spec["max_output_tokens"]) == (5e-5, 32, 8192, 768)
    assert "t5-large" in profile_names() and not (tmp_path / "x").exists()


def test_spec_round_trips_and_overrides():
    spec = get_profile("flan-t5-xl", lora=True, lora_target_modules=("q", "k", "v", "o"))
    assert FinetuneSpec.from_json(spec.to_json()) == spec
    assert dataclasses.replace(spec, seed=5).seed == 5 and spec.seed == 0
    parsed = spec.override({"learning_rate": "1e-4", "lora": "false", "max_steps": "none",
                            "lora_target_modules": "q,v", "eval_every_steps": "100"})
    assert (parsed.learning_rate, parsed.lora, parsed.max_steps, parsed.lora_target_modules,
            parsed.eval_every_steps) == (1e-4, False, None, ("q", "v"), 100)
    with pytest.raises(SpecError) as caught:
        spec.override({"learning_rat": "1"})
    assert str(caught.value) == ("unknown spec field 'learning_rat'; did you mean "
                                 "'learning_rate'?")
    with pytest.raises(SpecError) as caught:
        FinetuneSpec.from_dict({**spec.to_dict(), "extra": 1, "max_step": 3})
    assert str(caught.value) == ("unknown spec field(s): extra, max_step; did you mean "
                                 "'max_steps' or 'megabatch_steps' (for 'max_step')?")


def test_fp16_is_refused_and_auto_precision_is_fp32_on_cpu():
    import torch

    from trainers.finetuning.model_setup import resolve_precision

    with pytest.raises(SpecError, match="fp16.*bf16"):
        get_profile("flan-t5-large", precision="fp16")
    with pytest.raises(SpecError, match="train_fraction"):
        get_profile("tiny", train_fraction=0.0)
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"


# ---- runs ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_full_finetune_writes_model_config_and_log(spec, data_dir, tmp_path):
    from trainers.finetuning.finetune import finetune, validation_loss_fn

    run_spec = dataclasses.replace(spec, max_steps=4, eval_every_steps=2)
    evaluate = validation_loss_fn(run_spec, ["FAC", "COMP"], data_dir)
    final = finetune(run_spec, ["FAC", "COMP"], data_dir=data_dir, out_dir=tmp_path,
                     evaluate_fn=evaluate)
    assert final == tmp_path / "model"
    config = json.loads((tmp_path / "train_config.json").read_text())
    assert config["config"]["spec"] == run_spec.to_dict()
    assert config["config"]["tasks"] == ["factuality_classification", "multisentence_compression"]
    assert config["config"]["data"]["examples"] == {"factuality_classification": 14,
                                                    "multisentence_compression": 11}
    assert config["config"]["gradient_accumulation_steps"] == 2
    assert {"git", "packages", "seeds", "created"} <= set(config)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    losses = [entry["loss"] for entry in log if "loss" in entry]
    metrics = [entry for entry in log if "metric" in entry]
    assert [entry["step"] for entry in log if "loss" in entry] == [1, 2, 3, 4]
    assert losses[-1] < losses[0]
    assert all(entry["target_tokens_per_s"] > 0 and entry["seconds_per_step"] > 0
               for entry in log if "loss" in entry)
    assert [entry["step"] for entry in metrics] == [2, 4]
    assert metrics[1]["metric"] > metrics[0]["metric"]          # -loss improves
    result = json.loads((tmp_path / "train_result.json").read_text())
    assert (result["global_step"], result["best_step"]) == (4, 4)
    trained, base = model_weights(final), model_weights(spec_model_path(spec))
    assert any(not trained[name].equal(base[name]) for name in base)
    with pytest.raises(SumbenchError, match="already holds a training run"):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path)


def spec_model_path(spec):
    from pathlib import Path

    return Path(spec.model)


@pytest.mark.slow
def test_resume_reproduces_an_uninterrupted_run(spec, data_dir, tmp_path):
    from trainers.finetuning.finetune import finetune

    # FAC: 14 examples, batch 4 -> 4 steps per epoch (the last one short); 6 steps cross epochs
    run_spec = dataclasses.replace(spec, max_steps=6, save_every_steps=None)
    whole = finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "whole")
    checkpoint = finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "parts",
                          stop_after_steps=3)
    assert checkpoint == tmp_path / "parts" / "checkpoints" / "step-00000003"
    assert not (tmp_path / "parts" / "model").exists()
    with pytest.raises(SumbenchError, match="learning_rate"):
        finetune(dataclasses.replace(run_spec, learning_rate=1e-4), ["FAC"], data_dir=data_dir,
                 out_dir=tmp_path / "parts", resume=True)
    resumed = finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "parts",
                       resume=True)
    assert_same_weights(model_weights(whole), model_weights(resumed))
    assert finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "parts",
                    resume=True) == resumed                      # finished: nothing to redo
    _assert_one_resume_and_the_same_result(run_spec, tmp_path / "whole", tmp_path / "parts")

    def losses(folder):
        return [(e["step"], e["loss"]) for e in read_jsonl(folder / "train_log.jsonl")]
    assert losses(tmp_path / "whole") == losses(tmp_path / "parts")
    assert len(losses(tmp_path / "whole")) == 6


def _assert_one_resume_and_the_same_result(run_spec, whole, parts):
    """parts/train_config.json keeps the first run's provenance and lists the resume from
    step 3 (the no-op call on the finished run adds none); train_result.json records the
    provenance of the run that finished, and matches the uninterrupted run's but its time."""
    from trainers.finetuning.checkpoints import RESUME_KEYS

    first, resumed = (json.loads((folder / "train_config.json").read_text())
                      for folder in (whole, parts))
    assert "resumes" not in first and first["config"] == resumed["config"]
    assert [entry["step"] for entry in resumed["resumes"]] == [3]
    assert resumed["resumes"][0]["provenance"]["config"] == resumed["config"]
    assert resumed["resumes"][0]["provenance"]["created"] >= resumed["created"]
    results = [json.loads((folder / "train_result.json").read_text()) for folder in (whole, parts)]
    assert results[1]["provenance"]["config"] == {key: resumed["config"][key]
                                                  for key in RESUME_KEYS}
    assert results[1]["provenance"]["seeds"] == {"seed": run_spec.seed}
    assert results[1]["provenance"]["git"] == resumed["git"]
    for result in results:
        del result["provenance"]["created"]
    assert results[0] == results[1]


@pytest.mark.slow
def test_early_stopping_keeps_the_best_weights(spec, data_dir, tmp_path):
    from trainers.finetuning.finetune import finetune

    scripted = iter([1.0, 0.5, 0.7, 2.0])
    calls = []

    def evaluate(model, tokenizer):
        calls.append(model.training)
        return next(scripted)
    run_spec = dataclasses.replace(spec, max_steps=8, eval_every_steps=1,
                                   early_stopping_patience=2)
    final = finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "stopped",
                     evaluate_fn=evaluate)
    result = json.loads((tmp_path / "stopped" / "train_result.json").read_text())
    assert (result["global_step"], result["best_step"], result["stopped_early"]) == (3, 1, True)
    assert calls == [False, False, False]
    one_step = finetune(dataclasses.replace(run_spec, max_steps=1), ["FAC"], data_dir=data_dir,
                        out_dir=tmp_path / "one")
    assert_same_weights(model_weights(final), model_weights(one_step))


@pytest.mark.slow
def test_resume_refuses_another_best_model_selection_and_a_stale_best(spec, data_dir,
                                                                      tmp_path):
    """The early-stopping choice is part of what a resumed run must share (a changed one
    made train_result.json contradict the weights); best/ must hold the best step's weights."""
    from trainers.finetuning.checkpoints import check_best_step
    from trainers.finetuning.finetune import finetune

    def constant(model, tokenizer):
        return 1.0
    run_spec = dataclasses.replace(spec, max_steps=4, eval_every_steps=1, save_every_steps=None,
                                   early_stopping_patience=10)
    out = tmp_path / "run"
    finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, evaluate_fn=constant,
             stop_after_steps=2)
    name = f"{__name__}.test_resume_refuses_another_best_model_selection_and_a_stale_best." \
           f"<locals>.constant"
    with pytest.raises(SumbenchError, match=re.escape(
            f"selected its best model otherwise (early stopping by {name}; now None)")):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, resume=True)
    final = finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, evaluate_fn=constant,
                     resume=True)
    with pytest.raises(SumbenchError, match="selected its best model otherwise"):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, resume=True)  # finished
    assert json.loads((out / "train_result.json").read_text())["weights_from_step"] == 1
    assert final == out / "model"
    check_best_step(out / "best", 1)
    with pytest.raises(SumbenchError, match=re.escape(
            f"{out / 'best'} holds the weights of step 1, but the run's best evaluation was at "
            f"step 3")):
        check_best_step(out / "best", 3)


def test_resume_before_any_checkpoint_still_checks_the_settings(spec, data_dir, tmp_path):
    import shutil

    from trainers.finetuning.finetune import finetune

    def interrupting(model, tokenizer):
        raise KeyboardInterrupt
    run_spec = dataclasses.replace(spec, max_steps=4, eval_every_steps=1, save_every_steps=None)
    with pytest.raises(KeyboardInterrupt):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, evaluate_fn=interrupting)
    shutil.rmtree(tmp_path / "checkpoints")       # as if killed (SIGKILL) before it was saved
    assert (tmp_path / "train_config.json").is_file()
    changed = dataclasses.replace(run_spec, learning_rate=run_spec.learning_rate / 3)
    with pytest.raises(SumbenchError, match=re.escape(
            f"learning_rate ({run_spec.learning_rate!r}; now {changed.learning_rate!r})")):
        finetune(changed, ["FAC"], data_dir=data_dir, out_dir=tmp_path, resume=True,
                 evaluate_fn=interrupting)
    with pytest.raises(SumbenchError, match="different tasks"):
        finetune(run_spec, ["COMP"], data_dir=data_dir, out_dir=tmp_path, resume=True,
                 evaluate_fn=interrupting)


@pytest.mark.slow
def test_train_command(spec, data_dir, tmp_path, capsys):
    from benchmark.commands.train import main

    args = ["--profile", "tiny", "--model", spec.model, "--tasks", "FIX", "--data",
            str(data_dir), "--out", str(tmp_path / "cli"), "--set", "max_input_tokens=128",
            "--max-steps", "2", "--early-stopping", "loss", "--lora"]
    assert main(args + ["--print-spec"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["max_steps"], printed["lora"], printed["max_input_tokens"]) == (2, True, 128)
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cli" / "adapter")
    assert (tmp_path / "cli" / "adapter" / "adapter_config.json").exists()
    assert main(args + ["--set", "precision=fp16"]) == 2
    assert "fp16" in capsys.readouterr().err


@pytest.mark.slow
def test_gradient_checkpointing_gives_the_same_lora_training(spec, data_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    from trainers.finetuning.finetune import finetune

    adapters = []
    for checkpointing in (False, True):
        run_spec = dataclasses.replace(spec, max_steps=2, lora=True,
                                       gradient_checkpointing=checkpointing)
        final = finetune(run_spec, ["FAC"], data_dir=data_dir,
                         out_dir=tmp_path / str(checkpointing))
        adapters.append(load_file(str(final / "adapter_model.safetensors")))
    assert adapters[0].keys() == adapters[1].keys()
    assert any(float(w.abs().max()) > 0 for n, w in adapters[0].items() if "lora_B" in n)
    for name, weight in adapters[0].items():
        assert torch.allclose(weight, adapters[1][name], atol=1e-6), name


# ---- windows, training data on resume, undefined metrics, --spec FILE --------------------

def test_window_tokens_is_a_spec_field_capped_by_the_input_budget():
    large, xl, tiny = (get_profile(name) for name in ("flan-t5-large", "flan-t5-xl", "tiny"))
    assert [s.window_tokens for s in (large, xl, tiny)] == [1024, 1024, 1024]
    assert [s.window_budget for s in (large, xl, tiny)] == [1024, 1024, 256]
    spec = large.override({"window_tokens": "512"})
    assert (spec.window_tokens, spec.window_budget) == (512, 512)
    assert FinetuneSpec.from_json(spec.to_json()) == spec
    with pytest.raises(SpecError, match="window_tokens"):
        large.override({"window_tokens": 0})


def _copy_data(data_dir, target):
    import shutil

    return shutil.copytree(data_dir, target)


def _flip_first_fac_label(data_dir) -> bytes:
    """Flip the first FAC train label in place (inputs unchanged); returns the old bytes."""
    from tasks.plumbing.io import write_jsonl

    path = data_dir / "all/factuality_classification/train.jsonl"
    before = path.read_bytes()
    rows = read_jsonl(path)
    rows[0]["label"] = 1 - rows[0]["label"]
    write_jsonl(path, rows)
    return before


@pytest.mark.slow
def test_resume_refuses_other_training_data(spec, data_dir, tmp_path):
    from trainers.finetuning.finetune import finetune

    run_spec = dataclasses.replace(spec, max_steps=2, save_every_steps=None)
    data = _copy_data(data_dir, tmp_path / "data")
    fac_train = data / "all/factuality_classification/train.jsonl"
    out = tmp_path / "run"
    finetune(run_spec, ["FAC"], data_dir=data, out_dir=out, stop_after_steps=1)
    original = _flip_first_fac_label(data)
    with pytest.raises(SumbenchError, match=r"training examples changed \(their ids, sources "
                                            r"or targets differ"):
        finetune(run_spec, ["FAC"], data_dir=data, out_dir=out, resume=True)
    fac_train.write_bytes(original)
    with pytest.raises(SumbenchError, match=rf"another data folder \({data}; now {data_dir}\)"):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, resume=True)
    final = finetune(run_spec, ["FAC"], data_dir=data, out_dir=out, resume=True)
    assert final == out / "model"
    assert finetune(run_spec, ["FAC"], data_dir=data, out_dir=out, resume=True) == final
    _flip_first_fac_label(data)
    with pytest.raises(SumbenchError, match="training examples changed"):
        finetune(run_spec, ["FAC"], data_dir=data, out_dir=out, resume=True)


def test_a_damaged_train_config_is_a_data_error_naming_file_and_key(spec, data_dir, tmp_path):
    from tasks.plumbing.errors import DataError
    from trainers.finetuning.finetune import finetune

    run_spec = dataclasses.replace(spec, max_steps=2, save_every_steps=None)
    finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, stop_after_steps=1)
    config_path = tmp_path / "train_config.json"
    config = json.loads(config_path.read_text())
    del config["config"]["data_digest"]
    config_path.write_text(json.dumps(config))
    with pytest.raises(DataError, match=r"train_config\.json, field 'config\.data_digest': "
                                        r"missing"):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, resume=True)
    config_path.write_text("{")
    with pytest.raises(DataError, match=r"train_config\.json:1: malformed JSON"):
        finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, resume=True)


@pytest.mark.slow
def test_an_undefined_headline_counts_as_no_improvement(spec, data_dir, tmp_path):
    import math

    from tasks.plumbing.io import write_jsonl
    from trainers.finetuning.evaluation import headline_metric_fn, mean_headline
    from trainers.finetuning.finetune import finetune

    assert mean_headline([50.0, 70.0]) == 60.0
    assert math.isnan(mean_headline([50.0, None])) and math.isnan(mean_headline([]))
    one_class = _copy_data(data_dir, tmp_path / "data")
    path = one_class / "all/factuality_classification/validation.jsonl"
    write_jsonl(path, [dict(row, label=0) for row in read_jsonl(path)])   # AUC undefined
    run_spec = dataclasses.replace(spec, max_steps=4, eval_every_steps=1, max_output_tokens=4,
                                   early_stopping_patience=2)
    evaluate = headline_metric_fn(run_spec, ["FAC"], str(one_class))
    finetune(run_spec, ["FAC"], data_dir=one_class, out_dir=tmp_path / "run",
             evaluate_fn=evaluate)
    result = json.loads((tmp_path / "run" / "train_result.json").read_text())
    assert (result["global_step"], result["best_step"], result["stopped_early"]) == (2, None, True)
    metrics = [e["metric"] for e in read_jsonl(tmp_path / "run" / "train_log.jsonl")
               if "metric" in e]
    assert metrics == [None, None]  # undefined, written as null (valid JSON), never NaN


@pytest.mark.parametrize("content, message", [
    ('{"learning_rate": "fast"}', r"field 'learning_rate': field 'learning_rate' expects a "
                                  r"number"),
    ('{"lora_rank": 8}', r"field 'lora_rank': unknown spec field"),
    ('{"batch_size": null}', r"field 'batch_size': "),
    ('{"window_tokens": 0}', r"field 'window_tokens': field 'window_tokens' must be >= 1"),
    ('"lr=1"', r"expected a JSON object of spec fields"),
])
def test_train_spec_file_errors_name_the_file_and_field(tmp_path, capsys, content, message):
    from helpers import sumbench

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(content)
    code, _, err = sumbench(capsys, "train", "--tasks", "FAC", "--out", tmp_path / "out",
                            "--spec", spec_file, "--print-spec")
    assert code == 2 and str(spec_file) in err and re.search(message, err), err


def test_a_missing_or_malformed_train_spec_file_names_file_line_and_column(tmp_path, capsys):
    from helpers import sumbench

    missing, broken = tmp_path / "missing.json", tmp_path / "broken.json"
    broken.write_text('{\n "seed": 1,\n}')
    for path, message in [(missing, f"{missing}: spec file not found"),
                          (broken, f"{broken}:3: malformed JSON (Expecting property name "
                                   f"enclosed in double quotes at column 1)")]:
        code, _, err = sumbench(capsys, "train", "--tasks", "FAC", "--out", tmp_path / "out",
                                "--spec", path, "--print-spec")
        assert code == 2 and message in err, err


def test_model_commit_reads_the_hub_cache(tmp_path, monkeypatch):
    """The commit a hub id and revision resolve to in the local hub cache (offline)."""
    import huggingface_hub.constants

    from trainers.finetuning.finetune import model_commit

    main, tagged = "a" * 40, "b" * 40
    repo = tmp_path / "models--someone--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(main)
    (repo / "refs" / "v1").write_text(tagged)
    for commit in (main, tagged):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_commit("someone/tiny", None) == main
    assert model_commit("someone/tiny", "v1") == tagged
    assert model_commit("someone/unknown", None) is None


@pytest.mark.slow
def test_training_runs_with_deterministic_kernels_and_restores_the_setting(spec, data_dir,
                                                                          tmp_path):
    """deterministic (default true) is on while training (an evaluation sees it), recorded
    in train_config.json, and the caller's setting is back afterwards; off is off."""
    import torch

    from trainers.finetuning.finetune import finetune

    seen = []

    def record_setting(model, tokenizer) -> float:
        seen.append(torch.are_deterministic_algorithms_enabled())
        return 0.0
    assert spec.deterministic and not torch.are_deterministic_algorithms_enabled()
    run_spec = dataclasses.replace(spec, max_steps=1, save_every_steps=None, eval_every_steps=1)
    finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path / "on",
             evaluate_fn=record_setting)
    assert seen == [True] and not torch.are_deterministic_algorithms_enabled()
    config = read_json(tmp_path / "on" / "train_config.json")
    assert config["config"]["spec"]["deterministic"] is True
    torch.use_deterministic_algorithms(True)
    try:
        finetune(run_spec.override({"deterministic": "false"}), ["FAC"], data_dir=data_dir,
                 out_dir=tmp_path / "off", evaluate_fn=record_setting)
        assert seen == [True, False]
        assert torch.are_deterministic_algorithms_enabled()          # the caller's, restored
    finally:
        torch.use_deterministic_algorithms(False)
    config = read_json(tmp_path / "off" / "train_config.json")
    assert config["config"]["spec"]["deterministic"] is False


@pytest.mark.slow
def test_deterministic_may_change_on_resume_and_each_part_records_its_own(spec, data_dir,
                                                                          tmp_path):
    """`deterministic` decides only whether a GPU adds up in a fixed order: a run resumes with
    it changed (or recorded before the field existed), and `resumes` keeps each part's value;
    a finished run is reused whatever it says."""
    from trainers.finetuning.finetune import finetune

    run_spec = dataclasses.replace(spec, max_steps=4, save_every_steps=None)
    finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, stop_after_steps=2)
    config_path = tmp_path / "train_config.json"
    config = read_json(config_path)
    del config["config"]["spec"]["deterministic"]                # as an earlier sumbench wrote
    config_path.write_text(json.dumps(config))
    finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, stop_after_steps=1,
             resume=True)                                        # steps 3, then 4 below
    final = finetune(dataclasses.replace(run_spec, deterministic=False), ["FAC"],
                     data_dir=data_dir, out_dir=tmp_path, resume=True)
    resumes = read_json(config_path)["resumes"]
    assert [(r["step"], r["provenance"]["config"]["spec"]["deterministic"])
            for r in resumes] == [(2, True), (3, False)]
    assert read_json(tmp_path / "train_result.json")["final"] == final.name
    assert finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path, resume=True) == final


def test_train_command_trains_where_it_is_told(spec, data_dir, tmp_path, capsys):
    """--device cpu trains on the CPU also where there is a GPU; a device torch does not have
    is an error before anything is written."""
    import torch

    from benchmark.commands.train import main

    args = ["--profile", "tiny", "--model", spec.model, "--tasks", "FAC", "--data",
            str(data_dir), "--set", "max_input_tokens=128", "--max-steps", "1",
            "--early-stopping", "none"]
    assert main([*args, "--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    assert read_json(tmp_path / "cpu" / "train_config.json")["config"]["device"] == "cpu"
    capsys.readouterr()
    if not torch.cuda.is_available():
        assert main([*args, "--out", str(tmp_path / "gpu"), "--device", "cuda"]) == 2
        assert "torch sees no CUDA GPU" in capsys.readouterr().err
        assert not (tmp_path / "gpu").exists()


@pytest.mark.parametrize("kind, recorded", [
    ("metric", "trainers.evaluation.headline_metric_fn.<locals>.evaluate"),
    ("loss", "trainers.finetune.validation_loss_fn.<locals>.evaluate"),
])
def test_a_run_recorded_before_trainers_was_grouped_by_job_still_resumes(spec, tmp_path,
                                                                          kind, recorded):
    """train_config.json names the best-model selection by its function's module; the
    modules moved (trainers.evaluation -> trainers.finetuning.evaluation), the functions
    did not change, so an earlier run's record matches and another selection still does not."""
    from trainers.finetuning.checkpoints import check_settings, evaluation_name
    from trainers.finetuning.evaluation import early_stopping_fn

    evaluate = early_stopping_fn(kind, spec, ["FAC"], None)
    config = {"spec": spec.to_dict(), "evaluation": recorded, "tasks": ["FAC"],
              "data_dir": None}
    assert evaluation_name(evaluate) != recorded
    check_settings(tmp_path, config, spec, ["FAC"], None, evaluate)
    with pytest.raises(SumbenchError, match="selected its best model otherwise"):
        check_settings(tmp_path, config, spec, ["FAC"], None, None)
