"""Statistics of meta-evaluation on score matrices: correlations at three levels, confidence
intervals (bootstrap, Fisher), Williams' test between two metrics and multiple-test
corrections, as Deutsch, Dror and Roth (2021) define them and nlpstats 0.0.1 computes them.

A matrix holds one row per system and one column per input (document); NaN marks a summary
without a score. X and Y are two metrics' matrices, Z the human one, of the same shape.

- Levels (`correlate`): "system" correlates the row means (NaN skipped); "summary" correlates
  each column across systems (NaN entries dropped) and averages the columns whose correlation
  is defined (`summary_undefined="skip"`, nlpstats' and SacreROUGE's rule) or counts an
  undefined one as 0 ("zero", sumbench's meta-eval default); "global" correlates every
  non-NaN cell.
- `fisher_interval`: Fisher's z with Bonett and Wright's variances (Pearson b=3, c=1;
  Spearman b=3, c=sqrt(1 + r²/2); Kendall b=4, c=sqrt(0.437)); n is the number of systems,
  of a column's largest non-NaN count, or of non-NaN cells.
- `bootstrap_draws`: the resamples of the systems (rows), the inputs (columns) or both (rows,
  then columns, drawn independently); intervals over them: tasks.metrics.bootstrap.
- `williams_pvalue`: Williams' test of r(X, Z) against r(Y, Z) given r(X, Y), with n - 3
  degrees of freedom (psych's `r.test`, as nlpstats).
- `holm`, `bonferroni`: adjusted p-values of a family of tests.

Randomness comes from an explicit `numpy.random.Generator`. The draws themselves
(`bootstrap_draws`) may be given instead, which is how the tests feed nlpstats and these
functions the same resamples. Resampling tests between metrics: tasks.metrics.metric_tests.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.plumbing.errors import SumbenchError, check_choice

LEVELS = ("system", "summary", "global")
SUMMARY_UNDEFINED = ("skip", "zero")
RESAMPLING = ("systems", "inputs", "both")
ALTERNATIVES = ("two-sided", "greater", "less")
#: Bonett and Wright (2000): (b, c(r)) of Fisher's z interval per coefficient
FISHER_CONSTANTS = {"pearson": (3, lambda r: 1.0),
                    "spearman": (3, lambda r: math.sqrt(1 + r ** 2 / 2)),
                    "kendall": (4, lambda r: math.sqrt(0.437))}


def coefficient(x: np.ndarray, z: np.ndarray, method: str) -> float:
    """scipy's Kendall tau-b, Pearson or Spearman of two vectors (nan where undefined)."""
    import warnings

    from scipy import stats

    check_choice(method, tuple(FISHER_CONSTANTS), "correlation method")
    function = {"kendall": stats.kendalltau, "pearson": stats.pearsonr,
                "spearman": stats.spearmanr}[method]
    if len(x) < 2:
        return math.nan
    with warnings.catch_warnings():   # a constant input: scipy warns and returns nan
        warnings.simplefilter("ignore")
        return float(function(x, z)[0])


def check_matrices(*matrices: Any) -> list[np.ndarray]:
    """Two-dimensional float matrices of one shape, NaN in the same cells."""
    arrays = [np.asarray(matrix, dtype=float) for matrix in matrices]
    if any(array.ndim != 2 for array in arrays):
        raise SumbenchError("score matrices must be two-dimensional (systems x inputs)")
    if len({array.shape for array in arrays}) != 1:
        raise SumbenchError(f"score matrices of different shapes: "
                            f"{', '.join(str(array.shape) for array in arrays)}")
    missing = np.isnan(arrays[0])
    if any(np.any(np.isnan(array) != missing) for array in arrays[1:]):
        raise SumbenchError("the matrices have NaN in different cells (a score where the "
                            "other side has none)")
    return arrays


def correlate(X: Any, Z: Any, level: str, method: str,
              summary_undefined: str = "skip") -> float:
    """The correlation of X with Z at `level` (see the module)."""
    X, Z = (np.asarray(matrix, dtype=float) for matrix in (X, Z))
    check_choice(level, LEVELS, "correlation level")
    if level == "system":
        return coefficient(np.nanmean(X, axis=1), np.nanmean(Z, axis=1), method)
    if level == "global":
        kept = ~np.isnan(X) & ~np.isnan(Z)
        return coefficient(X[kept], Z[kept], method)
    check_choice(summary_undefined, SUMMARY_UNDEFINED, "summary-undefined rule")
    values = []
    for column in range(X.shape[1]):
        kept = ~np.isnan(X[:, column]) & ~np.isnan(Z[:, column])
        r = coefficient(X[kept, column], Z[kept, column], method)
        if not math.isnan(r):
            values.append(r)
        elif summary_undefined == "zero":
            values.append(0.0)
    return float(np.mean(values)) if values else math.nan


def level_size(X: np.ndarray, level: str) -> int:
    """n of a level's correlation: systems, a column's most scores, or scored cells."""
    scored = ~np.isnan(X)
    if level == "system":
        return int(X.shape[0])
    if level == "summary":
        return int(scored.sum(axis=0).max())
    return int(scored.sum())


def fisher_interval(X: Any, Z: Any, level: str, method: str, confidence: float = 0.95,
                    summary_undefined: str = "skip") -> tuple[float, float]:
    """Fisher's z interval of the level's correlation; (nan, nan) when n <= b."""
    from scipy import stats

    X, Z = check_matrices(X, Z)
    check_confidence(confidence)
    r = correlate(X, Z, level, method, summary_undefined)
    b, c = FISHER_CONSTANTS[method]
    n = level_size(X, level)
    if n <= b:
        return math.nan, math.nan
    half = stats.norm.ppf(1.0 - (1 - confidence) / 2) * c(r) / math.sqrt(n - b)
    return float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half))


def williams_pvalue(X: Any, Y: Any, Z: Any, level: str, method: str,
                    alternative: str = "two-sided") -> float:
    """Williams' test that X correlates with Z otherwise than Y does (see the module)."""
    from scipy import stats

    X, Y, Z = check_matrices(X, Y, Z)
    check_choice(alternative, ALTERNATIVES, "alternative")
    r12, r13, r23 = (abs(correlate(a, b, level, method)) for a, b in ((X, Z), (Y, Z), (X, Y)))
    n = level_size(X, level)
    if n <= 3:
        raise SumbenchError(f"Williams' test needs more than 3 {level}-level points, got {n}")
    det = 1 - r12 ** 2 - r23 ** 2 - r13 ** 2 + 2 * r12 * r23 * r13
    mean = (r12 + r13) / 2
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / (
        (2 * (n - 1) / (n - 3)) * det + mean ** 2 * (1 - r23) ** 3))
    tail = {"two-sided": abs(t), "greater": t, "less": -t}[alternative]
    return float(stats.t.sf(tail, n - 3) * (2 if alternative == "two-sided" else 1))


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise SumbenchError(f"confidence must be between 0 and 1, got {confidence}")


def bootstrap_draws(rng: np.random.Generator, shape: tuple[int, int], resampling: str,
                    n_resamples: int) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """(rows, columns) index arrays of each resample (None: that axis kept whole)."""
    check_choice(resampling, RESAMPLING, "resampling")
    m, n = shape
    return [(rng.integers(0, m, m) if resampling != "inputs" else None,
             rng.integers(0, n, n) if resampling != "systems" else None)
            for _ in range(n_resamples)]


def bonferroni(pvalues: Sequence[float]) -> list[float]:
    """Each p-value times the number of tests, at most 1."""
    return [min(1.0, p * len(pvalues)) for p in pvalues]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (monotone, at most 1)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted
