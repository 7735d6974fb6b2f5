"""Summary evaluators by name: metrics that score each summary of a system (what
`sumbench meta-eval --metric NAME` correlates with human judgments, and what a board column
`NAME=evaluator:EVALUATOR[,KEY=VALUE...]` of the summaries track shows).

The interface is `Evaluator`: a name, its settings (recorded beside every score),
`score(summaries, references, sources)` with several references per summary (a sequence of
references for each), whether it reads the sources (`reads_sources`) and the references
(`reads_references`), the options it takes (`with_options`), and what its latest call cost
(`cost()`). Built-in here: ROUGE-1/2/L recall (rouge-score with stemming; the best over a
summary's references) and ROUGE-1.5.5's ROUGE-1..4 and L (`rouge155-1-f`, `rouge155-2-r`,
`rouge155-l-p`, ...: tasks.metrics.rouge155 with `-m` and the WordNet-2.0 exceptions, a
summary's references as ROUGE-1.5.5's several models), NLTK's METEOR (`meteor`,
tasks.metrics.meteor) and sacrebleu's chrF (`chrf`, tasks.metrics.chrf). The interface itself
is tasks.metrics.evaluator_base's. Methods with models register beside their definitions
(leaderboard.evaluators.registry adds them); installed packages add theirs through
`sumbench.evaluators` entry points (tasks.plumbing.plugins), the entry point's name being the
evaluator's.

A plug-in may be an `Evaluator` (class or instance) or, as before, a plain callable
`evaluator(summaries, references) -> [score per summary]`: it gets each summary's first
reference. Such a callable may still say `needs_sources = True` (then it is called with the
sources too), carry `settings` and offer `with_options({name: text})`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tasks.metrics.chrf import ChrfEvaluator
from tasks.metrics.evaluator_base import Evaluator, References
from tasks.metrics.meteor import MeteorEvaluator
from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.metrics.rouge155 import METRICS, Rouge155, rouge155
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.plugins import Once, load_plugins
from tasks.plumbing.registry import Registry

EVALUATORS: Registry = Registry("evaluator")


class CallableEvaluator(Evaluator):
    """A plain callable `(summaries, references) -> scores` (today's plug-in contract) as an
    Evaluator: it gets each summary's first reference."""

    def __init__(self, name: str, function: Callable):
        if not callable(function):
            raise TypeError(f"expected a callable (summaries, references) -> scores, got "
                            f"{function!r}")
        self.name, self.function = name, function
        self.reads_sources = bool(getattr(function, "needs_sources", False))

    @property
    def settings(self) -> dict:
        return dict(getattr(self.function, "settings", None) or {})

    def with_options(self, options: Mapping[str, Any]) -> Evaluator:
        if not options:
            return self
        if not hasattr(self.function, "with_options"):
            return super().with_options(options)
        return CallableEvaluator(self.name, self.function.with_options(dict(options)))

    def cost(self) -> dict | None:
        cost = getattr(self.function, "cost", None)
        return cost() if callable(cost) else None

    def score(self, summaries, references, sources) -> list[float]:
        firsts = [texts[0] for texts in references]
        if self.reads_sources:
            return self.function(summaries, firsts, sources)
        return self.function(summaries, firsts)


class RougeRecall(Evaluator):
    """rouge-score's recall (`metric`: rouge1_recall, ...) with stemming, the best over a
    summary's references."""

    def __init__(self, metric: str):
        self.name = self.metric = metric

    @property
    def settings(self) -> dict:
        return {"evaluator": self.name, "implementation": "rouge-score", "stemming": True,
                "references": "best recall"}

    def score(self, summaries, references, sources) -> list[float]:
        pairs = [(index, summary, reference) for index, (summary, texts)
                 in enumerate(zip(summaries, references)) for reference in texts]
        values = rouge_recall_by_system({"pairs": [pair[1] for pair in pairs]},
                                        [pair[2] for pair in pairs], [self.metric])
        best = [float("-inf")] * len(summaries)
        for (index, _, _), value in zip(pairs, values[self.metric]["pairs"]):
            best[index] = max(best[index], value)
        return best


@functools.lru_cache(maxsize=1)
def _rouge155_config() -> Rouge155:
    return Rouge155.load()  # -m with the WordNet-2.0 exceptions, read once


class Rouge155Evaluator(Evaluator):
    """ROUGE-1.5.5 (`-n 4 -m`) `metric` ("rouge-1" .. "rouge-l"), its R, P or F (`side`:
    "r", "p", "f") of each summary against its references (ROUGE-1.5.5's models)."""

    def __init__(self, name: str, metric: str, side: str):
        self.name, self.metric = name, metric
        self.field = {"r": "recall", "p": "precision", "f": "f"}[side]

    @property
    def settings(self) -> dict:
        return {"evaluator": self.name, "implementation": "ROUGE-1.5.5 (-n 4 -m)",
                "metric": self.metric, "value": self.field}

    def score(self, summaries, references, sources) -> list[float]:
        config = _rouge155_config()
        return [getattr(rouge155(config, summary, list(texts), [self.metric])[self.metric],
                        self.field) for summary, texts in zip(summaries, references)]


#: `rouge155-1-f` and the like: ROUGE-1.5.5's ROUGE-1..4 and L, recall, precision or F
ROUGE155_EVALUATORS = {f"rouge155-{metric.split('-')[1]}-{side}": (metric, side)
                       for metric in METRICS for side in "rpf"}


def as_evaluator(name: str, entry: Any) -> Evaluator:
    """An Evaluator of a registered entry: an Evaluator (its class is instantiated), or a
    plain callable."""
    if isinstance(entry, type) and issubclass(entry, Evaluator):
        entry = entry()
    if isinstance(entry, Evaluator):
        if not entry.name:
            entry.name = name
        return entry
    return CallableEvaluator(name, entry)


def register_evaluator(name: str, entry: Any) -> Evaluator:
    """Register an evaluator (an Evaluator, its class, or a plain callable) under `name`; a
    name taken already is a DuplicateNameError."""
    return EVALUATORS.register(name, as_evaluator(name, entry))


def _register_evaluators() -> None:
    for name in RECALL_METRICS:
        register_evaluator(name, RougeRecall(name))
    for name, (metric, side) in ROUGE155_EVALUATORS.items():
        register_evaluator(name, Rouge155Evaluator(name, metric, side))
    register_evaluator("meteor", MeteorEvaluator())  # NLTK's, with WordNet 3.0
    register_evaluator("chrf", ChrfEvaluator())      # sacrebleu's, segment scores
    load_plugins("sumbench.evaluators", register_evaluator)


_register_once = Once(_register_evaluators)


def load_evaluators() -> Registry:
    """The registry, with the built-in evaluators and the plug-ins' (read once)."""
    _register_once()
    return EVALUATORS


def configured(name: str, options: Mapping[str, str] | None = None) -> Evaluator:
    """The evaluator called `name`, with `options` applied (an error for an evaluator that
    takes none, or for an unknown option)."""
    evaluator = load_evaluators().get(name)
    return evaluator.with_options(dict(options)) if options else evaluator


def evaluator_settings(evaluator: Evaluator) -> dict:
    """What an evaluator records beside its scores."""
    return dict(evaluator.settings or {})


def reference_lists(references: References, count: int, name: str) -> list[tuple[str, ...]]:
    """Each summary's references as a tuple (a lone text is one reference)."""
    if len(references) != count:
        raise SumbenchError(f"evaluator {name!r}: {len(references)} references for {count} "
                            f"summaries")
    lists = [(texts,) if isinstance(texts, str) else tuple(texts) for texts in references]
    empty = next((index for index, texts in enumerate(lists) if not texts), None)
    if empty is not None:
        raise SumbenchError(f"evaluator {name!r}: summary {empty + 1} has no reference")
    return lists


def score_summaries(evaluator: Evaluator | Callable, summaries: Sequence[str],
                    references: References, sources: Sequence[str] | None,
                    name: str = "evaluator") -> list[float]:
    """The evaluator's score of each summary (several references each, or one), with the
    sources when it reads them."""
    evaluator = as_evaluator(name, evaluator)
    name = evaluator.name or name
    problem = evaluator.problem()
    if problem:
        raise SumbenchError(problem)
    lists = reference_lists(references, len(summaries), name)
    if evaluator.reads_sources:
        if sources is None:
            raise SumbenchError(f"evaluator {name!r} reads each summary's source document, "
                                f"and none was given")
        if len(sources) != len(summaries):
            raise SumbenchError(f"evaluator {name!r}: {len(sources)} sources for "
                                f"{len(summaries)} summaries")
    values = [float(value) for value in evaluator.score(list(summaries), lists, sources)]
    if len(values) != len(summaries):
        raise SumbenchError(f"evaluator {name!r} gave {len(values)} scores for "
                            f"{len(summaries)} summaries")
    return values


def evaluate_systems(name: str, summaries: Mapping[str, Sequence[str]],
                     references: References, sources: Sequence[str] | None = None,
                     options: Mapping[str, str] | None = None) -> dict[str, list[float]]:
    """system -> the evaluator's score of each of its summaries."""
    evaluator = configured(name, options)
    return {system: score_summaries(evaluator, texts, references, sources, name)
            for system, texts in summaries.items()}
