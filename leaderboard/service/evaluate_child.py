"""The process that evaluates one submitted model (`python -m leaderboard.service.evaluate_child
REQUEST.json`), started by a worker's "evaluate" job with a wall-clock and a memory limit.

It fetches the model (a hub model: configuration, tokenizer and safetensors files only),
checks its files (leaderboard.service.model_source), loads it with safetensors only and
without its own code, and predicts every task of the board on the board's public inputs with
the code and defaults of `sumbench predict` (trainers.predict). It writes OUT/predictions/
<task>.jsonl and OUT/evaluation.json (the content digest, the model's fingerprint, counts),
or OUT/error.json with the reason a participant should read, exiting 3 (the model cannot be
loaded) or 4 (out of memory). It dies with its worker (Linux: the parent-death signal).
"""
from __future__ import annotations

import sys
from pathlib import Path

EXIT_UNLOADABLE, EXIT_MEMORY = 3, 4


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent (the worker) dies."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker's lease still covers it
        pass


def fetch(source: dict, model_root: str | None, max_bytes: int) -> tuple[Path, str, Path]:
    """(folder, content digest, root the folder's files must stay in) of a source."""
    from leaderboard.service.model_source import content_digest, model_files

    if source["kind"] == "folder":
        folder = Path(source["path"])
        root = Path(model_root) if model_root else folder
    else:
        from huggingface_hub import snapshot_download

        from leaderboard.service.model_source import HUB_PATTERNS

        folder = Path(snapshot_download(source["name"], revision=source.get("revision"),
                                        allow_patterns=HUB_PATTERNS))
        root = folder
    return folder, content_digest(folder, model_files(folder, root), max_bytes), root


def base_resolver(model_root: str | None, max_bytes: int):
    """Where an adapter's base model is loaded from: a folder under the model root, or the
    hub; checked like the adapter."""
    from leaderboard.service.model_source import is_inside, resolve_source
    from tasks.errors import DataError

    def resolve(name: str) -> str:
        if Path(name).is_absolute():
            root = Path(model_root).resolve() if model_root else None
            if root is None or not is_inside(Path(name).resolve(), root):
                raise DataError(f"the adapter's base model {name} is not under the model root")
            name = str(Path(name).resolve().relative_to(root))
        source = resolve_source(name, model_root)
        return str(fetch(source.to_dict(), model_root, max_bytes)[0])
    return resolve


def evaluate(request: dict) -> dict:
    from tasks import get_task
    from trainers.predict import PredictSpec, load_model, prepared_fingerprint, run_task

    out = Path(request["out"])
    folder, digest, _ = fetch(request["source"], request["model_root"],
                              request["max_model_bytes"])
    model, tokenizer, info = load_model(str(folder), safetensors_only=True,
                                        base_source=base_resolver(request["model_root"],
                                                                  request["max_model_bytes"]))
    spec = PredictSpec.from_dict(request["spec"])
    fingerprint = prepared_fingerprint(model, tokenizer, spec)
    counts = {}
    for name in request["tasks"]:
        task = get_task(name)
        instances = task.instances(task.load("test", request["board"], request["inputs"]))
        result = run_task(task, instances, model, tokenizer, spec, out, resume=False,
                          model_info=info, model_print=fingerprint)
        counts[name] = {"instances": len(instances), **result.counts}
    return {"digest": digest, "model_fingerprint": fingerprint, "counts": counts}


def main(argv: list[str]) -> int:
    from tasks.errors import SumbenchError
    from tasks.io import read_json, write_json

    die_with_parent()
    request = read_json(argv[0])
    out = Path(request["out"])
    try:
        write_json(out / "evaluation.json", evaluate(request))
        return 0
    except MemoryError:
        write_json(out / "error.json", {"reason": "ran out of memory"})
        return EXIT_MEMORY
    except (SumbenchError, OSError, ValueError) as error:
        reason = str(error).splitlines()[0][:500] if str(error) else type(error).__name__
        write_json(out / "error.json", {"reason": f"the model cannot be evaluated: {reason}"})
        return EXIT_UNLOADABLE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
