"""Krippendorff's alpha (nominal): textbook examples and an independent brute-force check."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tasks.metrics.agreement import (
    alpha_from_coincidences,
    coincidence_matrix,
    krippendorff_alpha_nominal,
    pairable_units,
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, missing values (None). Published: nominal alpha = 0.743; coincidences o11 = 7,
# o12 = 4/3, o22 = 10, o33 = 8, o44 = 4, o55 = 3, n = 40.
_ = None
TEXTBOOK = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
    [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
]
TEXTBOOK_UNITS = [[v for v in column if v is not None] for column in zip(*TEXTBOOK)]


def brute_force_alpha(units):
    """alpha = 1 - D_o / D_e by enumerating value pairs (no coincidence matrix).

    D_o: mismatching ordered pairs of values within a unit, each unit weighted 1/(m_u - 1),
    divided by n. D_e: mismatching ordered pairs among all n pairable values / (n (n - 1)).
    """
    pairable = [list(u) for u in units if len(u) >= 2]
    values = [v for u in pairable for v in u]
    n = len(values)
    observed = sum(sum(a != b for a, b in itertools.permutations(u, 2)) / (len(u) - 1)
                   for u in pairable) / n
    expected = sum(a != b for a, b in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - observed / expected


def test_textbook_nominal_example():
    alpha = krippendorff_alpha_nominal(TEXTBOOK_UNITS)
    assert round(alpha, 3) == 0.743
    assert alpha == pytest.approx(1 - 39 * (40 - 7 - 10 - 8 - 4 - 3) / (40 * 40 - sum(
        n * n for n in (9, 13, 10, 5, 3))), abs=1e-15)  # hand-worked: 1 - 39*8/1216 = 0.74342


def test_textbook_coincidence_matrix():
    matrix = coincidence_matrix(TEXTBOOK_UNITS)
    assert matrix[(1, 1)] == 7 and matrix[(2, 2)] == 10 and matrix[(3, 3)] == 8
    assert matrix[(4, 4)] == 4 and matrix[(5, 5)] == 3
    assert matrix[(1, 2)] == pytest.approx(4 / 3) and matrix[(2, 1)] == pytest.approx(4 / 3)
    assert sum(matrix.values()) == pytest.approx(40)  # n pairable values (unit 12 dropped)
    assert pairable_units(TEXTBOOK_UNITS) == 11


def test_textbook_binary_example():
    # Krippendorff (2011), section A: two observers, ten units, alpha = 0.095.
    a = [0, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]
    alpha = krippendorff_alpha_nominal(list(zip(a, b)))
    assert round(alpha, 3) == 0.095
    assert alpha == pytest.approx(1 - 19 * 8 / (2 * 14 * 6), abs=1e-15)  # o01 = o10 = 4


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_brute_force_on_random_votes(seed):
    rng = np.random.default_rng(seed)
    units = []
    for _ in range(60):
        size = int(rng.integers(1, 5))
        bias = rng.random()
        units.append([int(rng.random() < bias) for _ in range(size)])
    assert krippendorff_alpha_nominal(units) == pytest.approx(brute_force_alpha(units),
                                                              abs=1e-12)


def test_matches_brute_force_with_many_categories():
    rng = np.random.default_rng(7)
    units = [list(rng.integers(0, 4, size=int(rng.integers(2, 6)))) for _ in range(40)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(brute_force_alpha(units),
                                                              abs=1e-12)
    assert krippendorff_alpha_nominal(TEXTBOOK_UNITS) == pytest.approx(
        brute_force_alpha(TEXTBOOK_UNITS), abs=1e-12)


def test_perfect_agreement_and_undefined_cases():
    assert krippendorff_alpha_nominal([[0, 0, 0], [1, 1], [0, 0]]) == 1.0
    assert math.isnan(krippendorff_alpha_nominal([[1, 1], [1, 1, 1]]))  # no variation
    assert math.isnan(krippendorff_alpha_nominal([[1], [0]]))  # nothing pairable
    assert math.isnan(alpha_from_coincidences({}))


def test_single_value_units_do_not_change_alpha():
    with_singles = TEXTBOOK_UNITS + [[1], [5], [3]]
    assert krippendorff_alpha_nominal(with_singles) == krippendorff_alpha_nominal(
        TEXTBOOK_UNITS)


def test_systematic_disagreement_is_negative():
    assert krippendorff_alpha_nominal([[0, 1], [1, 0], [0, 1], [1, 0]]) < 0
