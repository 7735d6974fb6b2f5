"""System-level and summary-level correlations between metric scores and human scores.

Inputs are `{system: [score per example]}` mappings aligned over examples (same systems, same
number of examples, example i of every system is the same input document).

- system level: the correlation between the per-system means (one point per system);
- summary level: for each example, the correlation across systems of that example's scores,
  then the plain mean over examples. An example whose scores are constant on a side is
  handled by a named rule: "zero" (default: its correlation is undefined and counts as 0),
  "skip" (left out of the mean, as nlpstats and SacreROUGE) or "lite-pyramid" (as
  Lite²/³Pyramid's evaluation does: 1e-10 is added to the first score of a constant vector,
  systems in the given order, which makes the correlation defined; PyrXSum, ROUGE-2 recall vs
  human Pyramid, Pearson: 0.5463 instead of 0.5251). That rule depends on the systems' order
  (the official code's is its human score file's); "zero" and "skip" do not.

Methods: "kendall" (scipy.stats.kendalltau, its default tau-b, which corrects for ties),
"pearson" (scipy.stats.pearsonr), "spearman" (scipy.stats.spearmanr). `correlation` returns
nan when undefined; the system-level value stays nan in that case.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from tasks.plumbing.errors import SumbenchError, check_choice

METHODS = ("kendall", "pearson", "spearman")
#: how summary-level correlation treats an example with constant scores on a side
UNDEFINED_RULES = ("zero", "lite-pyramid", "skip")
LITE_PYRAMID_EPSILON = 1e-10
Scores = Mapping[str, Sequence[float]]


def _scipy_function(method: str) -> Callable:
    from scipy import stats

    functions = {"kendall": stats.kendalltau, "pearson": stats.pearsonr,
                 "spearman": stats.spearmanr}
    return functions[check_choice(method, METHODS, "correlation method")]


def correlation(x: Sequence[float], y: Sequence[float], method: str) -> float:
    """The correlation statistic of two equally long sequences; nan when undefined."""
    function = _scipy_function(method)
    if len(x) != len(y):
        raise SumbenchError(f"cannot correlate sequences of lengths {len(x)} and {len(y)}")
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(function(list(x), list(y))[0])


def check_aligned(metric: Scores, human: Scores, systems: Sequence[str] | None = None
                  ) -> list[str]:
    """The systems to correlate (`systems` or all of `human`); raises on misalignment."""
    chosen = list(systems) if systems is not None else list(human)
    missing = [s for s in chosen if s not in metric or s not in human]
    if missing:
        raise SumbenchError(f"systems without scores on both sides: {', '.join(missing)}")
    lengths = {len(metric[s]) for s in chosen} | {len(human[s]) for s in chosen}
    if len(lengths) > 1:
        raise SumbenchError(f"scores are not aligned over examples: lengths "
                            f"{sorted(lengths)} differ")
    for side, scores in (("metric", metric), ("human", human)):
        for system in chosen:
            if not all(math.isfinite(float(v)) for v in scores[system]):
                raise SumbenchError(f"{side} scores of system {system!r} are not all finite")
    return chosen


def system_level(metric: Scores, human: Scores, method: str,
                 systems: Sequence[str] | None = None) -> float:
    """Correlation of the per-system mean scores (nan when undefined)."""
    chosen = check_aligned(metric, human, systems)
    return correlation([float(np.mean(metric[s])) for s in chosen],
                       [float(np.mean(human[s])) for s in chosen], method)


def global_level(metric: Scores, human: Scores, method: str,
                 systems: Sequence[str] | None = None) -> float:
    """Correlation of every (system, example) score pooled (nan when undefined)."""
    chosen = check_aligned(metric, human, systems)
    return correlation([float(v) for s in chosen for v in metric[s]],
                       [float(v) for s in chosen for v in human[s]], method)


def check_rule(rule: str) -> str:
    return check_choice(rule, UNDEFINED_RULES, "undefined-correlation rule")


def lite_pyramid_perturbed(values: list[float]) -> list[float]:
    """Lite²/³Pyramid's fix for a constant vector: 1e-10 added to its first value."""
    if len(set(values)) == 1 and values:
        return [values[0] + LITE_PYRAMID_EPSILON, *values[1:]]
    return values


def per_example(metric: Scores, human: Scores, method: str,
                systems: Sequence[str] | None = None, rule: str = "zero") -> list[float]:
    """For each example, the correlation across systems (nan when undefined)."""
    check_rule(rule)
    chosen = check_aligned(metric, human, systems)
    count = len(human[chosen[0]]) if chosen else 0
    values = []
    for i in range(count):
        x, y = [metric[s][i] for s in chosen], [human[s][i] for s in chosen]
        if rule == "lite-pyramid" and len(chosen) > 1:
            x, y = lite_pyramid_perturbed(x), lite_pyramid_perturbed(y)
        values.append(correlation(x, y, method))
    return values


def summary_level(metric: Scores, human: Scores, method: str,
                  systems: Sequence[str] | None = None, rule: str = "zero") -> float:
    """Mean over examples of the across-system correlation; constant examples by `rule`
    (undefined ones count as 0, or with "skip" are left out, as nlpstats and SacreROUGE
    leave them out)."""
    values = per_example(metric, human, method, systems, rule)
    if rule == "skip":
        values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan
    return float(np.mean([0.0 if math.isnan(v) else v for v in values]))
