"""AutoACU's metrics as registered evaluators (tasks.metrics.evaluators.Evaluator):

    sumbench meta-eval --pyramid DIR --metric a2cu-r --metric-option generator=DIR
        --metric-option classifier=DIR --metric-option device=cpu

or a board column `NAME=evaluator:a2cu-r,generator=DIR,classifier=DIR`.

- `a2cu-r`, `a2cu-p`, `a2cu-f`: A2CU's recall, precision and F1 (a2cu.py). Options:
  `generator`, `generator_tokenizer`, `classifier`, `classifier_tokenizer` (hub ids or
  folders; defaults the official ones), `variant` (`pypi`: autoacu 0.1.0, the default;
  `head`: GitHub HEAD's de-duplicated units without `min_length`), `batch_size` (classifier
  pairs per batch, 32), `generation_batch_size` (texts per beam search, 1 as the official
  code), `device` (auto, cpu, cuda, ...).
- `a3cu-r`, `a3cu-p`, `a3cu-f` (`a3cu` is `a3cu-r`): A3CU's raw outputs and their F1
  (a3cu.py). Options: `model`, `batch_size` (16), `device`.
- `semiautoacu`: A2CU's classifier over human units, `units=FILE` (required; one line or
  record of units per summary, in the summaries' order, as `pyramid --units` reads) with the
  classifier options above. It reads no references.

The official code takes one reference per summary; with several, each value is the best over
the summary's references (F1 is computed per reference, then the best taken). The models, and
the units and verdicts they produced, are kept per process (tasks.plumbing.kept), so meta-eval
generates each reference's units once for every system, and `a2cu-r` then `a2cu-f` reuse
them."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.evaluators.acu import models
from leaderboard.evaluators.acu.a2cu import (
    A2CU,
    VARIANTS,
    UnitMatcher,
    UnitWriter,
    f1,
    unit_recall,
)
from leaderboard.evaluators.acu.a3cu import A3CU, float32_f1
from tasks.metrics.evaluator_base import positive_int
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.plumbing.errors import SumbenchError, check_choice, check_choices
from tasks.plumbing.io import file_sha256
from tasks.plumbing.kept import kept_model
from tasks.units.unit_files import read_example_units

SIDES = {"r": "recall", "p": "precision", "f": "f1"}


def _variant(text: Any) -> str:
    return check_choice(str(text).strip(), VARIANTS, "A2CU variant")


CLASSIFIER_OPTIONS = {"classifier": (str, models.CLASSIFIER),
                      "classifier_tokenizer": (str, models.CLASSIFIER_TOKENIZER),
                      "batch_size": (positive_int, 32), "device": (str, "auto")}
#: option -> (parser of its text, default), per evaluator family
OPTIONS = {
    "a2cu": {"generator": (str, models.GENERATOR),
             "generator_tokenizer": (str, models.GENERATOR_TOKENIZER),
             **CLASSIFIER_OPTIONS, "generation_batch_size": (positive_int, 1),
             "variant": (_variant, "pypi")},
    "a3cu": {"model": (str, models.A3CU_MODEL), "batch_size": (positive_int, 16),
             "device": (str, "auto")},
    "semiautoacu": {"units": (str, None), **CLASSIFIER_OPTIONS},
}
MODEL_OPTIONS = ("generator", "generator_tokenizer", "classifier", "classifier_tokenizer",
                 "model")


def parse_options(family: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of `family`, `options` (text or parsed values) over the defaults."""
    table = OPTIONS[family]
    check_choices(sorted(options), table, f"{family} option")
    values = {name: default for name, (_, default) in table.items()}
    for name, value in options.items():
        try:
            values[name] = table[name][0](value) if value is not None else None
        except ValueError as error:
            raise SumbenchError(f"{family} option {name}={value!r}: {error}") from None
    return values


def writer_of(values: Mapping[str, Any]) -> UnitWriter:
    """The A2CU unit writer of these options, kept per process with the units it wrote."""
    names = (values["generator"], values["generator_tokenizer"], values["device"])
    key = (*names, values["variant"], values["generation_batch_size"])

    def build() -> UnitWriter:
        model, tokenizer = kept_model("a2cu generator", names,
                                      lambda: models.load_generator(*names))
        return UnitWriter(model, tokenizer, VARIANTS[values["variant"]],
                          values["generation_batch_size"])
    return kept_model("a2cu units", key, build)


def matcher_of(values: Mapping[str, Any]) -> UnitMatcher:
    """A2CU's unit matcher of these options, kept per process with its verdicts."""
    names = (values["classifier"], values["classifier_tokenizer"], values["device"])

    def build() -> UnitMatcher:
        model, tokenizer = kept_model("a2cu classifier", names,
                                      lambda: models.load_classifier(*names))
        return UnitMatcher(model, tokenizer, values["batch_size"])
    return kept_model("a2cu matches", (*names, values["batch_size"]), build)


def best_per_summary(count: int, references: Sequence[Sequence[str]], summaries: Sequence[str],
                     pair_values: Callable[[list[str], list[str]], list[float]]) -> list[float]:
    """Each summary's best value over its references, `pair_values(summaries, references)`
    scoring (summary, reference) pairs."""
    owners = [index for index in range(count) for _ in references[index]]
    values = pair_values([summaries[index] for index in owners],
                         [text for index in range(count) for text in references[index]])
    best = [float("-inf")] * count
    for index, value in zip(owners, values):
        best[index] = max(best[index], value)
    return best


class OptionsEvaluator(Evaluator):
    """An evaluator of one family of OPTIONS (the values parsed once)."""

    family = ""

    def __init__(self, name: str, side: str = "r", options: Mapping[str, Any] | None = None):
        self.name, self.side = name, check_choice(side, SIDES, "side")
        self.values = parse_options(self.family, dict(options or {}))
        self.option_names = tuple(OPTIONS[self.family])
        self.model_options = tuple(n for n in MODEL_OPTIONS if n in self.option_names)

    def with_options(self, options: Mapping[str, Any]) -> Evaluator:
        return type(self)(self.name, self.side, {**self.values, **options})

    @property
    def settings(self) -> dict:
        return {"evaluator": self.name, "implementation": "autoacu==0.1.0", **self.values}


class A2CUEvaluator(OptionsEvaluator):
    """A2CU's recall, precision or F1 (`side`: r, p, f) of each summary."""

    family = "a2cu"

    @property
    def settings(self) -> dict:
        return {**super().settings, "value": SIDES[self.side],
                "references": "best over references"}

    def score(self, summaries, references, sources) -> list[float]:
        scorer = A2CU(writer_of(self.values), matcher_of(self.values))
        side = self.side

        def pair_values(texts: list[str], refs: list[str]) -> list[float]:
            recall = scorer.recall(texts, refs) if side in "rf" else None
            precision = scorer.precision(texts, refs) if side in "pf" else None
            if side == "f":
                return [f1(r, p) for r, p in zip(recall, precision)]
            return recall if side == "r" else precision
        return best_per_summary(len(summaries), references, summaries, pair_values)


class A3CUEvaluator(OptionsEvaluator):
    """A3CU's raw recall or precision output, or their F1, of each summary."""

    family = "a3cu"

    @property
    def settings(self) -> dict:
        return {**super().settings, "value": SIDES[self.side],
                "references": "best over references"}

    def score(self, summaries, references, sources) -> list[float]:
        names = (self.values["model"], self.values["device"])
        model, tokenizer = kept_model("a3cu", names, lambda: models.load_a3cu(*names))
        scorer = kept_model("a3cu scores", (*names, self.values["batch_size"]),
                            lambda: A3CU(model, tokenizer, self.values["batch_size"]))
        pick = {"r": lambda r, p: r, "p": lambda r, p: p, "f": float32_f1}[self.side]
        return best_per_summary(
            len(summaries), references, summaries,
            lambda texts, refs: [pick(*pair) for pair in scorer.scores(list(zip(texts, refs)))])


class SemiAutoACUEvaluator(OptionsEvaluator):
    """The share of a summary's human units (a units file) that A2CU's classifier finds."""

    family = "semiautoacu"
    reads_references = False

    @property
    def settings(self) -> dict:
        units = self.values["units"] and Path(self.values["units"])
        return {**super().settings,
                **({"units_sha256": file_sha256(units)} if units and units.is_file() else {})}

    def problem(self) -> str | None:
        if not self.values["units"]:
            return "semiautoacu needs units=FILE (one line or record of units per summary)"
        if not Path(self.values["units"]).is_file():
            return f"semiautoacu: no units file {self.values['units']}"
        return None

    def score(self, summaries, references, sources) -> list[float]:
        units = read_example_units(self.values["units"], len(summaries))
        return unit_recall(matcher_of(self.values), summaries, units)


def evaluators() -> list[Evaluator]:
    """Every evaluator of this folder, with its defaults (`a3cu` is A3CU's recall)."""
    return [*(A2CUEvaluator(f"a2cu-{side}", side) for side in SIDES),
            *(A3CUEvaluator(f"a3cu-{side}", side) for side in SIDES), A3CUEvaluator("a3cu"),
            SemiAutoACUEvaluator("semiautoacu")]


def register() -> None:
    """Add a2cu-r/-p/-f, a3cu and a3cu-r/-p/-f, and semiautoacu to the evaluator registry,
    once per process."""
    for evaluator in evaluators():
        if evaluator.name not in EVALUATORS:
            register_evaluator(evaluator.name, evaluator)
