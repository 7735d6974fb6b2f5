"""Krippendorff's alpha for nominal data, from the coincidence matrix (Krippendorff 2011,
"Computing Krippendorff's Alpha-Reliability").

Input: one sequence of values per unit (the values the coders gave it; missing values are simply
absent). Units with fewer than two values are not pairable and are ignored.

    o[c][k] = sum over units u of (number of ordered pairs of values (c, k) from different coders
              in u) / (m_u - 1)
    n_c     = sum_k o[c][k],  n = sum_c n_c  (the number of pairable values)
    alpha   = 1 - (n - 1) * sum_{c != k} o[c][k] / sum_{c != k} n_c * n_k

alpha is 1 for perfect agreement and 0 for chance agreement; it is undefined (nan) when no
unit is pairable or all pairable values fall into one category (no variation).
"""
from __future__ import annotations

import collections
import math
from collections.abc import Hashable, Iterable, Sequence


def coincidence_matrix(units: Iterable[Sequence[Hashable]]
                       ) -> dict[tuple[Hashable, Hashable], float]:
    """o[(c, k)] over the pairable units (those with at least two values)."""
    matrix: dict[tuple[Hashable, Hashable], float] = collections.defaultdict(float)
    for values in units:
        m = len(values)
        if m < 2:
            continue
        counts = collections.Counter(values)
        for c, n_c in counts.items():
            for k, n_k in counts.items():
                pairs = n_c * (n_c - 1) if c == k else n_c * n_k
                if pairs:
                    matrix[(c, k)] += pairs / (m - 1)
    return dict(matrix)


def alpha_from_coincidences(matrix: dict[tuple[Hashable, Hashable], float]) -> float:
    """Nominal alpha from a coincidence matrix (nan when undefined)."""
    marginals: dict[Hashable, float] = collections.defaultdict(float)
    for (c, _), value in matrix.items():
        marginals[c] += value
    n = sum(marginals.values())
    expected = sum(n_c * n_k for c, n_c in marginals.items()
                   for k, n_k in marginals.items() if c != k)
    if n <= 1 or expected == 0:
        return math.nan
    observed = sum(value for (c, k), value in matrix.items() if c != k)
    return 1.0 - (n - 1) * observed / expected


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable]]) -> float:
    """Krippendorff's alpha (nominal metric) over units given as sequences of values."""
    return alpha_from_coincidences(coincidence_matrix(units))


def pairable_units(units: Iterable[Sequence[Hashable]]) -> int:
    """How many units have at least two values (the units alpha is computed over)."""
    return sum(1 for values in units if len(values) >= 2)
