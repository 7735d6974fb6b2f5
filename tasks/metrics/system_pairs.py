"""System-level agreement on pairs of systems (Deutsch, Dror and Roth 2022, "Re-Examining
System-Level Correlations"; mt-metrics-eval's pairwise accuracy): how well a metric orders
systems whose scores are close, which is what a leaderboard asks of it.

For systems i < j with metric means x and human means z, Δx = x_i − x_j and Δz = z_i − z_j.
- `pairwise_accuracy`: the share of pairs with sign(Δx) = sign(Δz) (a pair tied on both
  sides agrees; tied on one side only, it does not).
- `delta_bands`: the pairs split into `n_bands` bands of |Δx| at its quantiles (deciles by
  default; a pair on an edge goes to the band above it, the largest gap to the last band),
  and per band Kendall's τ over its pairs, (concordant − discordant) / pairs (a pair tied on
  either side counts as neither), and its pairwise accuracy. The first band holds the
  closest systems: the paper's finding is that ROUGE's τ there is near 0.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from tasks.plumbing.errors import SumbenchError


def pair_deltas(x: Sequence[float], z: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(Δx, Δz) over every pair i < j of systems, in `itertools.combinations` order."""
    x, z = np.asarray(x, dtype=float), np.asarray(z, dtype=float)
    if x.shape != z.shape or x.ndim != 1:
        raise SumbenchError(f"system scores of different shapes: {x.shape} and {z.shape}")
    if len(x) < 2:
        raise SumbenchError(f"pairs of systems need at least 2 systems, got {len(x)}")
    if not (np.isfinite(x).all() and np.isfinite(z).all()):
        raise SumbenchError("system scores must be finite numbers")
    first, second = (np.array(side, dtype=np.intp)
                     for side in zip(*itertools.combinations(range(len(x)), 2)))
    return x[first] - x[second], z[first] - z[second]


def _agreement(dx: np.ndarray, dz: np.ndarray) -> dict:
    if not dx.size:
        return {"pairs": 0, "kendall": math.nan, "pairwise_accuracy": math.nan}
    product = np.sign(dx) * np.sign(dz)
    return {"pairs": int(dx.size), "kendall": float(product.sum() / dx.size),
            "pairwise_accuracy": float(np.mean(np.sign(dx) == np.sign(dz)))}


def pairwise_accuracy(x: Sequence[float], z: Sequence[float]) -> float:
    """The share of system pairs the metric orders as the humans do (see the module)."""
    return _agreement(*pair_deltas(x, z))["pairwise_accuracy"]


def delta_bands(x: Sequence[float], z: Sequence[float], n_bands: int = 10) -> list[dict]:
    """Per band of the metric's gap |Δx| (closest first): its gap range, pairs, Kendall's τ
    and pairwise accuracy (see the module)."""
    if not isinstance(n_bands, int) or n_bands < 1:
        raise SumbenchError(f"the number of bands must be a positive integer, got {n_bands!r}")
    dx, dz = pair_deltas(x, z)
    gaps = np.abs(dx)
    edges = np.quantile(gaps, np.linspace(0.0, 1.0, n_bands + 1))
    band_of = np.minimum(np.searchsorted(edges[1:-1], gaps, side="right"), n_bands - 1)
    return [{"band": band + 1, "delta_low": float(edges[band]),
             "delta_high": float(edges[band + 1]),
             **_agreement(dx[band_of == band], dz[band_of == band])}
            for band in range(n_bands)]
