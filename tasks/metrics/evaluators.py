"""Summary evaluators by name: reference-based metrics that score each summary of a system
(what `sumbench meta-eval --metric NAME` correlates with human judgments).

An evaluator is a callable `evaluator(summaries, references) -> [score per summary]` (the
i-th summary against the i-th reference). Built-in: ROUGE-1/2/L recall (rouge-score with
stemming). Installed packages add theirs through `sumbench.evaluators` entry points
(tasks.plumbing.plugins): the entry point's name is the evaluator's.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.plumbing.plugins import Once, load_plugins
from tasks.plumbing.registry import Registry

Evaluator = Callable[[Sequence[str], Sequence[str]], list[float]]
EVALUATORS: Registry = Registry("evaluator")


def rouge_recall(metric: str) -> Evaluator:
    def evaluator(summaries: Sequence[str], references: Sequence[str]) -> list[float]:
        return rouge_recall_by_system({"summaries": list(summaries)}, list(references),
                                      [metric])[metric]["summaries"]
    return evaluator


def register_evaluator(name: str, evaluator) -> None:
    if not callable(evaluator):
        raise TypeError(f"expected a callable (summaries, references) -> scores, got "
                        f"{evaluator!r}")
    EVALUATORS.register(name, evaluator)


def _register_evaluators() -> None:
    for name in RECALL_METRICS:
        EVALUATORS.register(name, rouge_recall(name))
    load_plugins("sumbench.evaluators", register_evaluator)


_register_once = Once(_register_evaluators)


def load_evaluators() -> Registry:
    """The registry, with the built-in evaluators and the plug-ins' (read once)."""
    _register_once()
    return EVALUATORS


def evaluate_systems(name: str, summaries: Mapping[str, Sequence[str]],
                     references: Sequence[str]) -> dict[str, list[float]]:
    """system -> the evaluator's score of each of its summaries."""
    evaluator = load_evaluators().get(name)
    return {system: [float(value) for value in evaluator(texts, references)]
            for system, texts in summaries.items()}
