"""`sumbench export encoders`: fine-tuned encoder models (USB Table 2's RoBERTa-Large rows) as
one folder of plain files per task, the layout a leaderboard evaluates
(trainers.encoders.model_files):

    sumbench export encoders --model RUNS --out DIR [--tasks FAC EVEXT EXT UNSUP]

RUNS is what `sumbench train|run --profile roberta-large` wrote (or one model folder, or an
earlier export); DIR/<task>/ gets config.json, model.safetensors (encoder and head),
the tokenizer's files and sumbench_head.json. Without --tasks: every encoder task RUNS holds.
DIR must not exist; nothing is left of a failed export. `sumbench predict --profile
roberta-large --model DIR` predicts with it exactly as with RUNS.
"""
from __future__ import annotations

import sys
from pathlib import Path

from benchmark.commands.options import add_option
from tasks import parse_task_list
from tasks.plumbing.errors import SumbenchError
from trainers.encoders.model_files import HEAD_FILE, export_models
from trainers.encoders.pipeline import trained_folder
from trainers.encoders.spec import ENCODER_TASKS, encoder_task_name


def register(export_targets) -> None:
    parser = export_targets.add_parser(
        "encoders", help="fine-tuned encoder models as flat per-task folders (leaderboards)",
        description="Write each task's fine-tuned encoder model of --model as DIR/<task>/: "
                    "plain files only, the layout a leaderboard's 'evaluated here' loads.")
    add_option(parser, "model", required=True)
    add_option(parser, "tasks")
    add_option(parser, "out_dir", required=True)
    parser.set_defaults(handler=run_export_encoders)


def held_tasks(model: str) -> list[str]:
    """The encoder tasks a folder of runs or an export holds a fine-tuned model of (one model
    folder names no task: its head fits FAC and EVEXT alike)."""
    if (Path(model) / HEAD_FILE).is_file():
        raise SumbenchError(f"{model} is one encoder model: give --tasks to say which task it "
                            f"was fine-tuned for")
    found = []
    for task in ENCODER_TASKS:
        try:
            trained_folder(model, task)
        except SumbenchError:
            continue
        found.append(task)
    if not found:
        raise SumbenchError(f"{model} holds no fine-tuned encoder model (train one with "
                            f"`sumbench train --profile roberta-large`)")
    return found


def run_export_encoders(args) -> int:
    if args.tasks:
        tasks = [encoder_task_name(name) for name in parse_task_list(args.tasks)]
    else:
        tasks = held_tasks(args.model)
    folders = {task: trained_folder(args.model, task) for task in tasks}
    written = export_models(folders, Path(args.out))
    for task, folder in written.items():
        print(folder)
        print(f"sumbench export: {task} from {folders[task]}", file=sys.stderr)
    return 0
