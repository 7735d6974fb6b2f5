"""System-level statistics when the metric scored more inputs than the humans judged
(Deutsch, Dror and Roth 2022: a system's metric score is its mean over every test input, as
papers report it, while the humans judged a subset), as nlpstats 0.0.1 computes them with
`paired_inputs=False`.

X holds a metric's scores on every input (judged first, then the others), Z the humans' on
the judged ones: the same systems (rows), different inputs (columns); no NaN.
- `system_correlation`: the coefficient of X's and Z's row means.
- `unpaired_draws`: per resample the systems (shared), X's inputs and Z's inputs, each drawn
  independently (nlpstats' order: rows, then X's columns, then Z's).
- `resampled_system_correlations`: the system-level correlation of each metric on each
  resample, batched (tasks.metrics.correlation_bootstrap's sides and means).
- `unpaired_bootstrap_difference_pvalue`, `unpaired_permutation_pvalue`: the paired bootstrap
  and permutation tests between two metrics (X and Y share their inputs, Z is apart), as
  tasks.metrics.metric_tests defines them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tasks.metrics.correlation_bootstrap import CorrelationSide, resampled_system_means
from tasks.metrics.metric_tests import (
    bootstrap_difference_p,
    permutation_p,
    standardised,
    swapped,
)
from tasks.metrics.resampling import ALTERNATIVES, RESAMPLING, coefficient
from tasks.plumbing.errors import SumbenchError, check_choice

BATCH = 256


def check_unpaired(X: np.ndarray, Z: np.ndarray) -> None:
    if X.ndim != 2 or Z.ndim != 2 or X.shape[0] != Z.shape[0]:
        raise SumbenchError(f"unpaired matrices need the same systems (rows): {X.shape} and "
                            f"{Z.shape}")
    if np.isnan(X).any() or np.isnan(Z).any():
        raise SumbenchError("unpaired matrices must hold a score in every cell")


def system_correlation(X: np.ndarray, Z: np.ndarray, method: str) -> float:
    return coefficient(np.nanmean(X, axis=1), np.nanmean(Z, axis=1), method)


def unpaired_draws(rng: np.random.Generator, n_systems: int, n_metric_inputs: int,
                   n_human_inputs: int, resampling: str, n_resamples: int) -> list[tuple]:
    """(rows, metric columns, human columns) of each resample (None: kept whole)."""
    check_choice(resampling, RESAMPLING, "resampling")
    draws = []
    for _ in range(n_resamples):
        rows = rng.integers(0, n_systems, n_systems) if resampling != "inputs" else None
        if resampling == "systems":
            draws.append((rows, None, None))
            continue
        metric_columns = rng.integers(0, n_metric_inputs, n_metric_inputs)
        draws.append((rows, metric_columns, rng.integers(0, n_human_inputs, n_human_inputs)))
    return draws


def _arrays(draws: Sequence, n_systems: int, widths: tuple[int, int]):
    rows = np.array([np.arange(n_systems) if r is None else r for r, _, _ in draws],
                    dtype=np.intp).reshape(len(draws), n_systems)
    columns = [np.array([np.arange(width) if draw[side] is None else draw[side]
                         for draw in draws], dtype=np.intp).reshape(len(draws), width)
               for side, width in zip((1, 2), widths)]
    return rows, columns[0], columns[1]


def resampled_system_correlations(metrics: Sequence[np.ndarray], Z: np.ndarray,
                                  draws: Sequence, method: str, batch: int = BATCH
                                  ) -> np.ndarray:
    """(metrics x draws) system-level correlations on each unpaired resample."""
    arrays = [np.asarray(X, dtype=float) for X in metrics]
    Z = np.asarray(Z, dtype=float)
    for X in arrays:
        check_unpaired(X, Z)
    width = arrays[0].shape[1] if arrays else 0
    rows, metric_columns, human_columns = _arrays(draws, Z.shape[0], (width, Z.shape[1]))
    whole = all(draw[1] is None for draw in draws)
    found = np.empty((len(arrays), len(draws)))
    for start in range(0, len(draws), batch):
        part = slice(start, start + batch)
        human = CorrelationSide(resampled_system_means(Z, rows[part], human_columns[part],
                                                       whole), method)
        for index, X in enumerate(arrays):
            side = CorrelationSide(resampled_system_means(X, rows[part], metric_columns[part],
                                                          whole), method)
            found[index, part] = side.correlation(human)
    return found


def unpaired_bootstrap_difference_pvalue(X: np.ndarray, Y: np.ndarray, Z: np.ndarray,
                                         method: str, draws: Sequence,
                                         alternative: str = "two-sided") -> float:
    check_choice(alternative, ALTERNATIVES, "alternative")
    samples = resampled_system_correlations([X, Y], Z, draws, method)
    observed = system_correlation(X, Z, method) - system_correlation(Y, Z, method)
    return bootstrap_difference_p(observed, samples[0] - samples[1], alternative)


def unpaired_permutation_pvalue(X: np.ndarray, Y: np.ndarray, Z: np.ndarray, method: str,
                                masks: Sequence, alternative: str = "two-sided") -> float:
    """nlpstats' permutation test at system level: X and Y (same inputs) standardised and
    swapped by `masks` (tasks.metrics.metric_tests.permutation_masks), Z standardised apart;
    p = hits / n."""
    check_choice(alternative, ALTERNATIVES, "alternative")
    if X.shape != Y.shape:
        raise SumbenchError(f"two metrics of different shapes: {X.shape} and {Y.shape}")
    check_unpaired(X, Z)
    X, Y, Z = standardised(X), standardised(Y), standardised(Z)

    def difference(first: np.ndarray, second: np.ndarray) -> float:
        return system_correlation(first, Z, method) - system_correlation(second, Z, method)

    samples = [difference(*swapped(X, Y, rows, columns)) for rows, columns in masks]
    return permutation_p(difference(X, Y), samples, alternative)
