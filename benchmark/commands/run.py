"""`sumbench run`: load -> (fine-tune) -> predict -> score -> DIR/results.json (benchmark.run).

Examples:
  sumbench run --model google/flan-t5-large --tasks all --mode finetune --out runs/ft \\
      --profile flan-t5-large --lora
  sumbench run --model meta-llama/Llama-2-7b-chat-hf --tasks FAC,EXT --mode fewshot \\
      --fewshot-backend hf-causal --style llama --out runs/llama
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from benchmark.commands import command_help, non_negative_int, positive_float
from benchmark.commands.config_file import RUN_CONFIG, effective_options
from benchmark.commands.options import add_option, given_or_default, training_device
from benchmark.encoder_run import check_run_spec, run_encoder_benchmark, specs_json
from benchmark.results import (
    MODES,
    RESULTS_FILE,
    TRAINING_MODES,
    RunSpec,
    format_decoding,
    format_table,
)
from benchmark.run import canonical_spec, run_benchmark
from tasks import parse_task_list
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.plugins import checked_source
from trainers.encoders.pipeline import is_encoder_profile
from trainers.encoders.spec import ENCODER_PROFILES
from trainers.finetuning.profiles import get_profile


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help=command_help("run"),
        description="Run a whole benchmark: derive data (--raw) or read it (--data), fine-tune "
                    "(finetune mode) or pick shots (fewshot mode), predict the split, score "
                    "it, and write DIR/results.json (scores, headline table, provenance) and "
                    "DIR/predictions/<task>.jsonl (readable by `sumbench score`). With "
                    "--resume, finished stages of the same run in DIR are skipped.")
    add_arguments(parser)
    parser.set_defaults(handler=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_run_arguments(parser.add_argument_group("what to run"))
    _add_training_arguments(parser.add_argument_group("fine-tuning (--mode finetune)"))
    _add_prediction_arguments(parser.add_argument_group("prediction"))
    _add_fewshot_arguments(parser.add_argument_group("few-shot (--mode fewshot)"))
    add_option(parser, "bootstrap")
    add_option(parser, "rouge_aggregate")


def _add_run_arguments(what) -> None:
    add_option(what, "model")
    add_option(what, "revision")
    what.add_argument("--config", metavar="FILE",
                      help="options from a YAML or JSON file (the command line's win); a "
                           "run's results.json repeats that run")
    add_option(what, "tasks")
    what.add_argument("--mode", choices=MODES, default="finetune")
    add_option(what, "variant")
    add_option(what, "split")
    add_option(what, "seed")
    add_option(what, "out_dir", required=True)
    data = what.add_mutually_exclusive_group()
    add_option(data, "data")
    add_option(data, "raw")
    add_option(what, "resume")
    add_option(what, "print_spec")


def _add_training_arguments(train) -> None:
    add_option(train, "profile")
    add_option(train, "lora")
    train.add_argument("--training", choices=TRAINING_MODES,
                       help="one model for all tasks (default), one per task (the only "
                            "training of encoder profiles, their default), or none "
                            "(evaluate --model as it is)")
    train.add_argument("--train-tasks", nargs="+", metavar="TASK",
                       help="multitask: train on these tasks (default: --tasks)")
    add_option(train, "early_stopping")
    add_option(train, "max_steps")
    add_option(train, "tokens_per_microbatch")
    add_option(train, "compile")
    train.add_argument("--learning-rate", type=positive_float)
    add_option(train, "set_spec")


def _add_prediction_arguments(predict) -> None:
    add_option(predict, "batch_size")
    add_option(predict, "max_input_tokens")
    add_option(predict, "max_new_tokens")
    add_option(predict, "num_beams")
    add_option(predict, "label_rule")
    add_option(predict, "device")


def _add_fewshot_arguments(shots) -> None:
    add_option(shots, "fewshot_backend")
    add_option(shots, "style")
    add_option(shots, "label_reading")
    add_option(shots, "n_shots")
    add_option(shots, "max_prompt_tokens")
    add_option(shots, "base_url")
    add_option(shots, "openai_api")
    add_option(shots, "max_concurrency")
    shots.add_argument("--top-logprobs", type=non_negative_int, default=5,
                       help="openai backend: token log-probabilities asked for, so Yes/No "
                            "answers give probabilities (default 5; 0: none)")


def local_or_id(value: str | None) -> str | None:
    """An existing local path made absolute (adapters record their base by path); else as is."""
    if value and Path(value).exists():
        return str(Path(value).resolve())
    return value


def _overrides(args: argparse.Namespace) -> dict:
    """The fine-tuning spec fields the options set (`--set`, then --max-steps,
    --tokens-per-microbatch, --compile and --learning-rate)."""
    values = dict(args.overrides)
    for name in ("max_steps", "tokens_per_microbatch", "compile"):
        if getattr(args, name, None) is not None:
            values[name] = getattr(args, name)
    if args.learning_rate is not None:
        values["learning_rate"] = args.learning_rate
    return values


#: RunSpec fields whose option has another name
OPTION_OF = {"data_dir": "data", "raw_dir": "raw", "train_overrides": "overrides"}


def build_run_spec(args: argparse.Namespace):
    """The RunSpec the options describe: every field from the option of its name (or
    `OPTION_OF`), left at the spec's default when not given; task lists canonical and
    relative local paths made absolute."""
    values = {spec_field.name: getattr(args, OPTION_OF.get(spec_field.name, spec_field.name),
                                       None) for spec_field in dataclasses.fields(RunSpec)}
    model = args.model
    profile = given_or_default(args, "profile")
    encoder = args.mode == "finetune" and is_encoder_profile(profile)
    if not model and encoder:
        model = ENCODER_PROFILES[profile]
    elif not model and args.mode == "finetune":
        model = get_profile(profile).model
    if not model:
        raise SumbenchError("--model is required (few-shot runs, and profiles without a model)")
    training = args.training or ("per-task" if encoder else "multitask")
    if args.mode == "finetune" and training != "none":
        training_device(args)  # before the run's folder is written
    values.update(model=local_or_id(model), tasks=parse_task_list(args.tasks),
                  training=training,
                  data_dir=local_or_id(args.data), raw_dir=local_or_id(args.raw),
                  train_tasks=parse_task_list(args.train_tasks) if args.train_tasks else None,
                  train_overrides=_overrides(args))
    return RunSpec(**{name: value for name, value in values.items() if value is not None})


def print_results(results: dict, out_dir: str | Path) -> None:
    print(format_table(results["table"]))
    if results.get("decoding"):
        print(format_decoding(results["decoding"]), file=sys.stderr)
    print(f"results: {Path(out_dir) / RESULTS_FILE}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if not args.tasks:
        raise SumbenchError("--tasks is required (on the command line or in --config)")
    spec = build_run_spec(args)
    if args.print_spec and spec.mode == "finetune" and is_encoder_profile(spec.profile):
        print(specs_json(check_run_spec(canonical_spec(spec))))
        return 0
    if args.print_spec:
        print(spec.to_json())
        return 0

    run = run_encoder_benchmark if spec.mode == "finetune" and \
        is_encoder_profile(spec.profile) else run_benchmark
    results = run(spec, args.out, resume=args.resume)
    record_run_config(args, args.out)
    print_results(results, args.out)
    return 0


def record_run_config(args: argparse.Namespace, out_dir: str | Path) -> None:
    """Write every option of this run into its results.json (`run_config`): `--config` of
    that file repeats the run."""
    parser = getattr(args, "parser", None) or _run_parser()
    path = Path(out_dir) / RESULTS_FILE
    results = read_json(path, what="results")
    options = effective_options(parser, args)
    options.update({key: local_or_id(options[key]) for key in ("model", "data", "raw")})
    options["out"] = None  # a repeat names its own folder
    if options.get("plugins"):  # as every folder finds them
        options["plugins"] = [checked_source(source) for source in options["plugins"]]
    write_json(path, {**results, RUN_CONFIG: options})


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sumbench run")
    add_arguments(parser)
    add_option(parser, "plugins")
    return parser
