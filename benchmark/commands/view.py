"""`sumbench view RUN [RUN2] --out view.html`: one self-contained, offline HTML page to look
at one or two runs item by item (benchmark/viewer.py)."""
from __future__ import annotations

import json

from benchmark.commands import command_help
from benchmark.commands.options import add_option
from benchmark.viewer import write_view


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "view", help=command_help("view"),
        description="Write one self-contained HTML page (no network: it opens from file://) "
                    "showing each item of one or two run folders (their predictions/*.jsonl): "
                    "input, reference, predictions diffed against it and each other, per-item "
                    "values from the code of `sumbench score`; filters, search, sorting by "
                    "value or by the gap between the runs.")
    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="a run folder (of `sumbench run` or `predict`); two to compare")
    add_option(parser, "out_file", required=True)
    parser.set_defaults(handler=run, out_inputs={"runs": "run folder"})


def run(args) -> int:
    print(json.dumps(write_view(args.runs, args.out), indent=1))
    return 0
