"""System- and summary-level correlations on hand-computed values."""
from __future__ import annotations

import math

import pytest

from tasks.metrics.correlation import correlation, per_example, summary_level, system_level
from tasks.plumbing.errors import SumbenchError

X = [1, 2, 3, 4, 5]
Y = [2, 4, 5, 4, 5]


def test_pearson_by_hand():
    # deviations (-2,-1,0,1,2) and (-2,0,1,0,1): 6 / sqrt(10 * 6)
    assert correlation(X, Y, "pearson") == pytest.approx(6 / math.sqrt(60), abs=1e-12)


def test_kendall_is_tau_b_by_hand():
    # 7 concordant, 1 discordant, 2 pairs tied in Y only, 10 pairs: (7-1)/sqrt(10*8)
    assert correlation(X, Y, "kendall") == pytest.approx(6 / math.sqrt(80), abs=1e-12)


def test_spearman_by_hand():
    # ranks of Y with ties averaged: (1, 2.5, 4.5, 2.5, 4.5): 7 / sqrt(10 * 9)
    assert correlation(X, Y, "spearman") == pytest.approx(7 / math.sqrt(90), abs=1e-12)


def test_undefined_correlations_are_nan():
    assert math.isnan(correlation([1, 1, 1], [1, 2, 3], "pearson"))
    assert math.isnan(correlation([1, 2, 3], [4, 4, 4], "kendall"))
    assert math.isnan(correlation([1], [2], "spearman"))


def test_unknown_method_and_length_mismatch():
    with pytest.raises(SumbenchError, match="unknown correlation method"):
        correlation(X, Y, "cosine")
    with pytest.raises(SumbenchError, match="lengths 2 and 3"):
        correlation([1, 2], [1, 2, 3], "pearson")


METRIC = {"A": [0.1, 0.5, 0.3], "B": [0.2, 0.2, 0.3], "C": [0.3, 0.1, 0.3]}
HUMAN = {"A": [0.0, 1.0, 0.5], "B": [0.5, 0.5, 0.5], "C": [1.0, 0.0, 0.5]}


def test_system_level_uses_per_system_means():
    # means: metric A .3, B .2333, C .2333; human A .5, B .5, C .5 -> human constant: nan
    assert math.isnan(system_level(METRIC, HUMAN, "pearson"))
    human = {"A": [1, 1, 1], "B": [0, 0, 0], "C": [0.5, 0.5, 0.5]}
    metric = {"A": [0.9, 0.9, 0.9], "B": [0.1, 0.2, 0.3], "C": [0.4, 0.5, 0.6]}
    assert system_level(metric, human, "kendall") == pytest.approx(1.0)
    assert system_level(metric, human, "pearson", systems=["A", "B"]) == pytest.approx(1.0)


def test_summary_level_counts_undefined_as_zero():
    # example 1: metric (.1,.2,.3) vs human (0,.5,1): r = 1; example 2: (.5,.2,.1) vs
    # (1,.5,0): r = 1 for Kendall; example 3: constant metric -> undefined -> 0.
    values = per_example(METRIC, HUMAN, "kendall")
    assert values[:2] == [pytest.approx(1.0), pytest.approx(1.0)] and math.isnan(values[2])
    assert summary_level(METRIC, HUMAN, "kendall") == pytest.approx(2 / 3)
    pearson_2 = correlation([0.5, 0.2, 0.1], [1.0, 0.5, 0.0], "pearson")
    assert summary_level(METRIC, HUMAN, "pearson") == pytest.approx((1 + pearson_2) / 3)


def test_misaligned_inputs_are_rejected():
    with pytest.raises(SumbenchError, match="systems without scores on both sides: C"):
        system_level({"A": [1], "B": [2]}, {"A": [1], "B": [2], "C": [3]}, "pearson")
    with pytest.raises(SumbenchError, match="not aligned"):
        summary_level({"A": [1, 2], "B": [2]}, {"A": [1, 2], "B": [2, 3]}, "pearson")
    with pytest.raises(SumbenchError, match="not all finite"):
        system_level({"A": [float("nan")], "B": [1]}, {"A": [1], "B": [2]}, "pearson")
