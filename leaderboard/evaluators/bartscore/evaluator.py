"""BARTScore as registered evaluators (tasks.metrics.evaluators.Evaluator): `bartscore-r`,
`bartscore-p` and `bartscore-f`, for `sumbench meta-eval --metric bartscore-r
[--metric-option KEY=VALUE ...]`, a board column (`NAME=evaluator:bartscore-r[,KEY=VALUE]`)
and Python.

The directions are those of the official runner (neulab/BARTScore `SUM/score.py:293-308`):
recall `hypo_ref` = log P(reference | summary), precision `ref_hypo` = log P(summary |
reference), and F either `avg_f` = (P + R) / 2 (the default) or `harm_f` = P R / (P + R)
(`f=harm`; the runner's formula, without the harmonic mean's factor 2). With several
references, each direction is aggregated over a summary's references first (`refs=mean`, as
the runner and `multi_ref_score(agg="mean")`, or `refs=max`), then F is formed.

Options (OPTIONS): `model` (hub id or folder; default `facebook/bart-large-cnn`),
`max_length` (tokens kept of each text, 1024), `batch_size` (pairs per forward; the scores
do not depend on it), `device` (auto, cpu, cuda, ...), `refs` (mean|max) and, for
`bartscore-f`, `f` (avg|harm). The model is kept per process (tasks.plumbing.kept) with the
encoder states of recent sources (scoring.BartScorer).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from leaderboard.evaluators.bartscore.scoring import BartScorer
from tasks.metrics.evaluator_base import one_of, option_values, positive_int
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.plumbing.errors import SumbenchError, UnknownNameError
from tasks.plumbing.kept import kept_model
from trainers.inference.generation import resolve_device
from trainers.models.disk_cache import model_revision
from trainers.models.model_loading import load_seq2seq_safetensors

DEFAULT_MODEL = "facebook/bart-large-cnn"
#: where the computation comes from (recorded in every score's settings)
IMPLEMENTATION = "neulab/BARTScore bart_score.py BARTScorer.score (248f511)"
#: evaluator name -> direction
DIRECTIONS = {"bartscore-r": "recall", "bartscore-p": "precision", "bartscore-f": "f"}
DIRECTION_TEXT = {"recall": "hypo_ref: log P(reference | summary)",
                  "precision": "ref_hypo: log P(summary | reference)",
                  "f": "from hypo_ref (R) and ref_hypo (P)"}


#: option -> (parser of its text, default)
OPTIONS: dict[str, tuple[Callable[[str], Any], Any]] = {
    "model": (str, DEFAULT_MODEL), "max_length": (positive_int, 1024),
    "batch_size": (positive_int, 16), "device": (str, "auto"),
    "refs": (one_of("mean", "max"), "mean"), "f": (one_of("avg", "harm"), "avg"),
}


def option_names(direction: str) -> tuple[str, ...]:
    return tuple(name for name in OPTIONS if name != "f" or direction == "f")


def parse_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's value for evaluator `name`, `options` (text or parsed) over the
    defaults; an unknown option or a bad value is a one-line SumbenchError."""
    return option_values(options, OPTIONS, name, option_names(DIRECTIONS[name]))


def load_scorer(model: str, device: str, max_length: int) -> tuple[BartScorer, str]:
    """The scorer of `model` (safetensors only) on `device`, and the model's revision."""
    loaded, tokenizer = load_seq2seq_safetensors(model, "the BARTScore model")
    scorer = BartScorer(loaded, tokenizer, max_length=max_length, device=device)
    return scorer, model_revision(model, loaded)


def shared_scorer(model: str, device: str, max_length: int) -> tuple[BartScorer, str]:
    """`load_scorer`'s result, kept per process by model, device and length."""
    device = resolve_device(device)
    return kept_model("bartscore models", (model, device, max_length),
                      lambda: load_scorer(model, device, max_length))


def checked_references(summaries: Sequence[str], references: Sequence[Sequence[str]],
                       name: str) -> list[tuple[str, ...]]:
    """Each summary's references, every text a string; a one-line error otherwise."""
    if len(references) != len(summaries):
        raise SumbenchError(f"{name}: {len(references)} reference lists for "
                            f"{len(summaries)} summaries")
    lists = [(texts,) if isinstance(texts, str) else tuple(texts) for texts in references]
    for index, (summary, texts) in enumerate(zip(summaries, lists), start=1):
        if not isinstance(summary, str):
            raise SumbenchError(f"{name}: summary {index} is not text")
        if not texts:
            raise SumbenchError(f"{name}: summary {index} has no reference")
        bad = next((number for number, text in enumerate(texts, 1)
                    if not isinstance(text, str)), None)
        if bad is not None:
            raise SumbenchError(f"{name}: reference {bad} of summary {index} is not text")
    return lists


class BartScoreEvaluator(Evaluator):
    """BARTScore of each summary against its references (see the module)."""

    reads_sources = False
    reads_references = True
    model_options = ("model",)

    def __init__(self, name: str = "bartscore-r", options: Mapping[str, Any] | None = None,
                 scorer: BartScorer | None = None):
        if name not in DIRECTIONS:
            raise UnknownNameError(f"unknown BARTScore evaluator {name!r} (known: "
                                   f"{', '.join(DIRECTIONS)})")
        self.name, self.direction = name, DIRECTIONS[name]
        self.option_names = option_names(self.direction)
        self.values = parse_options(name, options or {})
        self.scorer, self.revision, self.last = scorer, None, None

    def with_options(self, options: Mapping[str, Any]) -> BartScoreEvaluator:
        return BartScoreEvaluator(self.name, {**self.values, **options})

    @property
    def settings(self) -> dict:
        values = self.values
        return {"evaluator": self.name, "implementation": IMPLEMENTATION,
                "direction": DIRECTION_TEXT[self.direction], "model": values["model"],
                "max_length": values["max_length"], "refs": values["refs"],
                **({"f": values["f"]} if self.direction == "f" else {}),
                **({"revision": self.revision} if self.revision else {})}

    def cost(self) -> dict | None:
        return None if self.last is None else dict(self.last)

    def score(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[float]:
        lists = checked_references(summaries, references, self.name)
        started = time.perf_counter()
        scorer = self.scorer
        if scorer is None:
            scorer, self.revision = shared_scorer(self.values["model"], self.values["device"],
                                                  self.values["max_length"])
        pairs = [(summary, reference) for summary, texts in zip(summaries, lists)
                 for reference in texts]
        wanted = {"recall": ("recall",), "precision": ("precision",),
                  "f": ("precision", "recall")}[self.direction]
        asked = [pair if side == "recall" else pair[::-1] for side in wanted for pair in pairs]
        values = iter(scorer.log_likelihoods(asked, self.values["batch_size"]))
        by_side = {side: aggregate([[next(values) for _ in texts] for texts in lists],
                                   self.values["refs"]) for side in wanted}
        self.last = {"seconds": round(time.perf_counter() - started, 3),
                     **scorer.take_counts()}
        if self.direction != "f":
            return by_side[self.direction]
        return [combined(p, r, self.values["f"])
                for p, r in zip(by_side["precision"], by_side["recall"])]


def aggregate(rows: Sequence[Sequence[float]], how: str) -> list[float]:
    """Each summary's value over its references: their mean or max."""
    return [max(row) if how == "max" else sum(row) / len(row) for row in rows]


def combined(precision: float, recall: float, how: str) -> float:
    """The runner's avg_f (P + R) / 2 or harm_f P R / (P + R)."""
    if how == "avg":
        return (precision + recall) / 2
    return precision * recall / (precision + recall)


def register() -> None:
    """Add `bartscore-r`, `bartscore-p` and `bartscore-f` (defaults: bart-large-cnn, 1024
    tokens, mean over references) to the evaluator registry, once per process."""
    for name in DIRECTIONS:
        if name not in EVALUATORS:
            register_evaluator(name, BartScoreEvaluator(name))
