"""The check every command that writes one `--out FILE` makes before any work: the name is a
file's (not empty, not a folder), and writing it cannot replace what the command reads.

A command declares its inputs with `parser.set_defaults(out_inputs={dest: what})`: `dest`
names an argument (a path, a list of paths, or a value that may be a name instead, such as a
metric or a hub id) and `what` says what it is in the error, ending in "file" or "folder".
An existing --out is refused when it is one of the input files, or a file inside an input
folder (a data folder's files are inputs) other than an earlier output of a sumbench
command written there (its provenance names the path after --out: a rerun).
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping
from pathlib import Path

from tasks.plumbing.errors import SumbenchError

#: the largest file read to tell whether it is an earlier sumbench output
OUTPUT_READ_LIMIT = 64 << 20


def _given_paths(args: argparse.Namespace, inputs: Mapping[str, str]) -> Iterator[tuple]:
    """(what, path) of every input argument given that is the kind of path it should be (a
    file for "... file", a folder for "... folder"); names that are no such path are not."""
    for dest, what in inputs.items():
        value = getattr(args, dest, None)
        for text in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(text, str) or not text:
                continue
            path = Path(text)
            if path.is_dir() if what.endswith("folder") else path.is_file():
                yield what, path


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def earlier_output(path: Path) -> bool:
    """Whether `path` is a JSON document a sumbench command wrote as its `--out` (its
    provenance names this path after --out): a rerun may replace it; a data folder's own
    files (`build_info.json` names the folder, not itself) may not."""
    try:
        if path.stat().st_size > OUTPUT_READ_LIMIT:
            return False
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    provenance = document.get("provenance", document.get("_provenance")) \
        if isinstance(document, dict) else None
    command = provenance.get("command") if isinstance(provenance, dict) else None
    if not isinstance(command, list):
        return False
    named = [value for option, value in zip(command, command[1:]) if option == "--out"]
    named += [item[len("--out="):] for item in command if str(item).startswith("--out=")]
    target = path.resolve()
    return any(isinstance(value, str) and Path(value).resolve() == target for value in named)


def check_out_file(args: argparse.Namespace) -> None:
    """Refuse the --out of a command with `out_inputs` before it does any work."""
    inputs = getattr(args, "out_inputs", None)
    out = getattr(args, "out", None)
    if inputs is None or out is None:
        return
    if not out.strip():
        raise SumbenchError("--out needs a file name")
    target = Path(out)
    if target.is_dir():
        raise SumbenchError(f"--out {out}: is a folder; give the output file's name")
    if not target.is_file():
        return
    for what, source in _given_paths(args, inputs):
        if source.is_file() and target.samefile(source):
            raise SumbenchError(f"--out {out} is the {what} {source}: writing there would "
                                f"replace it")
        if source.is_dir() and _inside(target, source) and not earlier_output(target):
            raise SumbenchError(f"--out {out} is a file inside the {what} {source}: writing "
                                f"there would replace an input; give a path outside it")
