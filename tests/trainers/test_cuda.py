"""On a CUDA GPU (skipped elsewhere, with the reason): predictions equal the CPU's, bf16
training resumes to the same weights bit for bit, and provenance names the GPU.

The rest of the suite also runs on a GPU when one is there (training picks it by itself), so
a run of the whole suite on a GPU machine checks resume, early stopping and interrupts there.
"""
from __future__ import annotations

import copy
import dataclasses
import math

import pytest

from tasks import get_task
from tasks.plumbing.io import read_json, read_jsonl

from helpers import assert_same_weights, model_weights


@pytest.fixture(scope="module")
def cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: GPU-only checks (run the suite on a GPU machine)")
    return torch.device("cuda")


def same_records(first: list[dict], second: list[dict], tolerance: float) -> bool:
    """Equal records, numbers (label probabilities) within `tolerance`."""
    def same(a, b) -> bool:
        if isinstance(a, float) or isinstance(b, float):
            return math.isclose(a, b, rel_tol=0.0, abs_tol=tolerance)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a == b
    return same(first, second)


def test_predictions_on_the_gpu_equal_the_cpus(cuda, tmp_path, fac_test_records,
                                               fac_tokenizer):
    from trainers.inference.label_probs import build_tiny_labeler
    from trainers.inference.predict import PredictSpec, run_task

    task = get_task("FAC")
    instances = task.instances(fac_test_records)
    model = build_tiny_labeler(fac_tokenizer, [task.format(i)[0].source for i in instances])
    outputs = {}
    for device in ("cpu", "cuda"):
        spec = PredictSpec(batch_size=4, max_new_tokens=4, device=device)
        run_task(task, instances, copy.deepcopy(model), fac_tokenizer, spec, tmp_path / device)
        outputs[device] = read_jsonl(tmp_path / device / "outputs" /
                                     "factuality_classification.jsonl")
    assert len(outputs["cpu"]) == len(instances)
    assert same_records(outputs["cuda"], outputs["cpu"], 1e-5)
    meta = read_json(tmp_path / "cuda" / "outputs" / "factuality_classification.meta.json")
    assert meta["provenance"]["torch_runtime"]["gpus"]          # the GPU it ran on is named


def test_bf16_training_on_the_gpu_resumes_to_the_same_weights(cuda, tiny_base, data_dir,
                                                              tmp_path):
    """precision auto is bf16 on a GPU that has it; with deterministic kernels (the default)
    a run stopped after 3 steps and resumed equals the uninterrupted run bit for bit."""
    import torch

    from trainers.finetuning.finetune import finetune
    from trainers.finetuning.profiles import get_profile

    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16")
    spec = dataclasses.replace(
        get_profile("tiny", model=str(tiny_base), max_input_tokens=128, max_output_tokens=48),
        precision="auto", max_steps=6, save_every_steps=None)
    whole = finetune(spec, ["FAC", "COMP"], data_dir=data_dir, out_dir=tmp_path / "whole")
    finetune(spec, ["FAC", "COMP"], data_dir=data_dir, out_dir=tmp_path / "parts",
             stop_after_steps=3)
    resumed = finetune(spec, ["FAC", "COMP"], data_dir=data_dir, out_dir=tmp_path / "parts",
                       resume=True)
    assert_same_weights(model_weights(whole), model_weights(resumed))
    config = read_json(tmp_path / "whole" / "train_config.json")
    assert config["config"]["precision"] == "bf16" and config["config"]["device"] == "cuda:0"
    assert config["torch_runtime"]["gpus"] == [torch.cuda.get_device_name(0)]
    assert [e["loss"] for e in read_jsonl(tmp_path / "whole" / "train_log.jsonl")] == \
        [e["loss"] for e in read_jsonl(tmp_path / "parts" / "train_log.jsonl")]
