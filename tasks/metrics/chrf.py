"""chrF as sacrebleu computes it (sacrebleu 2.6.0, `sacrebleu/metrics/chrf.py`; the numbers
are sacrebleu's own, on its 0-100 scale, as QAPyramid's Table 6).

- Defaults (sacrebleu's, and Hugging Face `evaluate`'s `chrf`): character n-grams up to 6,
  no word n-grams (`word_order=2` is chrF++), β 2, case kept, whitespace removed, effective
  order rather than ε smoothing.
- Segment score (the evaluator `chrf`): `CHRF.sentence_score(summary, references)`; with
  several references the segment keeps the statistics of the reference with the best F.
  An empty summary or reference scores 0 as sacrebleu scores it (no error).
- Corpus statistic (`chrf_corpus`): `CHRF.corpus_score`, the statistics summed over the
  segments before the F; this is not the mean of the segment scores. It is a function, not an
  evaluator option, because an evaluator gives one score per summary: a system-level table
  (meta-eval's per-system mean of segment scores, which is RoSE's and QAPyramid's system
  level) cannot hold it. Summaries with fewer references pad sacrebleu's reference streams
  with None, which sacrebleu skips.
"""
from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tasks.metrics.evaluator_base import Evaluator
from tasks.plumbing.errors import SumbenchError, check_choices


def _order(text: Any) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError("expected an integer >= 0")
    return value


def _beta(text: Any) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError("expected a finite number >= 0")
    return int(value) if value.is_integer() else value


def _flag(text: Any) -> bool:
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


#: option -> (parser of its text, sacrebleu's default)
OPTIONS: dict[str, tuple[Any, Any]] = {
    "char_order": (_order, 6), "word_order": (_order, 0), "beta": (_beta, 2),
    "lowercase": (_flag, False), "whitespace": (_flag, False), "eps_smoothing": (_flag, False),
}
DEFAULTS = {name: default for name, (_, default) in OPTIONS.items()}


def parse_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options' values (text or parsed) over sacrebleu's defaults; a one-line error for
    an unknown name or a bad value."""
    check_choices(sorted(options), tuple(OPTIONS), "chrf option")
    values = dict(DEFAULTS)
    for name, text in options.items():
        try:
            values[name] = OPTIONS[name][0](text)
        except ValueError as error:
            raise SumbenchError(f"chrf option {name}={text!r}: {error}") from None
    if values["char_order"] + values["word_order"] == 0:
        raise SumbenchError("chrf options: char_order and word_order cannot both be 0")
    return values


MISSING_SACREBLEU = ("chrf needs sacrebleu, which is not installed: "
                     "pip install 'sacrebleu>=2.6' (sumbench is tested with 2.6.0)")


def sacrebleu_missing() -> str | None:
    """Why chrF cannot run here (sacrebleu absent), or None."""
    return None if importlib.util.find_spec("sacrebleu") else MISSING_SACREBLEU


def _metric(options: Mapping[str, Any] | None = None):
    if sacrebleu_missing():
        raise SumbenchError(MISSING_SACREBLEU)
    from sacrebleu.metrics import CHRF

    return CHRF(**{**DEFAULTS, **(options or {})})


def _reference_lists(summaries: Sequence[str], references: Sequence[Sequence[str]]
                     ) -> list[list[str]]:
    if len(references) != len(summaries):
        raise SumbenchError(f"chrf: {len(references)} reference lists for {len(summaries)} "
                            f"summaries")
    lists = [[texts] if isinstance(texts, str) else list(texts) for texts in references]
    empty = next((index for index, texts in enumerate(lists) if not texts), None)
    if empty is not None:
        raise SumbenchError(f"chrf: summary {empty + 1} has no reference")
    return lists


def chrf_segments(summaries: Sequence[str], references: Sequence[Sequence[str]],
                  options: Mapping[str, Any] | None = None) -> list[float]:
    """sacrebleu's `sentence_score` of each summary against its references (0-100)."""
    metric = _metric(options)
    return [float(metric.sentence_score(summary, texts).score)
            for summary, texts in zip(summaries, _reference_lists(summaries, references))]


def chrf_corpus(summaries: Sequence[str], references: Sequence[Sequence[str]],
                options: Mapping[str, Any] | None = None) -> float:
    """sacrebleu's `corpus_score` of a system's summaries (statistics summed, then one F)."""
    lists = _reference_lists(summaries, references)
    width = max((len(texts) for texts in lists), default=0)
    streams = [[texts[index] if index < len(texts) else None for texts in lists]
               for index in range(width)]
    if not summaries:
        raise SumbenchError("chrf: a corpus score needs at least one summary")
    return float(_metric(options).corpus_score(list(summaries), streams).score)


class ChrfEvaluator(Evaluator):
    """sacrebleu's chrF of each summary (`sentence_score`, the best reference's statistics;
    0-100); options: OPTIONS."""

    name = "chrf"
    reads_sources, reads_references = False, True
    option_names = tuple(OPTIONS)
    model_options: tuple[str, ...] = ()

    def __init__(self, options: Mapping[str, Any] | None = None):
        self.options = parse_options(options or {})
        self._cost: dict | None = None

    def problem(self) -> str | None:
        return sacrebleu_missing()

    def with_options(self, options: Mapping[str, Any]) -> ChrfEvaluator:
        if not options:
            return self
        return ChrfEvaluator({**self.options, **options})

    @property
    def settings(self) -> dict:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("sacrebleu")
        except PackageNotFoundError:
            installed = None
        return {"evaluator": self.name, "implementation": "sacrebleu CHRF.sentence_score",
                "sacrebleu": installed, **self.options, "scale": "0-100",
                "references": "statistics of the best-F reference"}

    def cost(self) -> dict | None:
        return self._cost

    def score(self, summaries, references, sources) -> list[float]:
        started = time.perf_counter()
        values = chrf_segments(summaries, references, self.options)
        self._cost = {"seconds": time.perf_counter() - started}
        return values
