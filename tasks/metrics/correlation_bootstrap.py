"""Bootstrap intervals of correlations, and the correlations of many metrics over many
resamples at once (`resampled_correlations`): what `resampling.correlate` gives resample by
resample, computed with array operations (system and summary levels of matrices without NaN;
anything else goes resample by resample).

`bootstrap_interval`: the percentile interval of a level's correlation over resamples of the
systems, the inputs or both (`resampling.bootstrap_draws`); resamples whose correlation is
undefined are left out, as nlpstats leaves them out.

For a batch of resamples the human side is prepared once (its centred values, its ranks or
the signs of its pairwise differences) and each metric is correlated with it in turn, so the
memory in use does not grow with the number of metrics:
- Pearson: the centred products over the norms; a constant side gives NaN (as scipy does).
- Spearman: Pearson of the average ranks (scipy's `rankdata`).
- Kendall tau-b: (Σ sign(Δx)·sign(Δy)) / √((n0 − ties_x)(n0 − ties_y)) over the n0 pairs
  of systems, ties counted on each side (scipy's `kendalltau`, variant b).
System level correlates the resampled systems' means over the resampled inputs; summary level
correlates every resampled input's column across the resampled systems and averages them as
`correlate` does (`summary_undefined`: skip or count undefined columns as 0).
Values equal `correlate`'s up to floating-point rounding (1e-12).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.metrics.resampling import (
    bootstrap_draws,
    check_confidence,
    check_matrices,
    correlate,
)
from tasks.plumbing.errors import SumbenchError

#: resamples per batch (memory: batch x systems² x inputs for Kendall's summary level)
BATCH = 64


def _draw_arrays(draws: Sequence, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) index arrays of every draw, None replaced by the whole axis."""
    m, n = shape
    rows = np.array([np.arange(m) if r is None else r for r, _ in draws], dtype=np.intp)
    columns = np.array([np.arange(n) if c is None else c for _, c in draws], dtype=np.intp)
    return rows.reshape(len(draws), m), columns.reshape(len(draws), n)


class CorrelationSide:
    """One side of a correlation along axis 1 of `values` (batch x systems [x inputs]),
    prepared for `method`."""

    def __init__(self, values: np.ndarray, method: str):
        from scipy.stats import rankdata

        self.method = method
        if method == "kendall":
            first, second = zip(*itertools.combinations(range(values.shape[1]), 2))
            self.signs = np.sign(values[:, list(first)] - values[:, list(second)])
            self.untied = np.count_nonzero(self.signs, axis=1)
        else:
            if method == "spearman":
                values = rankdata(values, axis=1)
            centred = values - values.mean(axis=1, keepdims=True)
            self.centred = centred
            self.norm = np.sqrt((centred ** 2).sum(axis=1))

    def correlation(self, other: CorrelationSide) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.method == "kendall":
                concordance = (self.signs * other.signs).sum(axis=1)
                return concordance / np.sqrt(self.untied * other.untied)
            r = (self.centred * other.centred).sum(axis=1) / (self.norm * other.norm)
        return np.clip(r, -1.0, 1.0)


def _summary_mean(per_column: np.ndarray, summary_undefined: str) -> np.ndarray:
    """The mean over inputs (axis 1) of per-column correlations, as `correlate` averages."""
    defined = ~np.isnan(per_column)
    if summary_undefined == "zero":
        return np.where(defined, per_column, 0.0).mean(axis=1)
    counts = defined.sum(axis=1)
    with np.errstate(invalid="ignore"):
        return np.where(counts > 0, np.where(defined, per_column, 0.0).sum(axis=1)
                        / np.maximum(counts, 1), np.nan)


def resampled_correlations(metrics: Sequence[np.ndarray], Z: np.ndarray, draws: Sequence,
                           level: str, method: str, summary_undefined: str = "skip",
                           batch: int = BATCH) -> np.ndarray:
    """(metrics x draws) correlations of each metric's matrix with Z on each resample (NaN
    where undefined)."""
    arrays = [np.asarray(matrix, dtype=float) for matrix in metrics]
    Z = np.asarray(Z, dtype=float)
    if level not in ("system", "summary") or any(np.isnan(a).any() for a in [Z, *arrays]):
        return np.array([[correlate(_taken(X, r, c), _taken(Z, r, c), level, method,
                                    summary_undefined) for r, c in draws] for X in arrays])
    rows, columns = _draw_arrays(draws, Z.shape)
    whole_rows = all(c is None for _, c in draws)
    found = np.empty((len(arrays), len(draws)))
    for start in range(0, len(draws), batch):
        part = slice(start, start + batch)
        sides = _resampled_sides(level, method, rows[part], columns[part], whole_rows)
        human = sides(Z)
        for index, X in enumerate(arrays):
            r = sides(X).correlation(human)
            found[index, part] = r if level == "system" else _summary_mean(r, summary_undefined)
    return found


def swap_cells(masks: Sequence, shape: tuple[int, int]) -> np.ndarray:
    """(permutations x systems x inputs) booleans: the cells each permutation swaps. Rows
    then columns swapped (nlpstats' "both") swap a cell when exactly one of its row and
    column is; a two-dimensional mask swaps its own cells."""
    m, n = shape
    found = np.zeros((len(masks), m, n), dtype=bool)
    for index, (rows, columns) in enumerate(masks):
        if rows is not None and np.ndim(rows) == 2:
            found[index] = rows
            continue
        row_swap = np.zeros(m, dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
        column_swap = np.zeros(n, dtype=bool) if columns is None else \
            np.asarray(columns, dtype=bool)
        found[index] = row_swap[:, None] ^ column_swap[None, :]
    return found


def permuted_differences(X: np.ndarray, Y: np.ndarray, Z: np.ndarray, masks: Sequence,
                         level: str, method: str, summary_undefined: str = "skip",
                         batch: int = BATCH) -> tuple[float, np.ndarray] | None:
    """(r(X, Z) − r(Y, Z), the same difference after each permutation's swaps), batched;
    None where only the resample-by-resample loop computes it (global level, NaN)."""
    if level not in ("system", "summary") or any(np.isnan(a).any() for a in (X, Y, Z)):
        return None
    human = CorrelationSide(np.nanmean(Z, axis=1)[None] if level == "system" else Z[None], method)

    def differences(swaps: np.ndarray) -> np.ndarray:
        first, second = np.where(swaps, Y, X), np.where(swaps, X, Y)
        values = []
        for matrix in (first, second):
            side = CorrelationSide(matrix.mean(axis=2) if level == "system" else matrix, method)
            r = side.correlation(human)
            values.append(r if level == "system" else _summary_mean(r, summary_undefined))
        return values[0] - values[1]

    observed = float(differences(np.zeros((1, *X.shape), dtype=bool))[0])
    swaps = swap_cells(masks, X.shape)
    found = np.concatenate([differences(swaps[start:start + batch])
                            for start in range(0, len(masks), batch)]) if len(masks) else \
        np.empty(0)
    return observed, found


def _resampled_sides(level: str, method: str, rows: np.ndarray, columns: np.ndarray,
                     whole_rows: bool):
    """matrix -> its `CorrelationSide` on a batch of resamples: the systems' means (system level) or
    the resampled matrix (summary level)."""
    if level == "system":
        return lambda matrix: CorrelationSide(
            resampled_system_means(matrix, rows, columns, whole_rows), method)
    picked = (rows[:, :, None], columns[:, None, :])
    return lambda matrix: CorrelationSide(matrix[picked], method)


def resampled_system_means(matrix: np.ndarray, rows: np.ndarray, columns: np.ndarray,
                           whole_rows: bool) -> np.ndarray:
    """(batch x systems) means of the resampled systems over the resampled inputs, summed in
    the order `np.nanmean` sums a resampled matrix: a whole row pairwise (its mean taken
    once), inputs picked by index one after the other (the picked matrix is strided), so
    that ties between systems' means, which Kendall and Spearman see, are the same."""
    if whole_rows:
        return np.nanmean(matrix, axis=1)[rows]
    picked = matrix.T[columns[:, :, None], rows[:, None, :]]     # batch x inputs x systems
    return np.add.reduce(np.moveaxis(picked, 1, 0), axis=0) / matrix.shape[1]


def _taken(matrix: np.ndarray, rows, columns) -> np.ndarray:
    if rows is not None:
        matrix = matrix[rows]
    return matrix if columns is None else matrix[:, columns]


def interval_of_defined(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of the defined samples ((nan, nan) when none is), computed as
    nlpstats computes it (tasks.metrics.bootstrap.percentile_interval is the per-example
    scores' interval)."""
    kept = samples[~np.isnan(samples)]
    if not kept.size:
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    return float(np.percentile(kept, alpha * 100)), float(np.percentile(kept, (1 - alpha) * 100))


def bootstrap_interval(X: Any, Z: Any, level: str, method: str, *,
                       resampling: str = "both", n_resamples: int = 1000,
                       confidence: float = 0.95, summary_undefined: str = "skip",
                       rng: np.random.Generator | None = None,
                       draws: Sequence | None = None) -> dict:
    """The percentile interval of the level's correlation over resamples (see the module):
    {"lower", "upper", "samples"}; `draws` (as `bootstrap_draws` gives) replaces `rng`."""
    X, Z = check_matrices(X, Z)
    check_confidence(confidence)
    if draws is None:
        if rng is None:
            raise SumbenchError("bootstrap_interval needs a seeded generator (rng) or draws")
        draws = bootstrap_draws(rng, X.shape, resampling, n_resamples)
    samples = resampled_correlations([X], Z, draws, level, method, summary_undefined)[0]
    lower, upper = interval_of_defined(samples, confidence)
    return {"lower": lower, "upper": upper,
            "samples": [float(r) for r in samples if not math.isnan(r)]}
