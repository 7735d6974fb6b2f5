"""Ctrl-C and SIGTERM during fine-tuning (trainers.finetuning.interrupts) on a tiny T5 and the USB
fixture: signals held while a step is applied, a checkpoint of the last completed step saved
when an interrupt stops a step or an evaluation, resumed to the uninterrupted run's weights,
result and log; a second interrupt while saving or deleting checkpoints; and a real SIGTERM
sent to `sumbench train` in a subprocess."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.plumbing.io import read_json, read_jsonl
from trainers.finetuning.profiles import get_profile

from helpers import assert_same_weights, model_weights, sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_spec(tiny_base):
    """FAC (14 examples, batch 4: 4 steps per epoch, 2 micro-batches each), 7 steps,
    evaluated after every step, a checkpoint every 2 steps (the newest 2 kept)."""
    return get_profile("tiny", model=str(tiny_base), max_input_tokens=128, max_output_tokens=48,
                       max_steps=7, eval_every_steps=1, save_every_steps=2)


def evaluation(run_spec, data_dir, interrupt: tuple[str, int] | None = None):
    """evaluate_fn: minus the FAC validation loss. `interrupt` ("evaluation", n): its nth call
    raises KeyboardInterrupt (Ctrl-C during an evaluation); ("step", n): the second
    micro-batch of the step after its nth call does (Ctrl-C mid-step: one micro-batch's
    gradients accumulated, nothing applied)."""
    from trainers.finetuning.finetune import validation_loss_fn

    minus_loss = validation_loss_fn(run_spec, ["FAC"], data_dir)
    calls: list[int] = []

    def evaluate(model, tokenizer):
        calls.append(len(calls) + 1)
        if interrupt == ("evaluation", len(calls)):
            raise KeyboardInterrupt
        if interrupt == ("step", len(calls)):
            forwards: list[int] = []

            def second_training_forward(module, args):
                forwards.extend([1] if module.training else [])
                if len(forwards) == 2:
                    raise KeyboardInterrupt
            model.register_forward_pre_hook(second_training_forward)
        return minus_loss(model, tokenizer)

    return evaluate


def train(run_spec, data_dir, out, interrupt=None, resume=False):
    from trainers.finetuning.finetune import finetune

    return finetune(run_spec, ["FAC"], data_dir=data_dir, out_dir=out, resume=resume,
                    evaluate_fn=evaluation(run_spec, data_dir, interrupt))


@pytest.fixture(scope="module")
def whole(run_spec, data_dir, tmp_path_factory):
    """The uninterrupted run's folder."""
    out = tmp_path_factory.mktemp("whole")
    train(run_spec, data_dir, out)
    return out


def assert_same_run(folder, whole):
    """Bit-identical final weights; the same train_result.json but for the time it was
    written; the same log but for the measured throughput."""
    assert_same_weights(model_weights(folder / "model"), model_weights(whole / "model"))
    results = [read_json(path / "train_result.json") for path in (folder, whole)]
    for result in results:
        del result["provenance"]["created"]
    assert results[0] == results[1]

    def log(path):
        return [{key: value for key, value in entry.items()
                 if key not in ("target_tokens_per_s", "tokens_per_s", "seconds_per_step")}
                for entry in read_jsonl(path / "train_log.jsonl")]
    assert log(folder) == log(whole)


def stderr_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("training ")]


def saved_line(step: int, saved) -> str:
    """The stderr line of an interrupt that saved step `step` in `saved`."""
    return (f"training interrupted after step {step}: checkpoint saved in {saved}; run the "
            f"same command with --resume to continue from it")


# ---- holding signals ---------------------------------------------------------------------

def test_signals_are_held_while_a_step_is_applied_and_a_second_one_goes_through():
    from benchmark.cli import Terminated, sigterm_as_interrupt
    from trainers.finetuning.interrupts import deferred_interrupts

    before, done = signal.getsignal(signal.SIGINT), []
    try:
        with pytest.raises(KeyboardInterrupt), deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            done.append("held")
        with pytest.raises(KeyboardInterrupt), deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)      # a second Ctrl-C stops at once
            done.append("not reached")
        with sigterm_as_interrupt(), pytest.raises(Terminated), deferred_interrupts():
            signal.raise_signal(signal.SIGTERM)
            done.append("SIGTERM held")
        with pytest.raises(ValueError), deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            raise ValueError("the body's own error wins")
    except KeyboardInterrupt:
        pytest.fail(f"a signal was not held (done so far: {done})")
    assert done == ["held", "SIGTERM held"]
    assert signal.getsignal(signal.SIGINT) is before


# ---- interrupts during training, in-process ------------------------------------------------

@pytest.mark.slow
def test_interrupts_mid_step_and_mid_evaluation_resume_to_the_uninterrupted_run(
        run_spec, data_dir, whole, tmp_path, capsys):
    from benchmark.run import training_record
    from trainers.finetuning.checkpoints import checkpoint_folders

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(run_spec, data_dir, out, interrupt=("step", 3))     # stopped inside step 4
    saved = out / "checkpoints" / "step-00000003"
    assert stderr_lines(capsys) == [saved_line(3, saved)]
    assert [path.name for path in checkpoint_folders(out)] == ["step-00000002", "step-00000003"]
    state = read_json(saved / "state.json")
    assert (state["global_step"], state["best_step"], state["evaluation_due"]) == (3, 3, False)
    first_config = read_json(out / "train_config.json")

    with pytest.raises(KeyboardInterrupt):   # resumed at 3, stopped evaluating step 5
        train(run_spec, data_dir, out, interrupt=("evaluation", 2), resume=True)
    saved = out / "checkpoints" / "step-00000005"
    assert stderr_lines(capsys) == [saved_line(5, saved)]
    state = read_json(saved / "state.json")
    assert (state["global_step"], state["best_step"], state["evaluation_due"]) == (5, 4, True)

    assert train(run_spec, data_dir, out, resume=True) == out / "model"
    assert read_json(out / "train_result.json")["best_step"] == 7    # the resumed steps count
    assert_same_run(out, whole)
    config = read_json(out / "train_config.json")
    assert [entry["step"] for entry in config.pop("resumes")] == [3, 5]
    assert config == first_config           # the first run's config and provenance are kept
    record = training_record(out, ["factuality_classification"])        # for results.json
    assert record["resumes"] == [{"step": 3, "git": config["git"]},
                                 {"step": 5, "git": config["git"]}]


@pytest.mark.slow
def test_a_ctrl_c_while_an_evaluation_is_recorded_waits_until_it_is_whole(
        run_spec, data_dir, whole, tmp_path, capsys, monkeypatch):
    """A real SIGINT while best/ is written (the evaluation of step 3 is being recorded: best/,
    log line, counters) is held until all of it is done; the checkpoint then has step 3
    evaluated."""
    import torch

    out, torch_save = tmp_path / "run", torch.save

    def save_then_ctrl_c(obj, path, *args, **kwargs):
        torch_save(obj, path, *args, **kwargs)
        if ".best." in str(path) and read_jsonl(out / "train_log.jsonl")[-1]["step"] == 3:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(torch, "save", save_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(run_spec, data_dir, out)
    monkeypatch.undo()
    saved = out / "checkpoints" / "step-00000003"
    assert stderr_lines(capsys) == [saved_line(3, saved)]
    state = read_json(saved / "state.json")
    assert (state["global_step"], state["best_step"], state["evaluation_due"]) == (3, 3, False)
    assert read_json(out / "best" / "state.json")["best_step"] == 3
    assert read_jsonl(out / "train_log.jsonl")[-1] == {
        "step": 3, "metric": state["best_metric"], "best_metric": state["best_metric"],
        "best_step": 3}
    train(run_spec, data_dir, out, resume=True)
    assert_same_run(out, whole)


@pytest.mark.slow
def test_a_second_interrupt_while_saving_keeps_the_earlier_checkpoints(
        run_spec, data_dir, whole, tmp_path, capsys, monkeypatch):
    import torch

    out, torch_save = tmp_path / "run", torch.save

    def save_then_ctrl_c(obj, path, *args, **kwargs):
        torch_save(obj, path, *args, **kwargs)
        if Path(path).name == "optimizer.pt" and ".step-00000003." in str(path):
            signal.raise_signal(signal.SIGINT)   # a second Ctrl-C while step 3 is saved

    monkeypatch.setattr(torch, "save", save_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(run_spec, data_dir, out, interrupt=("evaluation", 3))
    monkeypatch.undo()
    earlier = out / "checkpoints" / "step-00000002"
    assert stderr_lines(capsys) == [
        f"training interrupted again while saving step 3: not saved (the earlier checkpoints "
        f"are intact); run the same command with --resume to continue from {earlier}"]
    assert sorted(os.listdir(out / "checkpoints")) == ["step-00000002"]   # no partial folder
    train(run_spec, data_dir, out, resume=True)
    assert_same_run(out, whole)


@pytest.mark.slow
def test_an_interrupt_while_the_final_model_is_saved_keeps_the_last_step(
        run_spec, data_dir, whole, tmp_path, capsys, monkeypatch):
    """Every step is done when save_final runs: a Ctrl-C there saves the last step, so a
    resume only saves the final model again (the periodic checkpoint is at step 6)."""
    from trainers.finetuning import checkpoints

    out, result_record = tmp_path / "run", checkpoints.result_record

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt        # model/ written, train_result.json not yet

    monkeypatch.setattr(checkpoints, "result_record", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        train(run_spec, data_dir, out)
    monkeypatch.setattr(checkpoints, "result_record", result_record)
    saved = out / "checkpoints" / "step-00000007"
    assert stderr_lines(capsys) == [f"training interrupted after step 7: checkpoint saved in "
                                    f"{saved}; run the same command with --resume to "
                                    f"continue from it"]
    assert not (out / "train_result.json").exists()
    assert train(run_spec, data_dir, out, resume=True) == out / "model"
    assert_same_run(out, whole)


def test_a_deletion_stopped_half_way_leaves_no_partial_checkpoint(tmp_path, monkeypatch):
    import shutil

    from trainers.finetuning.checkpoints import checkpoint_folders, remove_checkpoints

    for step in (1, 2, 3):
        folder = tmp_path / "checkpoints" / f"step-{step:08d}"
        folder.mkdir(parents=True)
        for name in ("trainable.pt", "optimizer.pt", "state.json"):
            (folder / name).write_text(name)
    rmtree = shutil.rmtree

    def stopped_rmtree(path, *args, **kwargs):
        if Path(path).exists():
            next(Path(path).iterdir()).unlink()       # one file deleted, then Ctrl-C
            raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", stopped_rmtree)
    with pytest.raises(KeyboardInterrupt):
        remove_checkpoints(tmp_path, checkpoint_folders(tmp_path)[:2])
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    assert [path.name for path in checkpoint_folders(tmp_path)] == ["step-00000003"]
    remove_checkpoints(tmp_path, [])                  # the next save deletes the leftovers
    assert os.listdir(tmp_path / "checkpoints") == ["step-00000003"]


def test_resuming_a_step_still_to_evaluate_drops_its_logged_evaluation(tmp_path):
    """A checkpoint saved while step 5 was evaluated, resumed, evaluated, then killed
    (SIGKILL) before the next checkpoint: resuming it again drops the later lines and step
    5's evaluation, which is done again (logged once)."""
    from tasks.plumbing.io import write_jsonl
    from trainers.finetuning.checkpoints import truncate_log
    from trainers.finetuning.training_run import TrainState

    log = tmp_path / "train_log.jsonl"
    lines = [{"step": 4, "loss": 1.0}, {"step": 4, "metric": -1.0}, {"step": 5, "loss": 0.9},
             {"step": 5, "metric": -0.9}, {"step": 6, "loss": 0.8}]
    write_jsonl(log, lines)
    truncate_log(log, TrainState(global_step=5, evaluation_due=True))
    assert read_jsonl(log) == lines[:3]
    write_jsonl(log, lines)
    truncate_log(log, TrainState(global_step=5))
    assert read_jsonl(log) == lines[:4]


# ---- a real SIGTERM to `sumbench train` --------------------------------------------------

#: `sumbench train` that pauses in the middle of step PAUSE + 1 (after the first of its two
#: micro-batches) and creates READY, so that the test's signal arrives there
CHILD = """
import pathlib, sys, time
import torch
torch.set_num_threads(1)
import trainers.finetuning.finetune as finetune
from benchmark.cli import main

ready, pause = pathlib.Path(sys.argv.pop(1)), int(sys.argv.pop(1))
micro_batch_loss, calls = finetune._micro_batch_loss, []

def paused(run, *args, **kwargs):
    if run.state.global_step == pause and len(calls) == 1:
        ready.write_text("paused")
        time.sleep(300)
    calls.extend([1] if run.state.global_step == pause else [])
    return micro_batch_loss(run, *args, **kwargs)

finetune._micro_batch_loss = paused
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_sigterm_to_sumbench_train_saves_the_last_step_and_resume_finishes_it(
        tiny_base, data_dir, tmp_path, capsys):
    args = ["train", "--profile", "tiny", "--model", tiny_base, "--tasks", "FAC", "--data",
            data_dir, "--set", "max_input_tokens=128", "--set", "max_output_tokens=48",
            "--max-steps", 7, "--set", "save_every_steps=2", "--early-stopping", "loss"]
    args = [str(arg) for arg in args]
    out, ready = tmp_path / "run", tmp_path / "paused"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(ready), "3", *args,
                              "--out", str(out)], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), child.communicate(timeout=60)[1][-3000:]
        child.send_signal(signal.SIGTERM)
        stderr = child.communicate(timeout=120)[1]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    saved = out / "checkpoints" / "step-00000003"
    assert child.returncode == 143, stderr[-3000:]
    assert saved_line(3, saved) in stderr.splitlines()
    assert "sumbench train: terminated (SIGTERM); finished work is kept" in stderr
    assert read_json(saved / "state.json")["global_step"] == 3

    code, _, err = sumbench(capsys, *args, "--out", out, "--resume")
    assert code == 0, err
    code, _, err = sumbench(capsys, *args, "--out", tmp_path / "whole")
    assert code == 0, err
    assert_same_run(out, tmp_path / "whole")
    config = read_json(out / "train_config.json")
    assert config["command"][1:] == [*args, "--out", str(out)]     # the first (child) run's
    assert [entry["step"] for entry in config["resumes"]] == [3]


def test_an_interrupt_after_the_loss_diverged_saves_nothing(tiny_base, data_dir, tmp_path,
                                                            capsys, monkeypatch):
    """Steps 1-2 log and save as usual; step 3's loss is NaN (not read: no logging step) and
    Ctrl-C arrives in step 4: the checkpoint of step 2 stays the newest, nothing NaN is
    written, and --resume is pointed at it."""
    from trainers.finetuning import finetune as module

    spec = get_profile("tiny", model=str(tiny_base), max_input_tokens=128,
                       max_output_tokens=48, max_steps=6, save_every_steps=2,
                       log_every_steps=2)
    loss_of = module._micro_batch_loss

    def diverging(run, indices, zero_weight):
        step = run.state.global_step + 1
        if step == 4:
            raise KeyboardInterrupt
        loss = loss_of(run, indices, zero_weight)
        return loss * float("nan") if step == 3 else loss

    monkeypatch.setattr(module, "_micro_batch_loss", diverging)
    with pytest.raises(KeyboardInterrupt):
        module.finetune(spec, ["FAC"], data_dir=data_dir, out_dir=tmp_path)
    checkpoints = sorted(path.name for path in (tmp_path / "checkpoints").iterdir())
    assert checkpoints == ["step-00000002"], checkpoints
    assert stderr_lines(capsys) == [
        f"training interrupted after step 3: the loss since the last read is nan, so the "
        f"weights are not saved (the earlier checkpoints are intact; lower the learning "
        f"rate); run the same command with --resume to continue from "
        f"{tmp_path / 'checkpoints' / 'step-00000002'}"]
    assert [entry["step"] for entry in read_jsonl(tmp_path / "train_log.jsonl")] == [2]
