"""Provenance recorded in every result file: command, config, seeds, versions, git commit,
platform, CPU and, when torch ran, its build and the GPUs it used."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

#: the top-level key under which a scores file ({task: scores}: `score --out`, the baseline's
#: scores.json) keeps its provenance (no task name starts with "_")
PROVENANCE_KEY = "_provenance"

TRACKED_PACKAGES = ("sumbench", "torch", "transformers", "datasets", "peft", "accelerate",
                    "evaluate", "scikit-learn", "seqeval", "rouge-score", "nltk", "numpy",
                    "scipy", "tokenizers", "pysbd")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(path: str | Path | None = None) -> dict[str, Any]:
    """The commit of the source tree sumbench runs from (or of the repository whose top
    folder is `path`), and whether it was dirty: changes to tracked files, or untracked files
    git does not ignore (a new module a run imports counts). Both are None unless the folder
    is the top of a git checkout: an installed copy inside another project's repository (a
    virtual environment in it) must not claim that project's commit."""
    root = (Path(path) if path else Path(__file__).resolve().parents[2]).resolve()

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                 text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()
    top = git("rev-parse", "--show-toplevel")
    commit = git("rev-parse", "HEAD") if top and Path(top).resolve() == root else None
    status = git("status", "--porcelain", "--untracked-files=normal") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def available_cpus() -> int:
    """The CPUs this process may use: its affinity where known, else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_settings() -> dict[str, Any]:
    """What parallel float kernels depend on: the CPUs this process may use, the thread
    variables of the environment and, when torch is loaded, its intra-op threads (the same
    seed can train to slightly different numbers with other thread counts)."""
    torch = sys.modules.get("torch")
    return {"cpus": available_cpus(),
            "torch_threads": torch.get_num_threads() if torch is not None else None,
            **{name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` says. Float
    kernels differ between CPUs, so the same seed can train to slightly different numbers."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torch_runtime() -> dict[str, Any] | None:
    """The torch build (its local version: `+cu130` or `+cpu`, which package metadata may
    lack), the CUDA it was built for and the GPUs this process has put memory on (cuDNN's
    version beside them); None when torch was never imported (scoring runs never import it).
    GPU kernels differ between GPU models and CUDA versions as CPU kernels do between CPUs.
    Nothing here initialises CUDA (a forked child could then no longer use it). Where a run
    trained, and whether with deterministic kernels, is in train_config.json."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    used = torch.cuda.is_initialized()
    return {"build": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if used else None,
            "gpus": [torch.cuda.get_device_name(index)
                     for index in range(torch.cuda.device_count())
                     if torch.cuda.max_memory_reserved(index) > 0] if used else []}


def provenance(config: dict | None = None, seeds: dict | None = None) -> dict[str, Any]:
    return {
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "config": config or {},
        "seeds": seeds or {},
        "git": git_commit(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "threads": thread_settings(),
        "torch_runtime": torch_runtime(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def scores_only(document: dict) -> dict:
    """A scores file's {task: scores}, without its provenance (PROVENANCE_KEY)."""
    return {key: value for key, value in document.items() if key != PROVENANCE_KEY}
