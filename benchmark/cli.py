"""The `sumbench` command line. Each subcommand lives in benchmark/commands/<name>.py and
exposes `register(subparsers)`; heavy libraries are imported inside the handlers."""
from __future__ import annotations

import argparse
import importlib
import sys

from tasks.errors import SumbenchError

COMMAND_MODULES = (
    "benchmark.commands.tasks",
    "benchmark.commands.data",
    "benchmark.commands.score",
    "benchmark.commands.pyramid",
    "benchmark.commands.qapyramid",
    "benchmark.commands.meta_eval",
    "benchmark.commands.train",
    "benchmark.commands.predict",
    "benchmark.commands.run",
    "benchmark.commands.demo",
    "benchmark.commands.leaderboard",
    "benchmark.commands.experiment",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sumbench", description="Reproducible summarization benchmarking (USB, QAPyramid).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except SumbenchError as error:
        print(f"sumbench {args.command}: error: {error}", file=sys.stderr)
        return 2
