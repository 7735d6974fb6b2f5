"""Intervals and tests of `sumbench meta-eval` (`--ci`, `--test`, `--correction`): the
statistics of tasks.metrics.resampling over the metrics' and the humans' score matrices
(systems x examples, the systems in the run's order).

- Intervals, per metric, level (system, summary) and method: `fisher` (Fisher's z), or a
  percentile bootstrap over the systems, the inputs or both (`boot-systems`, `boot-inputs`,
  `boot-both`). Every metric is resampled with the same draws (one generator seeded with
  `--seed` per level and method), so their intervals are paired.
- Tests, for every pair of metrics, level and method: a permutation test (`perm-systems`,
  `perm-inputs`, `perm-both`: rows then columns swapped, nlpstats' order) or Williams' test;
  the p-values of a level and method are adjusted together (`holm`, `bonferroni`, `none`).
- A metric with one value per system (a per-system score file) has the system level only,
  and only Fisher intervals and Williams' test there (nothing to resample by input).

Every number is recorded with how it was made: the method, resamples, confidence and seed.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from leaderboard.meta_eval import MetricScores
from tasks.metrics.resampling import (
    bonferroni,
    bootstrap_draws,
    bootstrap_interval,
    fisher_interval,
    holm,
    permutation_masks,
    permutation_pvalue,
    williams_pvalue,
)
from tasks.plumbing.errors import SumbenchError, check_choice

CI_METHODS = ("boot-systems", "boot-inputs", "boot-both", "fisher", "none")
TESTS = ("perm-both", "perm-systems", "perm-inputs", "williams", "none")
CORRECTIONS = ("holm", "bonferroni", "none")
LEVELS = ("system", "summary")
#: meta-eval's summary-level rules the resampling statistics take
RESAMPLED_RULES = ("zero", "skip")


def check_statistics(ci: str, test: str, correction: str, rule: str,
                     metrics: Sequence[MetricScores]) -> None:
    """Refuse (one line) what cannot be computed: a rule the statistics do not resample, a
    resampled statistic of a per-system metric, a test with fewer than two metrics."""
    check_choice(ci, CI_METHODS, "--ci")
    check_choice(test, TESTS, "--test")
    check_choice(correction, CORRECTIONS, "--correction")
    if (ci, test) == ("none", "none"):
        return
    if rule not in RESAMPLED_RULES:
        raise SumbenchError(f"--summary-undefined {rule}: intervals and tests take zero or "
                            f"skip (the lite-pyramid perturbation depends on the systems' "
                            f"order, which resampling changes)")
    per_system = [m.label for m in metrics if m.per_example is None]
    if per_system and (ci.startswith("boot") or test.startswith("perm")):
        raise SumbenchError(f"--metric {per_system[0]} has one value per system: use --ci "
                            f"fisher and --test williams (nothing to resample by input)")
    if test != "none" and len(metrics) < 2:
        raise SumbenchError(f"--test {test} compares metrics: give two --metric or more")


def matrix(per_example: Mapping[str, Sequence[float]], systems: Sequence[str]) -> np.ndarray:
    return np.array([[float(v) for v in per_example[s]] for s in systems], dtype=float)


def _levels(metrics: Sequence[MetricScores]) -> tuple[str, ...]:
    return ("system",) if any(m.per_example is None for m in metrics) else LEVELS


def _means_column(metric: MetricScores, systems: Sequence[str]) -> np.ndarray:
    """A per-system metric as a one-column matrix (its system level is its values)."""
    return np.array([[float(metric.per_system[s])] for s in systems])


def _metric_matrix(metric: MetricScores, systems: Sequence[str]) -> np.ndarray:
    return matrix(metric.per_example, systems) if metric.per_example is not None else \
        _means_column(metric, systems)


def _human_matrix(human, systems, metrics) -> np.ndarray:
    Z = matrix(human, systems)
    if any(m.per_example is None for m in metrics):
        return Z.mean(axis=1, keepdims=True)
    return Z


def intervals(metrics: Sequence[MetricScores], human: Mapping[str, Sequence[float]],
              systems: Sequence[str], methods: Sequence[str], *, ci: str, confidence: float,
              n_resamples: int, seed: int, rule: str) -> dict[str, Any]:
    """{label: {level: {method: [lower, upper]}}} and how they were made."""
    Z = _human_matrix(human, systems, metrics)
    found: dict[str, dict] = {m.label: {} for m in metrics}
    for (li, level), (mi, method) in itertools.product(enumerate(_levels(metrics)),
                                                        enumerate(methods)):
        draws = bootstrap_draws(np.random.default_rng([seed, li, mi]), Z.shape,
                                ci.removeprefix("boot-"), n_resamples) \
            if ci.startswith("boot") else None
        for metric in metrics:
            X = _metric_matrix(metric, systems)
            if ci == "fisher":
                bounds = fisher_interval(X, Z, level, method, confidence, rule)
            else:
                result = bootstrap_interval(X, Z, level, method, confidence=confidence,
                                            summary_undefined=rule, draws=draws)
                bounds = (result["lower"], result["upper"])
            found[metric.label].setdefault(level, {})[method] = list(bounds)
    made = {"method": ci, "confidence": confidence, "summary_undefined": rule}
    if ci.startswith("boot"):
        made.update(n_resamples=n_resamples, seed=seed, percentile=True,
                    draws="the same resamples for every metric of a level and method")
    return {"intervals": found, **made}


def pairwise_tests(metrics: Sequence[MetricScores], human: Mapping[str, Sequence[float]],
                   systems: Sequence[str], methods: Sequence[str], *, test: str,
                   correction: str, alternative: str, n_resamples: int, seed: int,
                   rule: str) -> dict[str, Any]:
    """Every ordered-once pair (a, b) of metrics per level and method: p that a and b
    correlate equally with the humans, adjusted within the level and method."""
    Z = _human_matrix(human, systems, metrics)
    matrices = {m.label: _metric_matrix(m, systems) for m in metrics}
    pairs = list(itertools.combinations([m.label for m in metrics], 2))
    rows = []
    for (li, level), (mi, method) in itertools.product(enumerate(_levels(metrics)),
                                                        enumerate(methods)):
        masks = permutation_masks(np.random.default_rng([seed, li, mi]), Z.shape,
                                  test.removeprefix("perm-"), n_resamples) \
            if test.startswith("perm") else None
        pvalues = [williams_pvalue(matrices[a], matrices[b], Z, level, method, alternative)
                   if test == "williams" else
                   permutation_pvalue(matrices[a], matrices[b], Z, level, method,
                                      alternative=alternative, summary_undefined=rule,
                                      masks=masks)
                   for a, b in pairs]
        adjusted = {"holm": holm, "bonferroni": bonferroni,
                    "none": list}[correction](pvalues)
        rows += [{"a": a, "b": b, "level": level, "method": method, "p": p,
                  "p_adjusted": q} for (a, b), p, q in zip(pairs, pvalues, adjusted)]
    made = {"test": test, "alternative": alternative, "correction": correction,
            "summary_undefined": rule}
    if test.startswith("perm"):
        made.update(n_resamples=n_resamples, seed=seed, standardised=True)
    return {"pairs": rows, **made}


def format_statistics(statistics: Mapping[str, Any], digits: int = 3) -> str:
    """Intervals, then the adjusted p-values, as plain lines."""
    lines = []
    found = statistics.get("intervals")
    if found:
        lines.append(f"{found['method']} {found['confidence']:.0%} intervals:")
        for label, levels in found["intervals"].items():
            for level, methods in levels.items():
                cells = [f"{method} [{_shown(lo, digits)}, {_shown(hi, digits)}]"
                         for method, (lo, hi) in methods.items()]
                lines.append(f"  {label} {level}: " + "  ".join(cells))
    tests = statistics.get("tests")
    if tests:
        lines.append(f"{tests['test']} ({tests['alternative']}), {tests['correction']}-"
                     f"adjusted p-values:")
        lines += [f"  {row['a']} vs {row['b']} {row['level']} {row['method']}: "
                  f"{_shown(row['p_adjusted'], digits)}" for row in tests["pairs"]]
    return "\n".join(lines)


def _shown(value: float, digits: int) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"
