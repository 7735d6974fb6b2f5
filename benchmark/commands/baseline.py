"""`sumbench baseline`: the non-neural baselines of trainers.baselines as prediction files.

    sumbench baseline --data DIR --tasks all --out DIR [--variant all] [--split test]

Writes OUT/predictions/<task>.jsonl (official prediction records, read by `sumbench score` and
accepted by a leaderboard like a model's), OUT/scores.json (the official scores) and
OUT/baseline.json (what ran: baselines, their settings fitted on the train split, provenance).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

BASELINE_FILE = "baseline.json"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "baseline", help="non-neural baselines of the USB tasks as prediction files",
        description="Lead-k (ABS, TOPIC), Lead-1 (COMP), a position prior (EXT), lexical "
                    "overlap (EVEXT), a constant (FAC), copying the input (FIX) and no spans "
                    "(UNSUP) on a split; k and the prior come from the train split. Writes "
                    "OUT/predictions/<task>.jsonl, OUT/scores.json and OUT/baseline.json.")
    parser.add_argument("--data", "--data-dir", dest="data", metavar="DIR",
                        help="folder of <variant>/<task>/<split>.jsonl task datasets")
    parser.add_argument("--tasks", required=True, metavar="T1,T2|all",
                        help="comma-separated USB task names or aliases, or 'all'")
    parser.add_argument("--variant", default="all", help="a USB domain or 'all' (default)")
    parser.add_argument("--split", default="test", help="split to predict (default test)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.set_defaults(handler=run)


def baseline_task_names(tasks: str) -> list[str]:
    """USB task names from a comma list or 'all' (the baselines cover the USB tasks only)."""
    from tasks import get_task, task_names
    from tasks.errors import SumbenchError
    from trainers.baselines import BASELINES

    if tasks.strip() == "all":
        return list(task_names("usb"))
    names = [get_task(part.strip()).name for part in tasks.split(",") if part.strip()]
    outside = [name for name in names if name not in BASELINES]
    if outside or not names:
        raise SumbenchError(f"no baseline for {', '.join(outside) or 'an empty task list'} "
                            f"(baselines exist for: {', '.join(BASELINES)})")
    return list(dict.fromkeys(names))


def write_baselines(data_dir: str | None, names: list[str], out: Path, *,
                    variant: str = "all", split: str = "test") -> dict:
    """Write the baselines' prediction files and scores under `out` (all or nothing);
    returns {"scores": ..., "settings": ..., "predictions": {task: path}}."""
    from tasks import get_task
    from tasks.errors import DataError
    from tasks.io import atomic_directory, write_json, write_jsonl
    from tasks.provenance import provenance
    from tasks.scoring import score_records
    from tasks.usb.loaders import resolve_data_dir, task_split_path
    from trainers.baselines import BASELINES, baseline_records, baseline_settings

    records, settings = {}, {}
    for name in names:
        task = get_task(name)
        train = task.instances(list(task.load("train", variant=variant, data_dir=data_dir)))
        test = task.instances(list(task.load(split, variant=variant, data_dir=data_dir)))
        if not test:
            raise DataError(f"the {split} split of {name} holds no records: nothing to predict "
                            f"or score", path=str(task_split_path(
                                resolve_data_dir(data_dir), name, split, variant)))
        records[name] = baseline_records(task, test, train_instances=train)
        settings[name] = {"baseline": BASELINES[name], **baseline_settings(train)}
    scores = score_records(records)
    config = {"data": data_dir, "tasks": names, "variant": variant, "split": split,
              "baselines": settings}
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_directory(out) as staging:
        for name, task_records in records.items():
            write_jsonl(staging / "predictions" / f"{name}.jsonl", task_records)
        write_json(staging / "scores.json", scores)
        write_json(staging / BASELINE_FILE, {"config": config,
                                              "provenance": provenance(config)})
    return {"scores": scores, "settings": settings,
            "predictions": {name: out / "predictions" / f"{name}.jsonl" for name in names}}


def run(args: argparse.Namespace) -> int:
    from benchmark.results import format_table, results_table

    names = baseline_task_names(args.tasks)
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        from tasks.errors import SumbenchError
        raise SumbenchError(f"{out} exists and is not an empty folder; choose another (--out)")
    written = write_baselines(args.data, names, out, variant=args.variant, split=args.split)
    print(format_table(results_table(written["scores"], names)))
    for name in names:
        print(written["predictions"][name])
    print(f"baselines: {out / BASELINE_FILE}", file=sys.stderr)
    return 0
