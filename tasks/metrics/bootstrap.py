"""Percentile bootstrap confidence intervals over per-example items.

`items` are whatever a statistic aggregates (records, per-example scores, per-record label
pairs); resampling draws item indices with replacement from `numpy.random.default_rng(seed)`,
all at once, so the intervals depend only on the items, the statistic, `n_resamples` and `seed`.
A metric that is undefined on a resample (the statistic gives None for it, e.g. AUC with one
class) is left out of that metric's interval only and counted per metric; the other metrics
use every resample. A metric undefined on all resamples has the interval None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tasks.errors import SumbenchError
from tasks.metrics.classification import UNDEFINED_REASONS


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals per metric (None: undefined on every resample) and, per metric,
    on how many resamples it was undefined."""
    intervals: dict[str, list[float] | None]
    resamples: int
    undefined: dict[str, int]
    seed: int
    confidence: float


def resample_indices(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_items) indices drawn with replacement, in one draw (drawing in pieces
    would give other indices): 8 bytes per index, an error naming the size if they do not fit
    in memory."""
    if n_items < 1:
        raise ValueError("cannot bootstrap zero items")
    try:
        return np.random.default_rng(seed).integers(0, n_items, size=(n_resamples, n_items))
    except MemoryError:
        gib = n_resamples * n_items * 8 / 2 ** 30
        raise SumbenchError(f"{n_resamples} bootstrap resamples of {n_items} items need "
                            f"{gib:,.1f} GiB for their indices, more than this machine can "
                            f"give; use fewer resamples") from None


def percentile_interval(values: Sequence[float], confidence: float = 0.95) -> list[float]:
    """[low, high] percentiles enclosing `confidence` of the values."""
    tail = (100 - 100 * confidence) / 2
    low, high = np.percentile(np.asarray(values, dtype=float), [tail, 100 - tail])
    return [float(low), float(high)]


def bootstrap(items: Sequence[Any],
              statistic: Callable[[list], Mapping[str, float | None]], *,
              n_resamples: int, seed: int, confidence: float = 0.95,
              progress: Callable | None = None) -> BootstrapResult:
    """Percentile intervals of every key of `statistic` (but `UNDEFINED_REASONS`) over
    `n_resamples` resamples; a None value (undefined) is left out of its key's interval and
    counted in `undefined`."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    indices = resample_indices(len(items), n_resamples, seed)
    rows = progress(indices) if progress else indices
    values: dict[str, list[float]] = {}
    undefined: dict[str, int] = {}
    for row in rows:
        for key, value in statistic([items[i] for i in row]).items():
            if key == UNDEFINED_REASONS:
                continue
            series = values.setdefault(key, [])
            undefined.setdefault(key, 0)
            if value is None:
                undefined[key] += 1
            else:
                series.append(float(value))
    intervals = {key: percentile_interval(series, confidence) if series else None
                 for key, series in values.items()}
    return BootstrapResult(intervals, n_resamples, undefined, seed, confidence)
