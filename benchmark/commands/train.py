"""`sumbench train`: fine-tune a seq2seq model on one or several tasks (see trainers.finetune).

Runs unchanged on several processes: `torchrun --nproc_per_node N -m benchmark.commands.train
...` (or `accelerate launch -m benchmark.commands.train ...`).
"""
from __future__ import annotations

import argparse
import sys

from benchmark.commands import (
    fraction,
    key_value,
    non_negative_int,
    positive_int,
    training_device_name,
)
from benchmark.results import EARLY_STOPPING


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="fine-tune a seq2seq model (full or LoRA) on USB tasks",
        description="Fine-tune on the train split of the given tasks and write OUT/model or "
                    "OUT/adapter, train_config.json (spec + provenance) and train_log.jsonl. "
                    "Values come from --profile, then --spec FILE, then the options, then "
                    "--set FIELD=VALUE.")
    add_arguments(parser)
    parser.set_defaults(handler=run_train)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", nargs="+", required=True, metavar="TASK",
                        help="task names or aliases (FAC EXT ...), or 'all'")
    parser.add_argument("--data", "--data-dir", dest="data", metavar="DIR",
                        help="folder of <variant>/<task>/<split>.jsonl task datasets")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--profile", default="flan-t5-large",
                        help="hyperparameter profile (flan-t5-large, flan-t5-xl, tiny)")
    parser.add_argument("--spec", metavar="FILE", help="JSON file of spec fields to apply")
    parser.add_argument("--model", help="hub id or local folder (overrides the profile)")
    parser.add_argument("--revision", help="hub revision of --model")
    parser.add_argument("--variant", help="data variant: a domain or 'all'")
    parser.add_argument("--lora", action=argparse.BooleanOptionalAction, default=None,
                        help="train a LoRA adapter instead of all weights")
    parser.add_argument("--train-fraction", type=fraction, help="fraction of training documents")
    parser.add_argument("--mixing", choices=("proportional", "temperature"))
    parser.add_argument("--seed", type=non_negative_int)
    parser.add_argument("--max-steps", type=positive_int)
    parser.add_argument("--set", dest="overrides", action="append", default=[], type=key_value,
                        metavar="FIELD=VALUE", help="any spec field, e.g. --set lora_r=8")
    parser.add_argument("--early-stopping", choices=EARLY_STOPPING, default="metric",
                        help="validation signal for early stopping and best-model selection: "
                             "the tasks' headline metric (default), minus the loss, or none")
    parser.add_argument("--device", default="auto", type=training_device_name,
                        help="auto (default: this process's GPU when torch sees GPUs), cpu, "
                             "cuda or, for one process, cuda:N")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last checkpoint in --out")
    parser.add_argument("--print-spec", action="store_true",
                        help="print the resolved spec as JSON and exit")


def build_spec(args: argparse.Namespace):
    """The FinetuneSpec the options describe."""
    from trainers.profiles import get_profile

    spec = get_profile(args.profile)
    if args.spec:
        spec = apply_spec_file(spec, args.spec)
    options = {"model": args.model, "revision": args.revision, "variant": args.variant,
               "lora": args.lora, "train_fraction": args.train_fraction,
               "mixing": args.mixing, "seed": args.seed, "max_steps": args.max_steps}
    spec = spec.override({key: value for key, value in options.items() if value is not None})
    return spec.override(dict(args.overrides))


def apply_spec_file(spec, path: str):
    """`spec` with the fields of the JSON object in `path`; a bad file or field is a
    DataError naming the file and the field."""
    from tasks.errors import DataError, SumbenchError

    values = read_spec_file(path)
    for name, value in values.items():
        try:
            spec.override({name: value})
        except (SumbenchError, TypeError, ValueError) as error:
            raise DataError(str(error), path=path, field=name) from None
    try:
        return spec.override(values)
    except (SumbenchError, TypeError, ValueError) as error:
        raise DataError(str(error), path=path) from None


def read_spec_file(path: str) -> dict:
    """The JSON object of a --spec FILE (errors name the file)."""
    from tasks.errors import DataError, json_type
    from tasks.io import read_json

    values = read_json(path, what="spec file")
    if not isinstance(values, dict):
        raise DataError(f"expected a JSON object of spec fields, got {json_type(values)}",
                        path=path)
    return values


def run_train(args: argparse.Namespace) -> int:
    from tasks import parse_task_list

    parse_task_list(args.tasks)  # a bad list fails before anything loads
    spec = build_spec(args)
    if args.print_spec:
        print(spec.to_json())
        return 0
    from trainers.evaluation import early_stopping_fn
    from trainers.finetune import finetune

    evaluate_fn = early_stopping_fn(args.early_stopping, spec, args.tasks, args.data)
    final = finetune(spec, args.tasks, data_dir=args.data, out_dir=args.out,
                     evaluate_fn=evaluate_fn, resume=args.resume, device=args.device)
    if _is_main_process():
        print(final)
    return 0


def _is_main_process() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m benchmark.commands.train` (torchrun, accelerate launch):
    SIGTERM (which the launchers pass on) stops as Ctrl-C does, exiting 143 and 130."""
    from benchmark.cli import INTERRUPTED, TERMINATED, Terminated, sigterm_as_interrupt
    from tasks.errors import SumbenchError

    parser = argparse.ArgumentParser(prog="sumbench train")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():
            return run_train(args)
    except SumbenchError as error:
        print(f"sumbench train: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        return TERMINATED if isinstance(stop, Terminated) else INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
