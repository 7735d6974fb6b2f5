"""Tests between metrics of a meta-evaluation, as nlpstats 0.0.1 and SacreROUGE 0.2.5 compute
them (Deutsch, Dror and Roth 2021), and what is built on a table of them: the partial
conjunction count across datasets and significance clusters.

X and Y are two metrics' score matrices and Z the human one (systems x inputs, NaN where no
score; tasks.metrics.resampling). Each test gives the p-value of "X and Y correlate with Z
equally" against `alternative` ("greater": X correlates better).

- `permutation_pvalue`: X and Y standardised over all their cells (`reference="nlpstats"`
  standardises Z too, a no-op for the correlations up to rounding); each resample swaps X's
  and Y's rows ("systems"), columns ("inputs"), rows then columns ("both", nlpstats'
  `permute_both`) or single cells ("cells", SacreROUGE's `permute_both`), each with
  probability 1/2. p = hits / n (nlpstats) or (hits + 1) / (n + 1) (SacreROUGE), a hit
  being a resampled difference at least the observed one (two-sided: in absolute value).
- `bootstrap_difference_pvalue`: SacreROUGE's `bootstrap_diff_test` (Berg-Kirkpatrick et
  al. 2012): X, Y and Z resampled together (systems, inputs or both); p = the share of
  resamples whose difference is at least twice the observed one (two-sided: in absolute
  value), over the resamples where both correlations are defined.
- `partial_conjunction`: SacreROUGE's `bonferroni_partial_conjunction_pvalue_test`: how many
  datasets' p-values survive Holm's procedure at `alpha`, and which.
- `significance_clusters`: mt-metrics-eval's `AssignRanks`: metrics in decreasing order of
  correlation; a metric opens a new cluster when it is significantly worse (p <= alpha) than
  any member of the current cluster, else it joins it.

Randomness comes from an explicit generator or from the draws themselves (the tests feed the
reference code the same ones).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.metrics.correlation_bootstrap import permuted_differences, resampled_correlations
from tasks.metrics.resampling import (
    ALTERNATIVES,
    bootstrap_draws,
    check_matrices,
    correlate,
)
from tasks.plumbing.errors import SumbenchError, check_choice

PERMUTATIONS = ("systems", "inputs", "both", "cells")
REFERENCES = ("nlpstats", "sacrerouge")


def permutation_masks(rng: np.random.Generator, shape: tuple[int, int], permutation: str,
                      n_resamples: int) -> list[tuple[Any, Any]]:
    """(rows, columns) boolean swap masks of each resample (None: no swap on that axis);
    "cells": (a systems x inputs mask, None)."""
    check_choice(permutation, PERMUTATIONS, "permutation")
    m, n = shape
    if permutation == "cells":
        return [(rng.random((m, n)) > 0.5, None) for _ in range(n_resamples)]
    return [(rng.random(m) > 0.5 if permutation != "inputs" else None,
             rng.random(n) > 0.5 if permutation != "systems" else None)
            for _ in range(n_resamples)]


def swapped(X: np.ndarray, Y: np.ndarray, rows, columns) -> tuple[np.ndarray, np.ndarray]:
    """X and Y with the masked rows swapped, then the masked columns (nlpstats' order); a
    two-dimensional `rows` mask swaps those cells."""
    X, Y = X.copy(), Y.copy()
    if rows is not None:
        X[rows], Y[rows] = Y[rows], X[rows].copy()
    if columns is not None:
        X[:, columns], Y[:, columns] = Y[:, columns], X[:, columns].copy()
    return X, Y


def standardised(matrix: np.ndarray) -> np.ndarray:
    return (matrix - np.nanmean(matrix)) / np.nanstd(matrix)


def _is_hit(sample: float, observed: float, alternative: str, factor: float = 1.0) -> bool:
    if alternative == "two-sided":
        return abs(sample) >= factor * abs(observed)
    if alternative == "greater":
        return sample >= factor * observed
    return sample <= factor * observed


def permutation_pvalue(X: Any, Y: Any, Z: Any, level: str, method: str, *,
                       permutation: str = "both", n_resamples: int = 1000,
                       alternative: str = "two-sided", summary_undefined: str = "skip",
                       reference: str = "nlpstats", rng: np.random.Generator | None = None,
                       masks: Sequence | None = None) -> float:
    """The permutation test's p-value (see the module); `masks` (as `permutation_masks`
    gives) replaces `rng`."""
    X, Y, Z = check_matrices(X, Y, Z)
    check_choice(alternative, ALTERNATIVES, "alternative")
    check_choice(reference, REFERENCES, "reference")
    X, Y = standardised(X), standardised(Y)
    if reference == "nlpstats":
        Z = standardised(Z)
    if masks is None:
        if rng is None:
            raise SumbenchError("permutation_pvalue needs a seeded generator (rng) or masks")
        masks = permutation_masks(rng, X.shape, permutation, n_resamples)

    def difference(first: np.ndarray, second: np.ndarray) -> float:
        return correlate(first, Z, level, method, summary_undefined) - \
            correlate(second, Z, level, method, summary_undefined)

    batched = permuted_differences(X, Y, Z, masks, level, method, summary_undefined)
    if batched is None:
        observed = difference(X, Y)
        samples = [difference(*swapped(X, Y, rows, columns)) for rows, columns in masks]
    else:
        observed, samples = batched
    return permutation_p(observed, samples, alternative, reference)


def permutation_p(observed: float, samples: Sequence[float], alternative: str = "two-sided",
                  reference: str = "nlpstats") -> float:
    """The permutation test's p-value from the observed difference and the permuted ones:
    hits / n (nlpstats) or (hits + 1) / (n + 1) (SacreROUGE; see the module)."""
    hits = sum(_is_hit(float(sample), observed, alternative) for sample in samples)
    if reference == "sacrerouge":
        return (hits + 1) / (len(samples) + 1)
    return hits / len(samples)


def bootstrap_difference_pvalue(X: Any, Y: Any, Z: Any, level: str, method: str, *,
                                resampling: str = "both", n_resamples: int = 1000,
                                alternative: str = "two-sided",
                                summary_undefined: str = "skip",
                                rng: np.random.Generator | None = None,
                                draws: Sequence | None = None) -> float:
    """The paired bootstrap test's p-value (see the module); `draws` (as
    `resampling.bootstrap_draws` gives) replaces `rng`."""
    X, Y, Z = check_matrices(X, Y, Z)
    check_choice(alternative, ALTERNATIVES, "alternative")
    if draws is None:
        if rng is None:
            raise SumbenchError("bootstrap_difference_pvalue needs a seeded generator (rng) "
                                "or draws")
        draws = bootstrap_draws(rng, X.shape, resampling, n_resamples)

    observed = correlate(X, Z, level, method, summary_undefined) - \
        correlate(Y, Z, level, method, summary_undefined)
    first, second = resampled_correlations([X, Y], Z, draws, level, method, summary_undefined)
    return bootstrap_difference_p(observed, first - second, alternative)


def bootstrap_difference_p(observed: float, samples: Sequence[float],
                           alternative: str = "two-sided") -> float:
    """The paired bootstrap test's p-value from the observed difference and the resampled
    ones (NaN left out): the share at least twice the observed (see the module)."""
    defined = [sample for sample in samples if not math.isnan(sample)]
    if not defined or math.isnan(observed):
        return math.nan
    return sum(_is_hit(sample, observed, alternative, 2.0) for sample in defined) / len(defined)


def partial_conjunction(pvalues: Sequence[float], alpha: float = 0.05
                        ) -> tuple[int, list[int]]:
    """How many of the datasets' p-values are significant under Holm's procedure at `alpha`,
    and their indices, smallest p-value first (SacreROUGE's Bonferroni partial conjunction)."""
    order = sorted(range(len(pvalues)), key=lambda i: (pvalues[i], i))
    running, count = 0.0, 0
    for rank, index in enumerate(order):
        running = max(running, (len(pvalues) - rank) * pvalues[index])
        if running <= alpha:
            count += 1
    return count, order[:count]


def significance_clusters(pvalues: np.ndarray, alpha: float = 0.05) -> list[int]:
    """1-based clusters of metrics sorted by decreasing correlation, from `pvalues[i, j]`
    (i < j: the p-value that metric i does not correlate better than metric j)."""
    pvalues = np.asarray(pvalues, dtype=float)
    if pvalues.ndim != 2 or pvalues.shape[0] != pvalues.shape[1]:
        raise SumbenchError(f"the p-values of a clustering form a square matrix, got shape "
                            f"{pvalues.shape}")
    clusters, current, start = [], 1, 0
    for i in range(pvalues.shape[0]):
        if any(pvalues[start:i, i] <= alpha):
            current, start = current + 1, i
        clusters.append(current)
    return clusters
