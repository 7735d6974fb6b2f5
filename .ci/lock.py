#!/usr/bin/env python3
"""Refresh constraints.txt, the lock of the tested package set, from a fresh resolve.

    python3 .ci/lock.py            # writes constraints.txt (about ten minutes: a new venv)
    python3 .ci/lock.py --out F    # writes F instead

A new virtual environment gets torch first (the version constraints.txt pins now, or
--torch), then `pip install -e ".[test]"` with nothing else pinned, so pip resolves what
PyPI serves today. Every package `pip freeze --all` then shows is written as NAME==VERSION,
except pip itself and sumbench. Run the whole suite with the new lock before committing it
(docs/testing.md).
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "constraints.txt"
NOT_LOCKED = {"pip", "sumbench"}  # the installer itself, and the project under test
HEADER = """\
# The lock of the tested package set: every package that `pip install -e ".[test]"` resolves,
# pinned, torch included (its CPU build is installed first: `pip install torch==VERSION`).
# The README's install and .ci/run use it, so every machine tests the same versions;
# pyproject.toml keeps ranges for installing sumbench into an environment of one's own.
# Made by `python3 .ci/lock.py` (a fresh resolve) on Python {python}, {machine}; do not edit by
# hand: docs/testing.md says how to refresh it and what to run before committing.
"""


def pinned_torch(lock: Path) -> str:
    """The torch version the current lock pins."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = re.fullmatch(r"torch==([^\s#]+)\s*(#.*)?", line.strip())
        if found:
            return found.group(1)
    raise SystemExit(f"{lock}: no torch==VERSION line; pass --torch VERSION")


def run(*command: str) -> str:
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, stdout=subprocess.PIPE).stdout


def fresh_freeze(torch_version: str, venv: Path) -> list[str]:
    """`pip freeze --all` of a new venv holding torch and sumbench[test], nothing else pinned."""
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    pip = (python, "-m", "pip", "--disable-pip-version-check")
    run(*pip, "install", "-q", f"torch=={torch_version}")
    torch_only = venv / "torch-only.txt"
    torch_only.write_text(f"torch=={torch_version}\n", encoding="utf-8")
    run(*pip, "install", "-q", "-c", str(torch_only), "-e", f"{ROOT}[test]")
    return run(*pip, "freeze", "--all", "--exclude-editable").splitlines()


def lock_lines(freeze: list[str]) -> list[str]:
    """NAME==VERSION for every frozen package but pip and sumbench, sorted by name; a local
    version label (torch's +cpu) is dropped, so the CPU and CUDA builds both satisfy it."""
    pins = {}
    for line in freeze:
        found = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s+]+)(\+\S+)?", line.strip())
        if not found:
            raise SystemExit(f"pip freeze: cannot lock the line {line!r}")
        name = re.sub(r"[-_.]+", "-", found.group(1)).lower()
        if name not in NOT_LOCKED:
            pins[name] = f"{name}=={found.group(2)}"
    return [pins[name] for name in sorted(pins)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=LOCK, help="where to write the lock")
    parser.add_argument("--torch", help="torch version (default: the one the lock pins now)")
    args = parser.parse_args(argv)
    torch_version = args.torch or pinned_torch(LOCK)
    with tempfile.TemporaryDirectory(prefix="sumbench-lock-") as scratch:
        lines = lock_lines(fresh_freeze(torch_version, Path(scratch) / "venv"))
    header = HEADER.format(python=platform.python_version(),
                           machine=f"{platform.system()} {platform.machine()}")
    args.out.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(lines)} packages locked")


if __name__ == "__main__":
    main()
