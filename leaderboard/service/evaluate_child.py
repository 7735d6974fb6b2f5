"""The process that evaluates one submitted model (`python -m leaderboard.service.evaluate_child
REQUEST.json`), started by a worker's "evaluate" job under a wall-clock and a memory limit,
with no network and none of the worker's credentials in its environment.

It loads the worker's checked copy of the model (leaderboard.service.model_fetch) with
safetensors only and without the model's own code, and predicts every task of the board on
the board's public inputs with the code and defaults of `sumbench predict`
(trainers.inference.predict). It writes OUT/predictions/<task>.jsonl and OUT/evaluation.json (the
model's fingerprint, counts, the token budget it planned), or OUT/error.json with the reason
a participant should read and what it had spent by then, exiting 3 (the model cannot be
evaluated) or 4 (out of memory). It dies with its worker
(Linux: the parent-death signal, set by the worker as it starts the process).
"""
from __future__ import annotations

import sys
from pathlib import Path

from leaderboard.service.encoder_models import evaluate_encoders, is_encoder_evaluation
from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.provenance import cpu_model
from trainers.inference.generation import model_device
from trainers.inference.predict import (
    PredictSpec,
    format_windows,
    load_model,
    prepared_fingerprint,
    run_task,
)

EXIT_UNLOADABLE, EXIT_MEMORY = 3, 4


def evaluate(request: dict, progress: dict) -> dict:
    """Predict every task of the board; `progress` holds the device and each finished
    task's counts as they come (what a failed evaluation still reports of its cost)."""
    if is_encoder_evaluation(request["spec"]):
        return evaluate_encoders(request, progress, measured)
    out = Path(request["out"])
    model, tokenizer, info = load_model(request["model"], safetensors_only=True)
    spec = PredictSpec.from_dict(request["spec"])
    fingerprint = prepared_fingerprint(model, tokenizer, spec)
    progress["device"] = model_device(model)
    counts = progress.setdefault("counts", {})
    tasks = {name: get_task(name) for name in request["tasks"]}
    instances = board_instances(tasks, request["board"], request["inputs"])
    budget = request.get("max_generated_tokens") or spec.max_new_tokens * planned_generations(
        tasks, instances, tokenizer, spec)
    for name, task in tasks.items():
        result = run_task(task, instances[name], model, tokenizer, spec, out, resume=False,
                          model_print=fingerprint)
        counts[name] = {"instances": len(instances[name]), **result.counts}
        spent = sum(count.get("generated_tokens", 0) for count in counts.values())
        if spent > budget:
            raise SumbenchError(f"it generated {spent} tokens by the end of {name}, over "
                                f"this evaluation's budget of {budget}")
    return {"model_fingerprint": fingerprint, "counts": counts, "max_generated_tokens": budget,
            "measured": measured(progress["device"], counts)}


def board_instances(tasks: dict, board: str, inputs: str) -> dict:
    """{task name: the test instances of the board's public inputs (a `write_inputs` folder)}."""
    return {name: task.instances(task.load("test", board, str(inputs)))
            for name, task in tasks.items()}


def planned_generations(tasks: dict, instances: dict, tokenizer, spec: PredictSpec) -> int:
    """The model inputs an evaluation runs (each EVEXT claim and window, each EXT window, each
    FAC pair, ...), planned by the code `run_task` plans with (`format_windows`). With the
    model's own tokenizer (the evaluation process: its token budget, `max_new_tokens` each,
    what a model that never stops generates at most); without it (None: the worker, for the
    wall-clock limit), an input longer than a window counts once."""
    return sum(len(format_windows(task, instances[name], tokenizer, spec))
               for name, task in tasks.items())


def measured(device, counts: dict) -> dict:
    """What the process itself can tell of its cost: generated tokens, its peak resident
    memory, the GPU memory it held at most (None without a GPU) and the device's name."""
    import resource

    import torch

    gpu = device.type == "cuda"
    return {"generated_tokens": sum(c.get("generated_tokens", 0) for c in counts.values()),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_gpu_bytes": int(torch.cuda.max_memory_allocated(device)) if gpu else None,
            "device": torch.cuda.get_device_name(device) if gpu else f"cpu ({cpu_model()})"}


def reason_of(error: BaseException, scratch: str) -> str:
    """The first line of an error, the scratch folder's path left out."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
    return text.replace(scratch, "<model>")


def main(argv: list[str]) -> int:
    request = read_json(argv[0])
    out, progress = Path(request["out"]), {}

    def failed(reason: str, code: int) -> int:
        spent = measured(progress["device"], progress.get("counts", {})) \
            if "device" in progress else None  # the cost up to the failure
        write_json(out / "error.json", {"reason": reason, "measured": spent})
        return code

    try:
        write_json(out / "evaluation.json", evaluate(request, progress))
        return 0
    except MemoryError:
        return failed("the evaluation ran out of memory", EXIT_MEMORY)
    except RuntimeError as error:  # CUDA out of memory, kernels the model cannot run
        if "out of memory" in str(error).lower():
            return failed("the evaluation ran out of memory", EXIT_MEMORY)
        return failed("the model cannot be evaluated: " + reason_of(error, request["scratch"]),
                      EXIT_UNLOADABLE)
    except (SumbenchError, OSError, ValueError) as error:
        return failed("the model cannot be evaluated: " + reason_of(error, request["scratch"]),
                      EXIT_UNLOADABLE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
