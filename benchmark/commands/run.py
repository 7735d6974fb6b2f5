"""`sumbench run`: load -> (fine-tune) -> predict -> score -> DIR/results.json (benchmark.run).

Examples:
  sumbench run --model google/flan-t5-large --tasks all --mode finetune --out runs/ft \\
      --profile flan-t5-large --lora
  sumbench run --model meta-llama/Llama-2-7b-chat-hf --tasks FAC,EXT --mode fewshot \\
      --fewshot-backend hf-causal --style llama --out runs/llama
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.commands import (
    device_name,
    key_value,
    non_negative_int,
    positive_float,
    positive_int,
    resample_count,
)
from benchmark.results import (
    EARLY_STOPPING,
    FEWSHOT_BACKENDS,
    MODES,
    OPENAI_APIS,
    TRAINING_MODES,
)
from trainers.prompts import OFFICIAL_GPT35_STYLE, style_names


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help="fine-tune or prompt a model on USB tasks, predict, score, write results",
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
    parser.add_argument("--bootstrap", type=resample_count, default=0, metavar="N",
                        help="bootstrap resamples for 95%% intervals (default 0)")
    parser.add_argument("--rouge-aggregate", choices=("mean", "bootstrap-mid"), default="mean",
                        help="ROUGE over examples: plain mean (default) or the official "
                             "script's bootstrap median, seeded with --seed")


def _add_run_arguments(what) -> None:
    what.add_argument("--model", help="hub id or local folder (finetune default: the "
                                      "profile's model)")
    what.add_argument("--revision", help="hub revision (branch, tag or commit) of --model")
    what.add_argument("--config", metavar="FILE",
                      help="options from a YAML or JSON file (the command line's win); a "
                           "run's results.json repeats that run")
    what.add_argument("--tasks", metavar="T1,T2|all",
                      help="comma-separated task names or aliases, or 'all' (required)")
    what.add_argument("--mode", choices=MODES, default="finetune")
    what.add_argument("--variant", default="all", help="a USB domain or 'all' (default)")
    what.add_argument("--split", default="test", help="split to predict (default test)")
    what.add_argument("--seed", type=non_negative_int, default=0,
                      help="training and shot seed (default 0)")
    what.add_argument("--out", required=True, metavar="DIR", help="output folder")
    data = what.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="DIR", help="folder of <variant>/<task>/<split>.jsonl")
    data.add_argument("--raw", metavar="DIR", help="raw USB folder (annotations/, splits/), "
                                                   "derived into DIR/data")
    what.add_argument("--resume", action="store_true", help="continue the run in --out")
    what.add_argument("--print-spec", action="store_true",
                      help="print the run spec as JSON and exit")


def _add_training_arguments(train) -> None:
    train.add_argument("--profile", default="flan-t5-large",
                       help="hyperparameter profile (flan-t5-large, flan-t5-xl, tiny)")
    train.add_argument("--lora", action="store_true", help="train a LoRA adapter")
    train.add_argument("--training", choices=TRAINING_MODES, default="multitask",
                       help="one model for all tasks (default), one per task, or none "
                            "(evaluate --model as it is)")
    train.add_argument("--train-tasks", metavar="T1,T2",
                       help="multitask: train on these tasks (default: --tasks)")
    train.add_argument("--early-stopping", choices=EARLY_STOPPING, default="metric",
                       help="best-model selection on the validation split: headline metric "
                            "(default), minus the loss, or none")
    train.add_argument("--max-steps", type=positive_int, help="optimizer steps")
    train.add_argument("--learning-rate", type=positive_float)
    train.add_argument("--set", dest="overrides", action="append", default=[], type=key_value,
                       metavar="FIELD=VALUE", help="any fine-tuning spec field")


def _add_prediction_arguments(predict) -> None:
    predict.add_argument("--batch-size", type=positive_int, default=8,
                         help="prediction batch size (never changes results; default 8)")
    predict.add_argument("--max-input-tokens", type=positive_int,
                         help="input budget (default: the profile's)")
    predict.add_argument("--max-new-tokens", type=positive_int,
                         help="output budget (default: the profile's, at most 767; few-shot: "
                              "per task)")
    predict.add_argument("--num-beams", type=positive_int, default=4,
                         help="beams for text and span tasks (default 4, as the release; "
                              "labels are always greedy)")
    predict.add_argument("--label-rule", choices=("official", "positional"), default="official",
                         help="which generated steps give Yes/No probabilities (default: the "
                              "release's rule, every generated Yes/No token)")
    predict.add_argument("--device", default="auto", type=device_name,
                         help="where to train and predict: auto (default: the GPU when torch "
                              "sees one), cpu, cuda or cuda:N (few-shot runs also mps, xpu)")


def _add_fewshot_arguments(shots) -> None:
    shots.add_argument("--fewshot-backend", choices=FEWSHOT_BACKENDS)
    shots.add_argument("--style", choices=style_names() + [OFFICIAL_GPT35_STYLE],
                       help="prompt style (default: by backend)")
    shots.add_argument("--n-shots", type=non_negative_int,
                       help="shots per item, 0 for zero-shot (default: the paper's)")
    shots.add_argument("--max-prompt-tokens", type=positive_int,
                       help="prompt limit in tokens (default: none of its own; Hugging Face "
                            "models always keep prompt + output within their context)")
    shots.add_argument("--base-url", help="OpenAI-compatible server, e.g. vLLM's "
                       "http://host:8000/v1 (openai backend; default $OPENAI_BASE_URL)")
    shots.add_argument("--openai-api", choices=OPENAI_APIS, default="chat",
                       help="openai backend: chat completions (default) or completions")
    shots.add_argument("--max-concurrency", type=positive_int, default=1,
                       help="openai backend: requests at once (default 1)")
    shots.add_argument("--top-logprobs", type=non_negative_int, default=5,
                       help="openai backend: token log-probabilities asked for, so Yes/No "
                            "answers give probabilities (default 5; 0: none)")


def task_list(text: str) -> tuple[str, ...]:
    """Canonical task names for 'T1,T2' (names or aliases, any case) or 'all'."""
    from tasks import parse_task_list

    return parse_task_list([text])


def local_or_id(value: str | None) -> str | None:
    """An existing local path made absolute (adapters record their base by path); else as is."""
    if value and Path(value).exists():
        return str(Path(value).resolve())
    return value


def _overrides(args: argparse.Namespace) -> dict:

    values = dict(args.overrides)
    if args.max_steps is not None:
        values["max_steps"] = args.max_steps
    if args.learning_rate is not None:
        values["learning_rate"] = args.learning_rate
    return values


def build_run_spec(args: argparse.Namespace):
    """The RunSpec the options describe (relative local paths made absolute)."""
    from benchmark.results import RunSpec
    from tasks.errors import SumbenchError

    model = args.model
    if not model and args.mode == "finetune":
        from trainers.profiles import get_profile
        model = get_profile(args.profile).model
    if not model:
        raise SumbenchError("--model is required (few-shot runs, and profiles without a model)")
    if args.mode == "finetune" and args.training != "none":
        from trainers.distributed import check_training_device_name
        check_training_device_name(args.device)  # before the run's folder is written
    return RunSpec(
        model=local_or_id(model), tasks=task_list(args.tasks), mode=args.mode,
        variant=args.variant, split=args.split, seed=args.seed, revision=args.revision,
        data_dir=local_or_id(args.data), raw_dir=local_or_id(args.raw), profile=args.profile,
        lora=args.lora, training=args.training,
        train_tasks=task_list(args.train_tasks) if args.train_tasks else (),
        early_stopping=args.early_stopping, train_overrides=_overrides(args),
        batch_size=args.batch_size, max_input_tokens=args.max_input_tokens,
        max_new_tokens=args.max_new_tokens, num_beams=args.num_beams,
        label_rule=args.label_rule, device=args.device,
        fewshot_backend=args.fewshot_backend, style=args.style, n_shots=args.n_shots,
        max_prompt_tokens=args.max_prompt_tokens, base_url=args.base_url,
        openai_api=args.openai_api, max_concurrency=args.max_concurrency,
        top_logprobs=args.top_logprobs,
        bootstrap=args.bootstrap, rouge_aggregate=args.rouge_aggregate)


def print_results(results: dict, out_dir: str | Path) -> None:
    from benchmark.results import RESULTS_FILE, format_decoding, format_table

    print(format_table(results["table"]))
    if results.get("decoding"):
        print(format_decoding(results["decoding"]), file=sys.stderr)
    print(f"results: {Path(out_dir) / RESULTS_FILE}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from tasks.errors import SumbenchError

    if not args.tasks:
        raise SumbenchError("--tasks is required (on the command line or in --config)")
    spec = build_run_spec(args)
    if args.print_spec:
        print(spec.to_json())
        return 0
    from benchmark.run import run_benchmark

    results = run_benchmark(spec, args.out, resume=args.resume)
    record_run_config(args, args.out)
    print_results(results, args.out)
    return 0


def record_run_config(args: argparse.Namespace, out_dir: str | Path) -> None:
    """Write every option of this run into its results.json (`run_config`): `--config` of
    that file repeats the run."""
    from benchmark.commands.config_file import RUN_CONFIG, effective_options
    from benchmark.results import RESULTS_FILE
    from tasks.io import read_json, write_json

    parser = getattr(args, "parser", None) or _run_parser()
    path = Path(out_dir) / RESULTS_FILE
    results = read_json(path, what="results")
    options = effective_options(parser, args)
    options.update({key: local_or_id(options[key]) for key in ("model", "data", "raw")})
    options["out"] = None  # a repeat names its own folder
    write_json(path, {**results, RUN_CONFIG: options})


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sumbench run")
    add_arguments(parser)
    return parser
