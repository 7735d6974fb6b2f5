"""Training with micro-batch plans (issue item 4, on a CPU): the same examples give the same
loss and weights whatever the cut (fp32, dropout 0, within 1e-6); the steps and their
micro-batches are the plan's; `auto` on a CPU falls back to per_device_batch_size and says so;
a resumed run keeps the checkpoint's plan (no new probe), a run recorded before plans existed
resumes by count."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from tasks.plumbing.io import read_json, read_jsonl
from trainers.finetuning import data as train_data
from trainers.finetuning.micro_batches import MicroBatchPlan, cut_step
from trainers.finetuning.profiles import get_profile

from helpers import assert_same_weights, model_weights

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TASKS = ["FAC"]          # 14 training examples: steps of 8 and 6 examples, then 8 again


@pytest.fixture(scope="module")
def still_base(tiny_base, tmp_path_factory):
    """The tiny T5 with dropout 0 (so every cut computes the same thing)."""
    folder = tmp_path_factory.mktemp("still") / "base"
    shutil.copytree(tiny_base, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dropout_rate": 0.0}))
    return folder


@pytest.fixture(scope="module")
def spec(still_base):
    """AdamW at 1e-4: its update is about the learning rate whatever a gradient's size, so the
    rounding noise of a near-zero gradient moves a weight by a share of it (1e-3 moved the
    worst weight 5.6e-6 in three steps; 1e-4 keeps every one within 1e-6)."""
    return get_profile("tiny", model=str(still_base), max_input_tokens=128, max_output_tokens=48,
                       batch_size=8, per_device_batch_size=8, max_steps=3, log_every_steps=1,
                       learning_rate=1e-4)


@pytest.fixture(scope="module")
def runs(spec, data_dir, tmp_path_factory):
    """Uninterrupted runs: auto (on a CPU: 8 examples, one micro-batch a step), 1 example a
    micro-batch, and at most 200 padded tokens a micro-batch."""
    from trainers.finetuning.finetune import finetune

    root = tmp_path_factory.mktemp("cuts")
    arms = {"auto": {"tokens_per_microbatch": "auto"},
            "count-1": {"per_device_batch_size": "1"},
            "tokens-200": {"tokens_per_microbatch": "200"}}
    for name, change in arms.items():
        finetune(spec.override(change), TASKS, data_dir=data_dir, out_dir=root / name)
    return root


def log(folder, drop=("target_tokens_per_s", "tokens_per_s", "seconds_per_step")):
    return [{key: value for key, value in entry.items() if key not in drop}
            for entry in read_jsonl(folder / "train_log.jsonl")]


def test_every_cut_gives_the_same_loss_and_weights(runs):
    import torch

    weights = {name: model_weights(runs / name / "model") for name in
               ("auto", "count-1", "tokens-200")}
    for name in ("count-1", "tokens-200"):
        assert weights[name].keys() == weights["auto"].keys()
        worst = max(float((weights[name][key] - weights["auto"][key]).abs().max())
                    for key in weights["auto"])
        assert worst <= 1e-6, (name, worst)
        assert any(not torch.equal(weights[name][key], weights["auto"][key])
                   for key in weights["auto"])          # really another summation
        losses = [entry["loss"] for entry in log(runs / name)]
        assert losses == pytest.approx([e["loss"] for e in log(runs / "auto")], rel=1e-6)


def test_steps_and_micro_batches_are_the_plans(runs, spec, data_dir):
    """Three steps each run; a step's micro-batches are the plan's cut of the release's step
    (batch_size examples), logged with the plan's settings."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec.model)
    examples = train_data.spec_examples(spec, TASKS, "train", data_dir, tokenizer)
    steps = [step for epoch in (0, 1) for step in train_data.epoch_steps(
        np.arange(len(examples)), examples.source_lengths, examples.target_lengths, 8, 0, epoch,
        spec.megabatch_steps)][:3]
    assert [len(step) for step in steps] == [8, 6, 8] or sorted(map(len, steps[:2])) == [6, 8]
    for name, plan in (("auto", MicroBatchPlan(None, 8, False, "")),
                       ("count-1", MicroBatchPlan(None, 1, False, "")),
                       ("tokens-200", MicroBatchPlan(200, 8, False, ""))):
        expected = [sum(1 for piece in cut_step(step, plan, examples.source_lengths,
                                                examples.target_lengths, 8, 1) if len(piece))
                    for step in steps]
        lines = log(runs / name)
        assert [line["micro_batches"] for line in lines] == expected, name
        assert [line["step"] for line in lines] == [1, 2, 3]
        assert all(line["tokens_per_microbatch"] == plan.tokens_per_microbatch and
                   0 <= line["padding_fraction"] < 1 for line in lines)
        result = read_json(runs / name / "train_result.json")
        assert result["global_step"] == 3
        assert result["micro_batch_plan"]["tokens_per_microbatch"] == plan.tokens_per_microbatch
    assert log(runs / "tokens-200")[0]["micro_batches"] > 1


def test_auto_on_a_cpu_falls_back_and_the_run_records_it(runs):
    config = read_json(runs / "auto" / "train_config.json")["config"]
    plan = config["micro_batch_plan"]
    assert (plan["tokens_per_microbatch"], plan["per_device_batch_size"],
            plan["gradient_checkpointing"]) == (None, 8, False)
    assert plan["source"].startswith("auto needs a CUDA device to probe; on cpu")
    assert config["gradient_accumulation_steps"] == 1
    assert config["fast_path"]["optimizer"] == "AdamW (foreach)"
    assert config["fast_path"]["attention"]["implementation"] == "sdpa"
    attention = config["fast_path"]["attention"]
    kernels = {"flash_attention", "efficient_attention", "cudnn_attention", "math"}
    assert attention["self_attention"] in kernels and attention["cross_attention"] in kernels
    tokens = read_json(runs / "tokens-200" / "train_config.json")["config"]
    assert tokens["gradient_accumulation_steps"] is None
    assert tokens["micro_batch_plan"]["source"] == "configured"


def test_a_resume_keeps_the_checkpoints_plan_and_never_probes(runs, spec, data_dir, tmp_path,
                                                              monkeypatch):
    from trainers.finetuning import finetune as loop

    probed = MicroBatchPlan(200, 8, False, "probed (this test's stand-in)")
    monkeypatch.setattr(loop, "decide_plan", lambda *args, **kwargs: probed)
    auto = spec.override({"tokens_per_microbatch": "auto"})
    loop.finetune(auto, TASKS, data_dir=data_dir, out_dir=tmp_path, stop_after_steps=2)

    def no_probe(*args, **kwargs):
        raise AssertionError("a resumed run probed again")
    monkeypatch.setattr(loop, "decide_plan", no_probe)
    final = loop.finetune(auto, TASKS, data_dir=data_dir, out_dir=tmp_path, resume=True)
    assert_same_weights(model_weights(final), model_weights(runs / "tokens-200" / "model"))
    assert log(tmp_path) == log(runs / "tokens-200")
    recorded = read_json(tmp_path / "train_config.json")
    assert recorded["config"]["micro_batch_plan"] == probed.to_dict()
    assert recorded["resumes"][0]["provenance"]["config"]["micro_batch_plan"] == \
        probed.to_dict()


def test_a_run_recorded_before_plans_existed_resumes_by_count(runs, spec, data_dir, tmp_path):
    """Its spec has no tokens_per_microbatch and a boolean gradient_checkpointing, its
    checkpoint no plan: today's `auto` profile resumes it cut by its per_device_batch_size."""
    from trainers.finetuning.finetune import finetune

    old = spec.override({"per_device_batch_size": "1"})
    finetune(old, TASKS, data_dir=data_dir, out_dir=tmp_path, stop_after_steps=2)
    config_path = tmp_path / "train_config.json"
    recorded = json.loads(config_path.read_text())
    for key in ("tokens_per_microbatch", "compile"):
        del recorded["config"]["spec"][key]
    config_path.write_text(json.dumps(recorded))
    state_path = tmp_path / "checkpoints" / "step-00000002" / "state.json"
    state = json.loads(state_path.read_text())
    del state["micro_batch_plan"]
    state_path.write_text(json.dumps(state))
    today = dataclasses.replace(old, tokens_per_microbatch="auto", gradient_checkpointing="auto")
    final = finetune(today, TASKS, data_dir=data_dir, out_dir=tmp_path, resume=True)
    assert_same_weights(model_weights(final), model_weights(runs / "count-1" / "model"))
    resumed = read_json(tmp_path / "train_config.json")["resumes"][0]["provenance"]["config"]
    assert resumed["micro_batch_plan"] == {
        "tokens_per_microbatch": None, "per_device_batch_size": 1,
        "gradient_checkpointing": False,
        "source": "recorded before micro-batch plans (by count)"}


def test_a_diverged_loss_is_read_before_a_checkpoint_and_stops_the_run(spec, data_dir,
                                                                      tmp_path):
    """The loss is read from the device only at logging steps (every 10 here), checkpoints
    and evaluations: the blown-up step 3 (its loss is NaN) stops the run before its
    checkpoint is written."""
    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.finetune import finetune

    wild = dataclasses.replace(spec, learning_rate=1e30, max_steps=5, save_every_steps=3,
                               log_every_steps=10)
    with pytest.raises(SumbenchError, match=r"training diverged by step 3 \(steps 1-3\): the "
                                            r"loss is (nan|inf)"):
        finetune(wild, TASKS, data_dir=data_dir, out_dir=tmp_path)
    assert not (tmp_path / "checkpoints").exists() or \
        not list((tmp_path / "checkpoints").glob("step-*"))
    assert not (tmp_path / "train_log.jsonl").exists() or not log(tmp_path)


def test_the_memory_probe_runs_real_passes_and_leaves_no_trace(tiny_base, spec, data_dir):
    """The probe's forward and backward passes on the longest examples (here on a CPU, where
    everything fits): no weight, gradient or random state changes; `auto` then takes a whole
    step of longest examples as one micro-batch."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from trainers.finetuning.memory_probe import MemoryProbe, decide_plan, longest_tokens

    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_base).train()   # dropout 0.1
    examples = train_data.spec_examples(spec, TASKS, "train", data_dir,
                                        AutoTokenizer.from_pretrained(tiny_base))
    before = {name: value.clone() for name, value in model.state_dict().items()}
    random_state = torch.random.get_rng_state()
    probe = MemoryProbe(model, examples, torch.device("cpu"), bf16=False)
    longest = longest_tokens(examples)
    assert longest == int(examples.source_lengths.max() + examples.target_lengths.max())
    assert probe(3 * longest, False) and probe(longest, True)
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert all(parameter.grad is None for parameter in model.parameters())
    assert torch.equal(torch.random.get_rng_state(), random_state)
    auto = spec.override({"tokens_per_microbatch": "auto", "gradient_checkpointing": "auto"})
    plan = decide_plan(auto, model, examples, torch.device("cpu"), False, probe=probe)
    assert (plan.tokens_per_microbatch, plan.gradient_checkpointing) == (8 * longest, False)
    assert plan.source.startswith("probed: 8 longest examples")


@pytest.mark.parametrize("rank", [0, 1])
def test_only_process_0_probes_and_every_process_takes_its_plan(rank, tiny_base, monkeypatch):
    """Two processes (stand-ins for torchrun's): process 0 probes, process 1 never does and
    takes process 0's plan from the broadcast."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from trainers.finetuning import finetune as loop
    from trainers.finetuning.distributed import Distributed
    from trainers.finetuning.training_run import TrainState

    probed = MicroBatchPlan(200, 8, False, "probed on process 0 (this test's stand-in)")
    probes, sent = [], []
    monkeypatch.setattr(loop, "decide_plan", lambda *a, **k: probes.append(rank) or probed)

    class TwoProcesses(Distributed):
        def broadcast(self, value):
            sent.append(value)
            return probed.to_dict()         # what process 0 sent

    dist = TwoProcesses(rank=rank, world_size=2, device=torch.device("cpu"))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_base))
    state = TrainState()
    plan = loop._micro_batch_plan(get_profile("tiny", tokens_per_microbatch="auto"), model,
                                  None, dist, False, state, None, None)
    assert probes == ([0] if rank == 0 else [])
    assert sent == [probed.to_dict() if rank == 0 else None]
    assert plan == probed
    assert state.micro_batch_plan == plan.to_dict()
