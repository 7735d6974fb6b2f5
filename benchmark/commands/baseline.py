"""`sumbench baseline`: the non-neural baselines of trainers.inference.baselines as prediction
files.

    sumbench baseline --data DIR --tasks all --out DIR [--variant all] [--split test]

Writes OUT/predictions/<task>.jsonl (official prediction records, read by `sumbench score` and
accepted by a leaderboard like a model's), OUT/scores.json (the official scores, shaped as
`sumbench score --out` writes them: {task: scores} plus the run's provenance under
"_provenance"; `tasks.plumbing.provenance.scores_only` drops it) and OUT/baseline.json (what ran:
baselines, their settings fitted on the train split, the same provenance).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.commands import command_help
from benchmark.commands.options import add_option, given_or_default
from benchmark.results import format_table, results_table
from tasks import get_task, parse_task_list
from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import write_json, write_jsonl
from tasks.plumbing.provenance import PROVENANCE_KEY, provenance
from tasks.scoring import score_records
from tasks.usb.loaders import read_numbered_task_records, read_task_records
from trainers.inference.baselines import (
    BASELINES,
    FITTED_ON_TRAIN,
    baseline_records,
    baseline_settings,
)

BASELINE_FILE = "baseline.json"
SCORES_FILE = "scores.json"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "baseline", help=command_help("baseline"),
        description="Lead-k (ABS, TOPIC), Lead-1 (COMP), a position prior (EXT), lexical "
                    "overlap (EVEXT), a constant (FAC), copying the input (FIX) and no spans "
                    "(UNSUP) on a split; k and the prior come from the train split. Writes "
                    "OUT/predictions/<task>.jsonl, OUT/scores.json and OUT/baseline.json.")
    add_option(parser, "data")
    add_option(parser, "tasks", required=True)
    add_option(parser, "variant")
    add_option(parser, "split")
    add_option(parser, "out_dir", required=True)
    parser.set_defaults(handler=run)


def baseline_task_names(tasks: list[str]) -> list[str]:
    """Canonical USB task names of a task list (the baselines cover the USB tasks only)."""
    names = list(parse_task_list(tasks))
    outside = [name for name in names if name not in BASELINES]
    if outside:
        raise SumbenchError(f"no baseline for {', '.join(outside)} (baselines exist for: "
                            f"{', '.join(BASELINES)})")
    return names


def write_baselines(data_dir: str | None, names: list[str], out: Path, *,
                    variant: str = "all", split: str = "test") -> dict:
    """Write the baselines' prediction files and scores under `out` (all or nothing);
    returns {"scores": ..., "settings": ..., "predictions": {task: path}}."""
    records, locations, settings = {}, {}, {}
    for name in names:
        records[name], locations[name], settings[name] = task_baseline(
            name, data_dir, variant=variant, split=split)
    scores = score_records(records, locations=locations)
    config = {"data": data_dir, "tasks": names, "variant": variant, "split": split,
              "baselines": settings}
    out.parent.mkdir(parents=True, exist_ok=True)
    run = provenance(config)  # baselines draw no random numbers: no seeds
    with atomic_directory(out) as staging:
        for name, task_records in records.items():
            write_jsonl(staging / "predictions" / f"{name}.jsonl", task_records)
        write_json(staging / SCORES_FILE, {**scores, PROVENANCE_KEY: run})
        write_json(staging / BASELINE_FILE, {"config": config, "provenance": run})
    return {"scores": scores, "settings": settings,
            "predictions": {name: out / "predictions" / f"{name}.jsonl" for name in names}}


def task_baseline(name: str, data_dir: str | None, *, variant: str,
                  split: str) -> tuple[list[dict], list[tuple[str, int]], dict]:
    """One task's baseline prediction records on `split`, the (file, line) of the data
    record each comes from, and the baseline's settings (fitted on the train split)."""
    task = get_task(name)
    train = task.instances(read_task_records(name, "train", variant, data_dir))
    path, numbered = read_numbered_task_records(name, split, variant, data_dir)
    if not numbered:
        raise DataError(f"the {split} split of {name} holds no records: nothing to predict "
                        f"or score", path=str(path))
    instances, locations = [], []
    for line, record in numbered:
        for instance in task.instances([record]):
            instances.append(instance)
            locations.append((str(path), line))
    settings = {"baseline": BASELINES[name], **baseline_settings(train),
                "train_instances": len(train)}
    return baseline_records(task, instances, train_instances=train), locations, settings


def untrained_warnings(settings: dict) -> list[str]:
    """One line per baseline that needed a train split and found it empty (defaults used)."""
    return [f"warning: the train split of {name} holds no records; its {fitted['baseline']} "
            f"baseline uses {FITTED_ON_TRAIN[name]}" for name, fitted in settings.items()
            if name in FITTED_ON_TRAIN and fitted["train_instances"] == 0]


def run(args: argparse.Namespace) -> int:
    names = baseline_task_names(args.tasks)
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SumbenchError(f"{out} exists and is not an empty folder; choose another (--out)")
    written = write_baselines(args.data, names, out, variant=given_or_default(args, "variant"),
                              split=given_or_default(args, "split"))
    for warning in untrained_warnings(written["settings"]):
        print(warning, file=sys.stderr)
    print(format_table(results_table(written["scores"], names)))
    for name in names:
        print(written["predictions"][name])
    print(f"baselines: {out / BASELINE_FILE}", file=sys.stderr)
    return 0
