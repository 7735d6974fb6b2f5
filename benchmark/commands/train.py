"""`sumbench train`: fine-tune a seq2seq model on one or several tasks (see
trainers.finetuning.finetune).

Runs unchanged on several processes: `torchrun --nproc_per_node N -m benchmark.commands.train
...` (or `accelerate launch -m benchmark.commands.train ...`).
"""
from __future__ import annotations

import argparse
import sys

from benchmark.cli import INTERRUPTED, TERMINATED, Terminated, sigterm_as_interrupt
from benchmark.commands import command_help, fraction
from benchmark.commands.options import add_option, add_options, given_or_default, training_device
from benchmark.encoder_run import train_command
from tasks import parse_task_list
from tasks.plumbing.errors import DataError, SumbenchError, json_type
from tasks.plumbing.io import read_json
from trainers.encoders.pipeline import check_profile_fits, is_encoder_profile
from trainers.finetuning.evaluation import early_stopping_fn
from trainers.finetuning.finetune import finetune
from trainers.finetuning.profiles import get_profile


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help=command_help("train"),
        description="Fine-tune on the train split of the given tasks and write OUT/model or "
                    "OUT/adapter, train_config.json (spec + provenance) and train_log.jsonl "
                    "(encoder profiles, e.g. roberta-large: one model per task, "
                    "OUT/<task>/best). "
                    "Values come from --profile, then --spec FILE, then the options, then "
                    "--set FIELD=VALUE.")
    add_arguments(parser)
    parser.set_defaults(handler=run_train)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "tasks", required=True)
    add_option(parser, "data")
    add_option(parser, "out_dir", required=True)
    add_options(parser, "profile", "spec", "model", "revision", "variant", "lora")
    parser.add_argument("--train-fraction", type=fraction, help="fraction of training documents")
    parser.add_argument("--mixing", choices=("proportional", "temperature"))
    add_options(parser, "seed", "max_steps", "tokens_per_microbatch", "compile", "set_spec",
                "early_stopping", "device", "resume", "print_spec")


def build_spec(args: argparse.Namespace):
    """The FinetuneSpec the options describe."""
    spec = get_profile(given_or_default(args, "profile"))
    if args.spec:
        spec = apply_spec_file(spec, args.spec)
    options = {"model": args.model, "revision": args.revision, "variant": args.variant,
               "lora": args.lora, "train_fraction": args.train_fraction,
               "mixing": args.mixing, "seed": args.seed, "max_steps": args.max_steps,
               "tokens_per_microbatch": args.tokens_per_microbatch, "compile": args.compile}
    spec = spec.override({key: value for key, value in options.items() if value is not None})
    return spec.override(dict(args.overrides))


def apply_spec_file(spec, path: str):
    """`spec` with the fields of the JSON object in `path`; a bad file or field is a
    DataError naming the file and the field."""
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
    values = read_json(path, what="spec file")
    if not isinstance(values, dict):
        raise DataError(f"expected a JSON object of spec fields, got {json_type(values)}",
                        path=path)
    return values


def run_train(args: argparse.Namespace) -> int:
    profile = given_or_default(args, "profile")
    if is_encoder_profile(profile):  # one RoBERTa per task: OUT/<task>/
        return train_command(args, profile)
    parse_task_list(args.tasks)  # a bad list or device fails before anything loads
    device = training_device(args)
    spec = build_spec(args)
    if args.print_spec:
        print(spec.to_json())
        return 0

    check_profile_fits(spec.model, profile, spec.revision)  # a RoBERTa folder: refused
    evaluate_fn = early_stopping_fn(args.early_stopping, spec, args.tasks, args.data)
    final = finetune(spec, args.tasks, data_dir=args.data, out_dir=args.out,
                     evaluate_fn=evaluate_fn, resume=args.resume,
                     device=device)
    if _is_main_process():
        print(final)
    return 0


def _is_main_process() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def main(argv: list[str] | None = None) -> int:
    """Entry point for `python -m benchmark.commands.train` (torchrun, accelerate launch):
    SIGTERM (which the launchers pass on) stops as Ctrl-C does, exiting 143 and 130."""
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
