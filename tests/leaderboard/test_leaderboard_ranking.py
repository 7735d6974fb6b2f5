"""leaderboard.ranking: shared-resample distributions, intervals, paired tests, rank bands."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.ranking import (
    BoardEntry,
    bootstrap_distribution,
    compare,
    headline_statistic,
    interval,
    mean_distribution,
    mean_of,
    mean_statistic,
    paired_p_value,
    per_part_ranks,
    rank_entries,
)
from tasks import get_task
from tasks.metrics.bootstrap import resample_indices
from tasks.plumbing.io import read_jsonl
from tasks.scoring import score_files


def test_distribution_is_the_statistic_on_each_shared_resample():
    material = [0.0, 1.0, 1.0, 0.0, 1.0]
    values = bootstrap_distribution(material, mean_statistic(), n_resamples=50, seed=3)
    rows = resample_indices(len(material), 50, 3)
    expected = [100 * np.mean([material[i] for i in row]) for row in rows]
    assert values.tolist() == pytest.approx(expected, abs=1e-12)
    again = bootstrap_distribution(material, mean_statistic(), n_resamples=50, seed=3)
    assert (values == again).all()


def test_undefined_resamples_are_nan_and_left_out_of_intervals():
    def statistic(sample):
        return None if len(set(sample)) == 1 else 1.0
    values = bootstrap_distribution([0, 1], statistic, n_resamples=40, seed=0)
    assert np.isnan(values).any() and not np.isnan(values).all()
    assert interval(values) == [1.0, 1.0]
    assert interval(np.array([np.nan, np.nan])) is None


def test_headline_statistic_equals_sumbench_score(usb_fixture_dir):
    path = usb_fixture_dir / "predictions" / "factuality_classification.jsonl"
    task = get_task("FAC")
    material = task.score_examples(read_jsonl(path))
    expected = score_files([path])["factuality_classification"]["headline"]
    assert headline_statistic(task)(material) == expected


def test_identical_entries_share_a_band_and_have_p_one():
    distribution = bootstrap_distribution([0.2, 0.9, 0.4, 0.7], mean_statistic(),
                                          n_resamples=200, seed=0)
    result = compare("mean", 55.0, 55.0, distribution, distribution)
    assert result.diff == 0.0 and result.p_value == 1.0 and not result.significant
    assert result.ci95 == [0.0, 0.0]


def test_paired_test_detects_a_consistently_better_entry():
    rng = np.random.default_rng(0)
    base = rng.random(60)
    better = np.clip(base + 0.2, 0, 1)
    dist_a = bootstrap_distribution(list(better), mean_statistic(), n_resamples=300, seed=1)
    dist_b = bootstrap_distribution(list(base), mean_statistic(), n_resamples=300, seed=1)
    result = compare("mean", 100 * better.mean(), 100 * base.mean(), dist_a, dist_b)
    assert result.significant and result.p_value == 0.0 and result.ci95[0] > 0
    # the same pair drawn with different seeds is not paired: refused only on length
    with pytest.raises(ValueError):
        compare("mean", 1.0, 1.0, dist_a, dist_b[:10])


def test_paired_p_value_by_hand():
    assert paired_p_value(np.array([1.0, 2.0, -1.0, 3.0])) == pytest.approx(0.5)
    assert paired_p_value(np.array([1.0, 2.0, 3.0, 4.0])) == 0.0
    assert paired_p_value(np.array([np.nan])) is None


def test_mean_of_and_mean_distribution():
    assert mean_of({"a": 10.0, "b": 20.0}, ["a", "b"]) == 15.0
    assert mean_of({"a": 10.0, "b": None}, ["a", "b"]) is None
    assert mean_of({"a": 10.0}, ["a", "b"]) is None
    stacked = mean_distribution({"a": np.array([1.0, 3.0]), "b": np.array([3.0, np.nan])},
                                ["a", "b"])
    assert stacked[0] == 2.0 and np.isnan(stacked[1])


def _entry(name, points, shift=0.0, n=200):
    rng = np.random.default_rng(7)
    return BoardEntry(name, points, {part: np.full(n, value) + shift + rng.normal(0, 0.01, n)
                                     for part, value in points.items() if value is not None})


def test_rank_bands_partial_entries_and_ties():
    entries = [_entry("low", {"x": 10.0, "y": 10.0}), _entry("top", {"x": 90.0, "y": 90.0}),
               _entry("top-twin", {"x": 90.0, "y": 90.0}),
               _entry("partial", {"x": 99.0, "y": None}), _entry("missing", {"x": 99.0})]
    ranked, partial = rank_entries(entries, ["x", "y"])
    assert [r.entry_id for r in ranked] == ["top", "top-twin", "low"]  # ties by id
    assert [r.rank for r in ranked] == [1, 2, 3]
    assert [r.band for r in ranked] == [1, 1, 2]
    assert ranked[0].versus_above is None and not ranked[1].versus_above.significant
    assert ranked[2].versus_above.significant
    assert sorted(partial) == ["missing", "partial"]
    assert ranked[0].score == 90.0 and ranked[0].ci95[0] < 90.1 < ranked[0].ci95[1] + 0.1


def test_board_ties_rank_the_earlier_submission_first():
    """Submission 9 and 10 score the same: 9 ranks first (compared as text, "10" < "9")."""
    from leaderboard.service.boards import rank_board

    rng = np.random.default_rng(0)
    shared = {"x": 50.0 + rng.normal(0, 1, 100)}
    entries = [{"id": number, "score_id": number, "headlines": {"x": 50.0}}
               for number in (10, 9, 11)]
    ranked, partial = rank_board(entries, {n: shared for n in (9, 10, 11)}, ["x"], alpha=0.05)
    assert [e["id"] for e in ranked] == [9, 10, 11] and [e["rank"] for e in ranked] == [1, 2, 3]
    assert partial == [] and all(e["analysis"] == "done" for e in ranked)
    assert {e["id"]: e["part_ranks"] for e in ranked} == {9: {"x": 1}, 10: {"x": 1}, 11: {"x": 1}}


def test_per_part_ranks_share_ties_and_skip_undefined():
    ranks = per_part_ranks({"a": {"x": 5.0, "y": None}, "b": {"x": 5.0, "y": 1.0},
                            "c": {"x": 7.0}})
    assert ranks == {"a": {"x": 2}, "b": {"x": 2, "y": 1}, "c": {"x": 1}}


def test_per_part_ranks_equal_counting_the_higher_values_in_linear_log_time():
    """Ranks are 1 + how many defined values are higher (a NaN is never higher, and none is
    higher than it), found by sorting: counting pairs took 1 s of a 1,000-entry board's
    1.5 s rebuild, under the database's write lock."""
    import math

    rng = np.random.default_rng(3)
    values = [float(v) for v in rng.integers(0, 40, 300)] + [math.nan, math.nan]
    points = {f"e{i}": {"x": value, "y": None if i % 7 == 0 else -value}
              for i, value in enumerate(values)}
    expected = {entry: {part: 1 + sum(other[part] is not None and other[part] > value[part]
                                      for other in points.values())
                        for part in value if value[part] is not None}
                for entry, value in points.items()}
    assert per_part_ranks(points) == expected
    assert per_part_ranks({"nan": {"x": math.nan}, "one": {"x": 1.0}}) == {
        "nan": {"x": 1}, "one": {"x": 1}}


def test_intervals_of_many_rows_equal_each_row_alone():
    """One numpy call for the rows of one length (a 1,000-entry board's 10,000 intervals took
    half a second one by one); NaN and empty rows one by one: the same numbers exactly."""
    from leaderboard.ranking import interval, intervals

    rng = np.random.default_rng(5)
    rows = [rng.normal(size=size) * 40 for size in (100, 100, 100, 37, 1, 100)]
    rows += [np.array([np.nan, 1.0, 2.0, 3.0]), np.array([np.nan]), np.array([])]
    rows.append(rows[0].round(1))  # ties
    assert intervals(rows) == [interval(row) for row in rows]
    assert intervals(rows)[-4:-1] == [[1.05, 2.95], None, None] and intervals([]) == []


def test_cluster_bands_test_every_entry_against_the_current_band():
    """Entries 1 > 2 > 3: 2 ties 1 and 3 ties 2 (their resampled differences often reach twice
    the observed one), but 3 is significantly worse than 1 (their difference never moves):
    adjacent tests chain 3 into 1's band through 2; clusters put 3 in a band of its own."""
    from leaderboard.ranking import cluster_bands

    wobble = np.array([3.0] * 4 + [0.0] * 6)         # d12 = 1 + 3 = 4 on 4 of 10 resamples
    first, second, third = 10.0 + wobble, 9.0 + 0 * wobble, 8.0 + wobble
    # p12 = share |d| >= 2: 0.4; p23 = share |2 - d12| >= 2: 0.4; p13 = 0 (d13 is always 2)
    assert cluster_bands([10.0, 9.0, 8.0], [first, second, third]) == [1, 1, 2]
    entries = [BoardEntry(n, {"x": point}, {"x": values})
               for n, point, values in ((1, 10.0, first), (2, 9.0, second), (3, 8.0, third))]
    ranked, _ = rank_entries(entries, ["x"], bands="clusters")
    assert [row.band for row in ranked] == [1, 1, 2]
    assert ranked[2].versus_above is not None and ranked[2].above_id == 2
    loose, _ = rank_entries(entries, ["x"], alpha=0.01, bands="clusters")
    assert [row.band for row in loose] == [1, 1, 2]      # Holm: p13 = 0 stays significant
    assert cluster_bands([10.0, 9.0], [first, first - 1]) == [1, 2]
