"""Pyramid as a registered evaluator (`pyramid`): each summary scored against the units of its
example in a units file by a presence backend, so that any unit kind `sumbench units` writes
(SGUs, SMUs, SSUs, n-grams, STUs) or a folder's SCUs go through the one evaluator interface:

    sumbench meta-eval --pyramid DIR --metric pyramid --metric-option units=SGUs.txt
        --metric-option presence=nli --metric-option model=DIR

or a board column `NAME=evaluator:pyramid,units=FILE,presence=lexical,threshold=0.5`.

Options: `units` (required: one line or record per example, in the summaries' order;
tasks.units.unit_files reads it), `presence` (lexical by default, or any text backend of
leaderboard.evaluators.pyramid.scoring) and that backend's own options (lexical: `threshold`,
required here, as there is no folder to calibrate it on; nli: `model`, ...). The backend's
model is kept per process (tasks.plumbing.kept)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.evaluators.pyramid.presence import LexicalBackend, build_backend
from leaderboard.evaluators.pyramid.scoring import (
    BACKEND_OPTIONS,
    canonical_backend,
    check_backend_options,
    evaluate_system,
)
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.plumbing.errors import SumbenchError, check_choices
from tasks.plumbing.io import file_sha256
from tasks.plumbing.kept import kept_model
from tasks.units.unit_files import read_example_units

#: every option a built-in backend takes, and the evaluator's own
BACKEND_OPTION_NAMES = tuple(dict.fromkeys(
    name for spec in BACKEND_OPTIONS.values() for name in spec.required + spec.accepted))


class PyramidEvaluator(Evaluator):
    """Pyramid score of each summary: the share of its example's units present in it."""

    name = "pyramid"
    reads_references = False
    option_names = ("units", "presence", *BACKEND_OPTION_NAMES)
    model_options = ("model",)

    def __init__(self, options: Mapping[str, Any] | None = None):
        options = {str(key): value for key, value in dict(options or {}).items()}
        presence = canonical_backend(options.pop("presence", "lexical"))
        if BACKEND_OPTIONS.get(presence) and BACKEND_OPTIONS[presence].human_labels:
            raise SumbenchError("the human labels cannot score a summary: give presence="
                                "lexical, nli, seq2seq, causal-lm, chat or a plug-in's")
        self.units = options.pop("units", None)
        if presence in BACKEND_OPTIONS:  # a plug-in backend checks its own options
            check_backend_options(presence, options)
        self.presence, self.backend_options = presence, options

    def with_options(self, options: Mapping[str, Any]) -> PyramidEvaluator:
        check_choices(sorted(options), self.option_names, "pyramid option")
        values = {"presence": self.presence, **self.backend_options,
                  **({"units": self.units} if self.units else {})}
        return PyramidEvaluator({**values, **options})

    @property
    def settings(self) -> dict:
        units = self.units and Path(self.units)
        return {"evaluator": "pyramid", "presence": self.presence, **self.backend_options,
                "units": self.units,
                **({"units_sha256": file_sha256(units)} if units and units.is_file() else {})}

    def problem(self) -> str | None:
        if not self.units:
            return "pyramid needs units=FILE (one line or record of units per example)"
        if not Path(self.units).is_file():
            return f"pyramid: no units file {self.units}"
        if self.presence != "lexical":
            return None
        threshold = self.backend_options.get("threshold")
        if threshold is None:
            return "pyramid with presence=lexical needs threshold=T (no folder to fit it on)"
        try:
            float(threshold)
        except ValueError:
            return f"pyramid: threshold {threshold!r} is not a number"
        return None

    def backend(self):
        if self.presence == "lexical":
            return LexicalBackend(float(self.backend_options["threshold"]))
        key = tuple(sorted((name, str(value)) for name, value in self.backend_options.items()))
        return kept_model(f"presence {self.presence}", key,
                          lambda: build_backend(self.presence, **self.backend_options))

    def score(self, summaries: Sequence[str], references, sources) -> list[float]:
        units = read_example_units(self.units, len(summaries))
        return list(evaluate_system("summaries", summaries, units, self.backend()).per_example)


def register() -> None:
    """Add "pyramid" to the evaluator registry, once per process."""
    if "pyramid" not in EVALUATORS:
        register_evaluator("pyramid", PyramidEvaluator())
