"""Percentile bootstrap confidence intervals over per-example items.

`items` are whatever a statistic aggregates (records, per-example scores, per-record label
pairs); resampling draws item indices with replacement from `numpy.random.default_rng(seed)`
(in blocks that give exactly the indices of one draw), so the intervals depend only on the
items, the statistic, `n_resamples` and `seed`.
A metric that is undefined on a resample (the statistic gives None for it, e.g. AUC with one
class) is left out of that metric's interval only and counted per metric; the other metrics
use every resample. A metric undefined on all resamples has the interval None.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.metrics.classification import UNDEFINED_REASONS
from tasks.plumbing.errors import SumbenchError


@dataclass(frozen=True)
class BootstrapResult:
    """Percentile intervals per metric (None: undefined on every resample) and, per metric,
    on how many resamples it was undefined."""
    intervals: dict[str, list[float] | None]
    resamples: int
    undefined: dict[str, int]
    seed: int
    confidence: float


#: indices drawn per block of resamples (8 bytes each, 32 MiB): memory stays bounded
BLOCK_INDICES = 1 << 22


def resample_indices(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_items) indices drawn with replacement from
    `numpy.random.default_rng(seed)`: 8 bytes per index, all in memory (`resample_rows`
    gives the same rows in bounded memory)."""
    rows = list(resample_rows(n_items, n_resamples, seed))
    return np.stack(rows) if rows else np.empty((0, n_items), dtype=np.int64)


def resample_rows(n_items: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """The rows of `resample_indices` one at a time, drawn BLOCK_INDICES indices at a time.
    A Generator's `integers` continues one stream of random numbers, so drawing in blocks
    gives exactly the indices of one draw of the whole (n_resamples, n_items) array (tested
    against it), and published intervals do not change."""
    if n_items < 1:
        raise ValueError("cannot bootstrap zero items")
    rng = np.random.default_rng(seed)
    rows_per_block = max(1, BLOCK_INDICES // n_items)
    for start in range(0, n_resamples, rows_per_block):
        yield from _draw(rng, n_items, min(rows_per_block, n_resamples - start))


def _draw(rng: np.random.Generator, n_items: int, n_rows: int) -> np.ndarray:
    try:
        return rng.integers(0, n_items, size=(n_rows, n_items))
    except MemoryError:
        gib = n_rows * n_items * 8 / 2 ** 30
        raise SumbenchError(f"bootstrap resamples of {n_items} items need {gib:,.1f} GiB for "
                            f"the indices of {n_rows} resample(s), more than this machine can "
                            f"give") from None


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
    indices = resample_rows(len(items), n_resamples, seed)
    rows = progress(indices, n_resamples) if progress else indices
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
