"""The process that evaluates one submitted model (`python -m leaderboard.service.evaluate_child
REQUEST.json`), started by a worker's "evaluate" job under a wall-clock and a memory limit,
with no network and none of the worker's credentials in its environment.

It loads the worker's checked copy of the model (leaderboard.service.model_fetch) with
safetensors only and without the model's own code, and predicts every task of the board on
the board's public inputs with the code and defaults of `sumbench predict`
(trainers.inference.predict). It writes OUT/predictions/<task>.jsonl and OUT/evaluation.json (the
model's fingerprint, counts), or OUT/error.json with the reason a participant should read,
exiting 3 (the model cannot be evaluated) or 4 (out of memory). It dies with its worker
(Linux: the parent-death signal, set by the worker as it starts the process).
"""
from __future__ import annotations

import sys
from pathlib import Path

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.provenance import cpu_model
from trainers.inference.generation import model_device
from trainers.inference.predict import PredictSpec, load_model, prepared_fingerprint, run_task

EXIT_UNLOADABLE, EXIT_MEMORY = 3, 4


def evaluate(request: dict) -> dict:
    out = Path(request["out"])
    model, tokenizer, info = load_model(request["model"], safetensors_only=True)
    spec = PredictSpec.from_dict(request["spec"])
    fingerprint = prepared_fingerprint(model, tokenizer, spec)
    counts, budget = {}, request.get("max_generated_tokens")
    for name in request["tasks"]:
        task = get_task(name)
        instances = task.instances(task.load("test", request["board"], request["inputs"]))
        result = run_task(task, instances, model, tokenizer, spec, out, resume=False,
                          model_print=fingerprint)
        counts[name] = {"instances": len(instances), **result.counts}
        spent = sum(count.get("generated_tokens", 0) for count in counts.values())
        if budget is not None and spent > budget:
            raise SumbenchError(f"it generated {spent} tokens by the end of {name}, over "
                                f"this evaluation's budget of {budget}")
    return {"model_fingerprint": fingerprint, "counts": counts,
            "measured": measured(model_device(model), counts)}


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
    out = Path(request["out"])
    try:
        write_json(out / "evaluation.json", evaluate(request))
        return 0
    except MemoryError:
        write_json(out / "error.json", {"reason": "the evaluation ran out of memory"})
        return EXIT_MEMORY
    except RuntimeError as error:  # CUDA out of memory, kernels the model cannot run
        if "out of memory" in str(error).lower():
            write_json(out / "error.json", {"reason": "the evaluation ran out of memory"})
            return EXIT_MEMORY
        write_json(out / "error.json", {"reason": "the model cannot be evaluated: " +
                                        reason_of(error, request["scratch"])})
        return EXIT_UNLOADABLE
    except (SumbenchError, OSError, ValueError) as error:
        write_json(out / "error.json", {"reason": "the model cannot be evaluated: " +
                                        reason_of(error, request["scratch"])})
        return EXIT_UNLOADABLE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
