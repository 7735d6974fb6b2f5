"""The `sumbench train` command under `torchrun` with two CPU processes (gloo) trains the same
model as one process: same loss per step, same weights, same predictions in the same order."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks.plumbing.io import read_jsonl
from trainers.finetuning.profiles import get_profile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def setting(tmp_path_factory, data_dir):
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    texts = [" ".join(record["input_lines"]) for record in
             read_jsonl(data_dir / "all/factuality_classification/train.jsonl")]
    tokenizer = build_tiny_tokenizer(texts)
    base = tmp_path_factory.mktemp("dist-base").resolve()
    build_tiny_t5(tokenizer, save_dir=base)
    # FAC: 14 examples; batch 4 of micro-batches of 1 -> the last step holds 2 examples for
    # 4 micro-batch slots, so each process also runs an empty (zero-weight) micro-batch.
    spec = get_profile("tiny", model=str(base), max_steps=4, per_device_batch_size=1,
                       max_input_tokens=128, max_output_tokens=48)
    return spec, data_dir


def _greedy_predictions(model_dir, data_dir):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import tasks

    task = tasks.get_task("FAC")
    instances = task.instances(task.load("validation", "all", str(data_dir)))
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(model_dir)).eval()
    predictions = []
    for instance in instances:
        for model_input in task.format(instance, tokenizer, 128):
            batch = tokenizer(model_input.source, return_tensors="pt", truncation=True,
                              max_length=128)
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=4, do_sample=False, num_beams=1)
            text = tokenizer.decode(out[0], skip_special_tokens=True)
            predictions.append((instance["id"], instance["summ_idx"], text))
    return predictions


@pytest.mark.slow
def test_two_processes_train_like_one(setting, tmp_path):
    import torch
    from safetensors.torch import load_file

    spec, data_dir = setting
    train = ["-m", "benchmark.commands.train", "--profile", "tiny", "--model", spec.model,
             "--tasks", "FAC", "--data", str(data_dir), "--max-steps", "4",
             "--set", "per_device_batch_size=1", "--set", "max_input_tokens=128",
             "--set", "max_output_tokens=48", "--early-stopping", "none"]
    # gloo on CPUs, also on a machine with GPUs (where one process would otherwise train on
    # the GPU and two processes would need two GPUs)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    for name, command in (("one", train), ("two", [*launcher, *train])):
        done = subprocess.run([sys.executable, *command, "--out", str(tmp_path / name)],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        # one line, from rank 0 only
        assert done.stdout.strip().splitlines() == [str(tmp_path / name / "model")]
    single = tmp_path / "one" / "model"

    one_config = json.loads((tmp_path / "one" / "train_config.json").read_text())["config"]
    two_config = json.loads((tmp_path / "two" / "train_config.json").read_text())["config"]
    assert (one_config["world_size"], one_config["gradient_accumulation_steps"]) == (1, 4)
    assert (two_config["world_size"], two_config["gradient_accumulation_steps"]) == (2, 2)
    one_log, two_log = (read_jsonl(tmp_path / name / "train_log.jsonl") for name in ("one", "two"))
    assert [e["step"] for e in two_log] == [e["step"] for e in one_log] == [1, 2, 3, 4]
    for first, second in zip(one_log, two_log):
        assert second["loss"] == pytest.approx(first["loss"], rel=1e-5)
    one_weights = load_file(str(single / "model.safetensors"))
    two_weights = load_file(str(tmp_path / "two" / "model" / "model.safetensors"))
    assert one_weights.keys() == two_weights.keys()
    for name, value in one_weights.items():
        assert torch.allclose(value, two_weights[name], atol=1e-5, rtol=1e-4), name

    predicted_one = _greedy_predictions(single, data_dir)
    predicted_two = _greedy_predictions(tmp_path / "two" / "model", data_dir)
    assert len(predicted_one) == 18                       # the FAC validation split
    assert [p[:2] for p in predicted_two] == [p[:2] for p in predicted_one]
    assert predicted_two == predicted_one


def test_a_process_without_a_gpu_of_its_own_is_told_how_to_launch(monkeypatch):
    """torchrun with more processes per node than GPUs: a clear error, not CUDA's 'invalid
    device ordinal' from deep inside torch."""
    import torch

    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.distributed import init_distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SumbenchError, match=r"process 1 of this node has no GPU \(1 visible\).*"
                                            r"--nproc_per_node 1.*\(device cpu\)"):
        init_distributed()


def test_the_training_device_is_the_one_asked_for(monkeypatch):
    import torch

    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.distributed import training_device

    assert training_device("cpu") == torch.device("cpu")
    with pytest.raises(SumbenchError, match=r"auto, cpu, cuda or \(one process\) cuda:N; "
                                            r"got 'gpu'"):
        training_device("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert training_device("auto") == torch.device("cpu")
    with pytest.raises(SumbenchError, match="'cuda' was asked for but torch sees no CUDA GPU"):
        training_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert training_device("auto", local_rank=1, world_size=2) == torch.device("cuda", 1)
    assert training_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(SumbenchError, match=r"'cuda:2': torch sees 2 GPU\(s\)"):
        training_device("cuda:2")
    with pytest.raises(SumbenchError, match="got 'cuda:1'"):   # one GPU per process of a job
        training_device("cuda:1", local_rank=0, world_size=2)


def test_an_operation_without_a_deterministic_kernel_names_the_way_out():
    import torch

    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.distributed import deterministic_algorithms

    message = "kthvalue CUDA does not have a deterministic implementation"
    with pytest.raises(SumbenchError, match=r"(?s)kthvalue.*--set deterministic=false"):
        with deterministic_algorithms(True, torch.device("cpu")):
            assert torch.are_deterministic_algorithms_enabled()
            assert not torch.is_deterministic_algorithms_warn_only_enabled()
            raise RuntimeError(message)
    assert not torch.are_deterministic_algorithms_enabled()
    with pytest.raises(RuntimeError, match=message):  # off: the error is torch's own
        with deterministic_algorithms(False, torch.device("cpu")):
            raise RuntimeError(message)


def test_the_cublas_workspace_is_set_for_training_only_and_a_bad_one_is_named(monkeypatch):
    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.distributed import deterministic_algorithms

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with deterministic_algorithms(True, "cuda"):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    with deterministic_algorithms(True, "cpu"):
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")            # the user's own choice
    torch_message = ("Deterministic behavior was enabled with torch.use_deterministic_"
                     "algorithms(True), but this operation is not deterministic because it "
                     "uses CuBLAS; set CUBLAS_WORKSPACE_CONFIG=:4096:8 or :16:8")
    with pytest.raises(SumbenchError, match=r"(?s)sets CUBLAS_WORKSPACE_CONFIG to a value that "
                                            r"is not deterministic; unset it"):
        with deterministic_algorithms(True, "cuda"):
            assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":0:0"
            raise RuntimeError(torch_message)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":0:0"
