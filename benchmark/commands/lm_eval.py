"""`sumbench export lm-eval` and `sumbench import lm-eval`: USB inside EleutherAI's
lm-evaluation-harness, and its samples back as sumbench predictions
(trainers.bridges.lm_eval_harness).

    sumbench export lm-eval --model M --out DIR [--data DIR] [--tasks all] [--variant all]
                            [--split test] [--style llama] [--n-shots K] [--seed S]
                            [--max-prompt-tokens N] [--max-new-tokens N]
    lm_eval --model hf --model_args pretrained=M,... --include_path DIR --tasks usb \\
            --log_samples --output_path OUT
    sumbench import lm-eval OUT/*/samples_*.jsonl --out DIR

Export plans the prompts `sumbench run --mode fewshot --fewshot-backend hf-causal` would send
to M (its tokenizer and config only) and writes them as lm-eval tasks whose scores are
sumbench's; what lm-eval cannot express (line tasks' windows) is not exported and is named.
Import writes DIR/predictions/<task>.jsonl (official records for `sumbench score` and
leaderboards) and DIR/import.json (sources, counts, provenance).
"""
from __future__ import annotations

import sys

from benchmark.commands import command_help, export_encoders
from benchmark.commands.options import add_option, given_or_default
from tasks import parse_task_list
from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.io import write_json, write_jsonl
from tasks.plumbing.provenance import provenance
from trainers.bridges.lm_eval_harness import export_tasks, records_from_samples


def register(subparsers) -> None:
    export = subparsers.add_parser("export", help=command_help("export"))
    export_targets = export.add_subparsers(dest="target", metavar="TARGET")
    export_targets.required = True
    task_folder = export_targets.add_parser(
        "lm-eval", help="an lm-evaluation-harness task folder (group usb)",
        description="Write an lm-eval task folder: the few-shot prompts sumbench plans for "
                    "--model, scored by sumbench's own parsers and metrics. Without --tasks: "
                    "every USB task; without --style: llama, as hf-causal runs.")
    add_option(task_folder, "model", required=True)
    add_option(task_folder, "revision")
    add_option(task_folder, "data")
    add_option(task_folder, "tasks")
    add_option(task_folder, "variant")
    add_option(task_folder, "split")
    add_option(task_folder, "style")
    add_option(task_folder, "n_shots")
    add_option(task_folder, "seed")
    add_option(task_folder, "max_prompt_tokens")
    add_option(task_folder, "max_new_tokens")
    add_option(task_folder, "out_dir", required=True)
    task_folder.set_defaults(handler=run_export)
    export_encoders.register(export_targets)

    imported = subparsers.add_parser("import", help=command_help("import"))
    import_targets = imported.add_subparsers(dest="source", metavar="SOURCE")
    import_targets.required = True
    samples = import_targets.add_parser(
        "lm-eval", help="lm-eval --log_samples files of exported USB tasks",
        description="Turn lm-eval's samples of tasks written by `sumbench export lm-eval` "
                    "into sumbench prediction files.")
    samples.add_argument("samples", nargs="+", metavar="SAMPLES",
                         help="samples_<task>_*.jsonl files")
    add_option(samples, "out_dir", required=True)
    samples.set_defaults(handler=run_import)


def run_export(args) -> int:
    summary = export_tasks(args.out, parse_task_list(args.tasks or ["all"]),
                           data_dir=args.data, model=args.model, revision=args.revision,
                           style=args.style or "llama", variant=given_or_default(args, "variant"),
                           split=given_or_default(args, "split"),
                           seed=given_or_default(args, "seed"),
                           n_shots=args.n_shots, max_prompt_tokens=args.max_prompt_tokens,
                           max_new_tokens=args.max_new_tokens)
    for why in summary["refused"].values():
        print(f"sumbench export: not exported: {why}", file=sys.stderr)
    print(f"sumbench export: {len(summary['exported'])} tasks in {args.out} (lm_eval "
          f"--model hf --model_args {summary['model_args']} --include_path {args.out} "
          f"--tasks usb)", file=sys.stderr)
    return 0


def run_import(args) -> int:
    from pathlib import Path

    records = records_from_samples(args.samples)
    counts = {name: len(rows) for name, rows in sorted(records.items())}
    config = {"source": "lm-eval", "samples": [str(Path(p).resolve()) for p in args.samples],
              "records": counts}
    with atomic_directory(args.out) as staging:
        for name, rows in records.items():
            write_jsonl(staging / "predictions" / f"{name}.jsonl", rows)
        write_json(staging / "import.json", {**config, "provenance": provenance(config)})
    print(f"sumbench import: {', '.join(f'{n} {c}' for n, c in counts.items())} records in "
          f"{args.out}/predictions", file=sys.stderr)
    return 0
