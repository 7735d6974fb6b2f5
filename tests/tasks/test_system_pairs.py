"""Agreement on pairs of systems (tasks/metrics/system_pairs.py): pairwise accuracy and
Kendall's tau by band of the metric's score gap, by hand, against scipy's tau where no pair
ties, and bad input in one line."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tasks.metrics.system_pairs import delta_bands, pair_deltas, pairwise_accuracy
from tasks.plumbing.errors import SumbenchError


def test_pairs_by_hand():
    # pairs (0,1) (0,2) (0,3) (1,2) (1,3) (2,3): only (1,2) is ordered otherwise
    assert pairwise_accuracy([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(5 / 6)
    (band,) = delta_bands([1, 2, 3, 4], [1, 3, 2, 4], 1)
    assert (band["pairs"], band["kendall"]) == (6, pytest.approx(4 / 6))
    # ties: (0,1) tied on x only and (1,2) on z only agree with nothing
    assert pairwise_accuracy([1, 1, 2], [1, 2, 2]) == pytest.approx(1 / 3)
    assert delta_bands([1, 1, 2], [1, 2, 2], 1)[0]["kendall"] == pytest.approx(1 / 3)
    assert pairwise_accuracy([1, 1], [5, 5]) == 1.0   # tied on both sides: agreement


def test_bands_split_the_gaps_at_their_quantiles():
    # gaps 1, 3, 6, 2, 5, 3: the median 3 splits them; the pairs on the edge go above it
    bands = delta_bands([0, 1, 3, 6], [0, 1, 3, 6], 2)
    assert [(b["delta_low"], b["delta_high"], b["pairs"]) for b in bands] == [
        (1.0, 3.0, 2), (3.0, 6.0, 4)]
    assert all(b["kendall"] == 1.0 and b["pairwise_accuracy"] == 1.0 for b in bands)


def test_one_band_is_kendalls_tau_without_ties():
    rng = np.random.default_rng(3)
    x, z = rng.normal(size=15), rng.normal(size=15)
    (band,) = delta_bands(x, z, 1)
    assert band["kendall"] == pytest.approx(stats.kendalltau(x, z)[0], abs=1e-12)
    bands = delta_bands(x, z)
    assert len(bands) == 10 and sum(b["pairs"] for b in bands) == 105
    dx, dz = pair_deltas(x, z)
    closest = np.argsort(np.abs(dx))[:bands[0]["pairs"]]
    assert bands[0]["pairwise_accuracy"] == pytest.approx(
        np.mean(np.sign(dx[closest]) == np.sign(dz[closest])))


@pytest.mark.parametrize("x, z, n, message", [
    ([1, 2], [1, 2, 3], 10, "different shapes"),
    ([1], [1], 10, "at least 2 systems"),
    ([1, float("nan")], [1, 2], 10, "finite"),
    ([1, 2], [1, 2], 0, "positive integer"),
])
def test_bad_input_is_one_line(x, z, n, message):
    with pytest.raises(SumbenchError, match=message):
        delta_bands(x, z, n)
