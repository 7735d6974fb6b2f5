"""The benchmark harness alternates arms, judges outputs and names the machine; the presence
benchmark runs end to end on a few pairs (speed itself is never asserted here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.plumbing.provenance import cpu_model

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402


def test_arms_alternate_and_outputs_are_compared():
    calls = []

    def arm(name, value):
        return lambda: calls.append(name) or value

    result = harness.compare_arms(arm("ours", [1]), arm("base", [1]), repeat=3)
    assert calls == ["ours", "base", "base", "ours", "ours", "base"]
    assert result["identical"] is True and len(result["ours"]["runs"]) == 3
    assert result["ratio"] == result["baseline"]["median"] / result["ours"]["median"]

    drifting = iter([[1], [2]])
    changed = harness.compare_arms(lambda: next(drifting), arm("base", [1]), repeat=2)
    assert changed["identical"] is False  # an arm that changes its output between runs
    close = harness.compare_arms(arm("ours", 1.0), arm("base", 1.0 + 1e-9), repeat=1,
                                 same=lambda a, b: abs(a - b) < 1e-6)
    assert close["identical"] is True
    assert harness.compare_arms(arm("ours", 1.0), arm("base", 1.0 + 1e-9), repeat=1)[
        "identical"] is False


def test_reports_name_the_machine(capsys):
    result = harness.compare_arms(lambda: 1, lambda: 1, repeat=1)
    harness.report("probe", result, as_json=True, extra={"pairs": 3})
    line = json.loads(capsys.readouterr().out)
    host = line["machine"]
    assert host["cpu"] == cpu_model() and host["cpu"]
    assert host["cpus"] == harness.cpus() >= 1
    assert len(host["git"]["commit"]) == 40 and "numpy" in host["packages"]
    assert (line["benchmark"], line["pairs"], line["identical"]) == ("probe", 3, True)
    harness.report("probe", result, as_json=False)
    assert f"machine: {host['cpu']}, {host['cpus']} CPUs" in capsys.readouterr().out


@pytest.mark.parametrize("sample", ["pairs", "examples"])
@pytest.mark.slow
def test_presence_benchmark_runs_on_a_few_pairs(pyramid_data_dir, sample):
    completed = subprocess.run(
        [sys.executable, str(BENCH / "presence_speed.py"), "--data",
         str(pyramid_data_dir / "pyrxsum"), "--subset", "16", "--repeat", "1", "--sample",
         sample, "--threads", "1", "--json"],
        capture_output=True, text=True, timeout=300, check=True)
    line = json.loads(completed.stdout.strip().splitlines()[-1])
    assert line["identical"] is True and line["identical_one_pair"] is True
    assert line["sample"] == sample and line["machine"]["torch_threads"] == 1
    if sample == "examples":  # whole examples: every system's summary with each unit
        assert line["pairs"] > 2 * line["distinct_summaries"]
    else:
        assert line["pairs"] == line["distinct_summaries"] == 16


@pytest.mark.slow
def test_leaderboard_benchmark_alternates_its_scoring_arms():
    completed = subprocess.run(
        [sys.executable, str(BENCH / "leaderboard_load.py"), "--docs", "40", "--entries", "3",
         "--requests", "2", "--repeat", "2", "--burst", "3", "--json"],
        capture_output=True, text=True, timeout=300, check=True)
    line = json.loads(completed.stdout.strip().splitlines()[-1])
    assert line["identical"] is True and line["records"] > 0
    assert len(line["score"]["runs"]) == len(line["server"]["runs"]) == 2
    assert line["ratio"] == line["server"]["median"] / line["score"]["median"]
    assert set(line["latency"]) == {"/track/usb", "/api/v1/leaderboard/usb"}
    burst = line["keep_up"]
    assert (burst["submissions"], burst["listed"], burst["workers"]) == (3, 3, 2)
    assert 0 <= burst["p50_s"] <= burst["p95_s"] <= burst["max_s"]
    assert line["machine"]["cpus"] >= 1


@pytest.mark.usefixtures("usb_fixture_dir", "one_torch_thread")
@pytest.mark.parametrize("script, args", [
    ("classify_speed", ["--task", "EXT", "--records", "4", "--max-new-tokens", "40"]),
    ("generate_speed", ["--shape", "tiny", "--records", "4", "--num-beams", "2",
                        "--max-new-tokens", "8", "--batch-size", "4"]),
])
@pytest.mark.slow
def test_real_shape_benchmarks_run_at_the_tiny_shape(capsys, script, args):
    """The label benchmark on a windowed task (each window's values fitted to its lines) and
    the ABS generation benchmark: both arms agree, and the figures the page shows are there."""
    import importlib

    module = importlib.import_module(script)
    assert module.main([*args, "--repeat", "1", "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["identical"] is True and line["records"] >= 4
    if script == "classify_speed":
        assert line["task"] == "EXT" and line["lines"] > line["records"]
        assert line["labels_generated"] == line["lines"]   # a label per line, none padded
        assert line["ceiling_ratio"] > 0 and "positional_ratio" not in line
    else:
        assert line["texts_equal"] == line["records"]


@pytest.mark.slow
def test_the_gpu_checks_name_the_device_as_torch_does(monkeypatch):
    """gpu_suite names its device (and finds its peak) through torch.cuda.get_device_name."""
    import gpu_training
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"NVIDIA H100 ({device})")
    assert gpu_training.device_name("cuda:0") == "NVIDIA H100 (cuda:0)"
    assert gpu_training.peak_flops(gpu_training.device_name("cuda")) == 989.4e12
    assert gpu_training.device_name("cpu") == "cpu"


@pytest.mark.slow
def test_the_gpu_encoder_checks_run_small_on_a_cpu():
    """bench/gpu_encoders.py at the tiny shape: Table 10's FAC and EVEXT batches train (EVEXT
    in token-budget micro-batches), the four tasks' probabilities agree both ways, and the
    FLOP count of a pair is the standard one."""
    import argparse

    import gpu_encoders
    from encoder_speed import build_encoder

    args = argparse.Namespace(device="cpu", shape="tiny", seed=0, encoder_steps=1,
                              encoder_microbatch_tokens=4096, encoder_records=3,
                              encoder_predict_batch_size=2, encoder_repeat=1)
    rows = gpu_encoders.measure_encoders(args)
    fac, evext, inference = rows["FAC"], rows["EVEXT"], rows["inference"]
    assert (fac["pairs_per_step"], fac["micro_batches_per_step"], fac["steps"]) == (32, 1, 1)
    assert evext["pairs_per_step"] == 2048 and evext["micro_batches_per_step"] > 1
    assert len(fac["losses"]) == len(evext["losses"]) == 2 and fac["mfu"] is None
    assert inference["identical"] and set(inference["tasks"]) == {"FAC", "EVEXT", "UNSUP", "EXT"}
    config = build_encoder("tiny", 0).config  # hidden 32, 2 layers, intermediate 64
    assert gpu_encoders.pair_flops(config, 10) == 10 * 6 * 2 * (4 * 32 * 32 + 2 * 32 * 64) \
        + 12 * 2 * 32 * 100
