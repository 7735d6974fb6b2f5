"""Summary evaluators by name: metrics that score each summary of a system (what
`sumbench meta-eval --metric NAME` correlates with human judgments).

An evaluator is a callable `evaluator(summaries, references) -> [score per summary]` (the
i-th summary against the i-th reference). Built-in: ROUGE-1/2/L recall (rouge-score with
stemming) and ROUGE-1.5.5's ROUGE-1..4 and L (`rouge155-1-f`, `rouge155-2-r`, `rouge155-l-p`,
...: tasks.metrics.rouge155 with `-m` and the WordNet-2.0 exceptions). Installed packages
add theirs through `sumbench.evaluators` entry points (tasks.plumbing.plugins): the entry
point's name is the evaluator's.

An evaluator may also
- read the sources: with `needs_sources = True` it is called as `evaluator(summaries,
  references, sources)`, the i-th source the document the i-th summary summarises;
- carry settings: `settings` (a JSON-able dict) is recorded beside its scores, and
  `with_options({name: text})` returns the evaluator with those settings changed
  (`meta-eval --metric-option KEY=VALUE`; an unknown name is an error that lists the known).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.metrics.rouge155 import METRICS, Rouge155, rouge155
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.plugins import Once, load_plugins
from tasks.plumbing.registry import Registry

Evaluator = Callable[[Sequence[str], Sequence[str]], list[float]]
EVALUATORS: Registry = Registry("evaluator")


def rouge_recall(metric: str) -> Evaluator:
    def evaluator(summaries: Sequence[str], references: Sequence[str]) -> list[float]:
        return rouge_recall_by_system({"summaries": list(summaries)}, list(references),
                                      [metric])[metric]["summaries"]
    return evaluator


@functools.lru_cache(maxsize=1)
def _rouge155_config() -> Rouge155:
    return Rouge155.load()  # -m with the WordNet-2.0 exceptions, read once


def rouge155_evaluator(metric: str, side: str) -> Evaluator:
    """ROUGE-1.5.5 (`-n 4 -m`, one reference) `metric` ("rouge-1" .. "rouge-l"), its R, P or F
    (`side`: "r", "p", "f") of each summary against its reference."""
    field = {"r": "recall", "p": "precision", "f": "f"}[side]

    def evaluator(summaries: Sequence[str], references: Sequence[str]) -> list[float]:
        config = _rouge155_config()
        return [getattr(rouge155(config, summary, [reference], [metric])[metric], field)
                for summary, reference in zip(summaries, references)]
    return evaluator


#: `rouge155-1-f` and the like: ROUGE-1.5.5's ROUGE-1..4 and L, recall, precision or F
ROUGE155_EVALUATORS = {f"rouge155-{metric.split('-')[1]}-{side}": (metric, side)
                       for metric in METRICS for side in "rpf"}


def register_evaluator(name: str, evaluator) -> None:
    if not callable(evaluator):
        raise TypeError(f"expected a callable (summaries, references) -> scores, got "
                        f"{evaluator!r}")
    EVALUATORS.register(name, evaluator)


def _register_evaluators() -> None:
    for name in RECALL_METRICS:
        EVALUATORS.register(name, rouge_recall(name))
    for name, (metric, side) in ROUGE155_EVALUATORS.items():
        EVALUATORS.register(name, rouge155_evaluator(metric, side))
    load_plugins("sumbench.evaluators", register_evaluator)


_register_once = Once(_register_evaluators)


def load_evaluators() -> Registry:
    """The registry, with the built-in evaluators and the plug-ins' (read once)."""
    _register_once()
    return EVALUATORS


def configured(name: str, options: Mapping[str, str] | None = None):
    """The evaluator called `name`, with `options` applied (an error for an evaluator that
    takes none)."""
    evaluator = load_evaluators().get(name)
    if not options:
        return evaluator
    if not hasattr(evaluator, "with_options"):
        raise SumbenchError(f"evaluator {name!r} takes no options (got "
                            f"{', '.join(sorted(options))})")
    return evaluator.with_options(dict(options))


def evaluator_settings(evaluator) -> dict:
    """What an evaluator records beside its scores (empty for a plain callable)."""
    return dict(getattr(evaluator, "settings", None) or {})


def score_summaries(evaluator, summaries: Sequence[str], references: Sequence[str],
                    sources: Sequence[str] | None, name: str = "evaluator") -> list[float]:
    """The evaluator's score of each summary, with the sources when it reads them."""
    if getattr(evaluator, "needs_sources", False):
        if sources is None:
            raise SumbenchError(f"evaluator {name!r} reads each summary's source document, "
                                f"and none was given")
        values = evaluator(summaries, references, sources)
    else:
        values = evaluator(summaries, references)
    return [float(value) for value in values]


def evaluate_systems(name: str, summaries: Mapping[str, Sequence[str]],
                     references: Sequence[str], sources: Sequence[str] | None = None,
                     options: Mapping[str, str] | None = None) -> dict[str, list[float]]:
    """system -> the evaluator's score of each of its summaries."""
    evaluator = configured(name, options)
    return {system: score_summaries(evaluator, texts, references, sources, name)
            for system, texts in summaries.items()}
