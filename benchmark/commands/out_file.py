"""The check every command that writes one `--out FILE` makes before any work: the name is a
file's (not empty, not a folder), and writing it cannot replace what the command reads.

A command declares its inputs with `parser.set_defaults(out_inputs={dest: what})`, `dest`
naming an argument (a path, a list of paths, or a value that may not be a path at all, such as
a metric name) and `what` saying what it is in the error. An existing --out that is one of the
input files, or lies inside an input folder (a data folder's files are inputs), is refused.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterator, Mapping

from tasks.errors import SumbenchError


def _given_paths(args: argparse.Namespace, inputs: Mapping[str, str]) -> Iterator[tuple]:
    """(what, path text) of every input argument given."""
    for dest, what in inputs.items():
        value = getattr(args, dest, None)
        for text in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(text, str) and text:
                yield what, text


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


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
    if not target.exists():
        return
    for what, text in _given_paths(args, inputs):
        source = Path(text)
        if source.is_dir() and _inside(target, source):
            raise SumbenchError(f"--out {out} is a file inside the {what} {text}: writing there "
                                f"would replace an input; give a path outside it")
        if source.is_file() and target.samefile(source):
            raise SumbenchError(f"--out {out} is the {what} {text}: writing there would "
                                f"replace it")
