"""One module per `sumbench` subcommand, and the argument types they share."""
from __future__ import annotations

import argparse
import math

from tasks.plumbing.errors import SumbenchError
from trainers.finetuning.distributed import check_training_device_name
from trainers.inference.predict_spec import DEVICES, is_device_name


def _integer_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1, with a clear message otherwise."""
    return _integer_at_least(text, 1)


def tokens_or_auto(text: str) -> int | str:
    """An argparse type: "auto" or an integer >= 1."""
    return "auto" if text.strip().lower() == "auto" else _integer_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (e.g. zero shots), with a clear message otherwise."""
    return _integer_at_least(text, 0)


#: the most bootstrap resamples a command takes (each one re-aggregates every record;
#: published intervals use 1,000 to 10,000)
MAX_RESAMPLES = 1_000_000


def resample_count(text: str) -> int:
    """An argparse type: a number of bootstrap resamples, 0 (none) to MAX_RESAMPLES."""
    value = _integer_at_least(text, 0)
    if value > MAX_RESAMPLES:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_RESAMPLES:,}, got {value:,} (each resample re-aggregates "
            f"every record)")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: any finite number (no nan, inf)."""
    return _finite(text)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (learning rates, alphas, lease seconds)."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def probability(text: str) -> float:
    """An argparse type: a number in [0, 1] (thresholds, shares)."""
    value = _finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number in (0, 1] (fractions of data)."""
    value = _finite(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def device_name(text: str) -> str:
    """An argparse type: a prediction device (auto, cpu, cuda, cuda:N, mps, xpu), checked
    before any model loads."""
    if not is_device_name(text):
        raise argparse.ArgumentTypeError(f"must be {DEVICES}, got {text!r}")
    return text


def training_device_name(text: str) -> str:
    """An argparse type: a training device (auto, cpu, cuda, or cuda:N for one process)."""
    try:
        check_training_device_name(text)
    except SumbenchError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: `KEY=VALUE` (every `--set`), as (key, value); the key stripped, the
    value as given (its own parser reads it: a number, true/false, JSON)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


#: command -> (the module that registers it, its one-line help); `sumbench --help` and
#: benchmark.cli read this table without importing the modules
COMMANDS: dict[str, tuple[str, str]] = {
    "tasks": ("benchmark.commands.tasks",
              "list the registered tasks"),
    "data": ("benchmark.commands.data",
             "build or fetch the USB task datasets"),
    "score": ("benchmark.commands.score",
              "score prediction files (official USB metrics)"),
    "pyramid": ("benchmark.commands.pyramid",
                "Pyramid scores of every system of a Pyramid data folder"),
    "stus": ("benchmark.commands.stus",
             "Lite³Pyramid STUs (or the Lite²·⁵ mix) of references, from recorded semantic-role "
             "frames"),
    "srl-convert": ("benchmark.commands.stus",
                    "an AllenNLP SRL BERT archive as a transformers model folder (for sumbench "
                    "stus --srl-model)"),
    "qapyramid": ("benchmark.commands.qapyramid",
                  "human and automatic QAPyramid scores, agreement and nQAPyramid normalization"),
    "questeval": ("benchmark.commands.questeval",
                  "QuestEval scores of summaries against their sources and/or references "
                  "(protocols v0.2.4, v0.1.1, paper)"),
    "units": ("benchmark.commands.units",
              "the SCU-approximation study's units and their easiness against SCUs"),
    "meta-eval": ("benchmark.commands.meta_eval",
                  "system- and summary-level correlation of a metric with humans"),
    "train": ("benchmark.commands.train",
              "fine-tune a seq2seq model (full or LoRA) on USB tasks"),
    "predict": ("benchmark.commands.predict",
                "run a model on task data and write prediction files"),
    "run": ("benchmark.commands.run",
            "fine-tune or prompt a model on USB tasks, predict, score, write results"),
    "demo": ("benchmark.commands.demo",
             "run the whole pipeline offline on a synthetic corpus with a tiny model"),
    "baseline": ("benchmark.commands.baseline",
                 "non-neural baselines of the USB tasks as prediction files"),
    "leaderboard": ("benchmark.commands.leaderboard",
                    "host a leaderboard (init, token, serve, worker, export, rescore) or submit to "
                    "one (submit, status)"),
    "experiment": ("benchmark.commands.experiment",
                   "cross-domain transfer, data-size curves, heuristic vs human labels"),
    "export": ("benchmark.commands.lm_eval",
               "USB tasks for other harnesses (lm-eval), fine-tuned encoders for leaderboards"),
    "import": ("benchmark.commands.lm_eval",
               "predictions from other harnesses (lm-eval)"),
    "view": ("benchmark.commands.view",
             "look at one or two runs item by item (one offline HTML file)"),
}


def command_help(name: str) -> str:
    """The one-line help of a command (`COMMANDS`)."""
    return COMMANDS[name][1]
