"""`sumbench tasks`: list every registered task (built-in or from an installed package)."""
from __future__ import annotations

import json

from benchmark.commands import command_help
from benchmark.commands.options import add_option
from tasks import get_task, task_names, task_source
from tasks.plumbing.registry import TASKS


def register(subparsers) -> None:
    parser = subparsers.add_parser("tasks", help=command_help("tasks"))
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_option(shape, "markdown")
    parser.set_defaults(handler=run)


def task_rows() -> list[dict]:
    rows = []
    for name in task_names():
        info = get_task(name).describe()
        info["aliases"] = TASKS.aliases_of(name)
        info["source"] = task_source(name)
        rows.append(info)
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The docs' task page: one row per task (name, aliases, suite, main metric, metrics,
    output, source package), then each task's description."""
    lines = ["# Tasks", "",
             "Every registered task, as `sumbench tasks --markdown` prints it (this page is "
             "generated; a test checks it is current). Aliases work wherever a task is "
             "named; `all` means every task of the usb suite. Tasks of installed packages "
             "appear here too ([Adding a task](adding-a-task.md)).", "",
             "| task | aliases | suite | main metric | metrics | output | source |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for info in rows:
        lines.append(f"| `{info['name']}` | {', '.join(a.upper() for a in info['aliases'])} | "
                     f"{info['suite']} | {info['main_metric']} | "
                     f"{', '.join(info['metrics'])} | {info['output_kind']} | "
                     f"{info['source']} |")
    lines.append("")
    lines += [f"- `{info['name']}`: {info['description']}" for info in rows]
    return "\n".join(lines) + "\n"


def run(args) -> int:
    rows = task_rows()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if args.markdown:
        print(markdown_table(rows), end="")
        return 0
    for info in rows:
        aliases = ",".join(a.upper() for a in info["aliases"])
        print(f"{info['name']} [{aliases}]  suite: {info['suite']}  "
              f"main metric: {info['main_metric']}  "
              f"splits: {'/'.join(info['splits'])}  source: {info['source']}")
        print(f"    {info['description']}")
    return 0
