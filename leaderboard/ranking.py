"""Ranking that deserves trust: bootstrap distributions, intervals, paired tests, rank bands.

Every entry of a board is scored on the same hidden test items, kept in gold order, so the same
index means the same item for every entry. For each part of a board (a task, or a dataset) the
board draws ONE set of resample indices from `numpy.random.default_rng(seed)`
(`tasks.metrics.bootstrap.resample_rows`) and every entry's headline is computed on every
resample: the entry's bootstrap *distribution* for that part. Since all entries share the
indices, the difference of two distributions, resample by resample, is a paired bootstrap of
the difference: comparing two entries costs a vector subtraction, and a board of 1,000 entries
is ranked without re-scoring anything. An entry's cost is paid once, when it is scored:
`n_resamples` aggregations per part.

Rules (also shown on the pages, see `aggregate_rule` and `band_rule`):
- aggregate: the mean of the part headlines; only entries with a defined headline for every
  part of the board are ranked, the others are listed apart and never ranked as if 0;
- interval: percentile interval of the distribution (undefined resamples left out);
- paired test: two-sided bootstrap p-value of the difference,
  p = min(1, 2 * min(P*(d <= 0), P*(d >= 0))); significant when p < alpha;
- rank bands (`bands="adjacent"`, the default): entries sorted by aggregate (ties by entry id);
  the first entry opens band 1 and each next entry opens a new band only when it differs
  significantly from the entry directly above it. `bands="clusters"` (the evaluators board):
  every pair of entries is tested with the paired bootstrap test of SacreROUGE (the share of
  resampled differences at least twice the observed one), the p-values Holm-corrected
  together, and the bands are mt-metrics-eval's clusters: an entry opens a new band when it
  is significantly worse than any entry of the current band
  (tasks.metrics.metric_tests.significance_clusters). An entry without distributions (its
  analysis pending, or one whose per-item material may not be published: a laddered entry)
  is ranked by its points, with no interval and no band; the entries with distributions are
  compared with the nearest such entry above them.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from tasks.metrics.bootstrap import resample_rows
from tasks.metrics.metric_tests import bootstrap_difference_p, significance_clusters
from tasks.metrics.resampling import holm

#: material sample (per-example items of one part) -> headline (x100), None when undefined
Statistic = Callable[[Sequence[Any]], "float | None"]
DEFAULT_RESAMPLES = 1000
DEFAULT_ALPHA = 0.05
CONFIDENCE = 0.95


def headline_statistic(task) -> Statistic:
    """A task's headline from its per-record material (`task.score_examples` items)."""
    def statistic(sample: Sequence[Any]) -> float | None:
        value = task.headline(task.aggregate_scores(list(sample)))
        return None if value is None else float(value)
    return statistic


def mean_statistic(scale: float = 100.0) -> Statistic:
    """The mean of numeric per-example scores, times `scale`."""
    def statistic(sample: Sequence[Any]) -> float | None:
        return float(np.mean(np.asarray(sample, dtype=float))) * scale if len(sample) else None
    return statistic


def bootstrap_distribution(material: Sequence[Any], statistic: Statistic, *,
                           n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """The statistic on each of `n_resamples` resamples (NaN where it is undefined)."""
    values = np.empty(n_resamples, dtype=float)
    for row, sample_indices in enumerate(resample_rows(len(material), n_resamples, seed)):
        value = statistic([material[i] for i in sample_indices])
        values[row] = np.nan if value is None else value
    return values


def interval(values: np.ndarray, confidence: float = CONFIDENCE) -> list[float] | None:
    """Percentile interval of the defined values; None when none is defined."""
    defined = np.asarray(values, dtype=float)
    defined = defined[~np.isnan(defined)]
    if not defined.size:
        return None
    tail = (100 - 100 * confidence) / 2
    low, high = np.percentile(defined, [tail, 100 - tail])
    return [float(low), float(high)]


def intervals(rows: Sequence[np.ndarray], confidence: float = CONFIDENCE
              ) -> list[list[float] | None]:
    """`interval` of each row: rows of one length without NaN in one numpy call (numpy's
    percentile along an axis computes each row as it computes one alone: the same numbers),
    the others one by one. A board of 1,000 entries: 10,000 rows."""
    tail = (100 - 100 * confidence) / 2
    arrays = [np.asarray(row, dtype=float) for row in rows]
    found: list[list[float] | None] = [None] * len(arrays)
    by_length: dict[int, list[int]] = {}
    for index, values in enumerate(arrays):
        if values.ndim == 1 and values.size and not np.isnan(values).any():
            by_length.setdefault(values.size, []).append(index)
        else:
            found[index] = interval(values, confidence)
    for indices in by_length.values():
        bounds = np.percentile(np.stack([arrays[i] for i in indices]), [tail, 100 - tail],
                               axis=1)
        for column, index in enumerate(indices):
            found[index] = [float(bounds[0, column]), float(bounds[1, column])]
    return found


def mean_of(points: Mapping[str, float | None], parts: Sequence[str]) -> float | None:
    """The aggregate: the mean of the parts' values; None when one is missing or undefined."""
    values = [points.get(part) for part in parts]
    if not values or any(value is None for value in values):
        return None
    return float(np.mean(values))


def mean_distribution(distributions: Mapping[str, np.ndarray],
                      parts: Sequence[str]) -> np.ndarray:
    """Resample-wise mean over the parts (NaN where any part is undefined)."""
    return np.mean(np.stack([np.asarray(distributions[part], dtype=float) for part in parts]),
                   axis=0)


@dataclass(frozen=True)
class PairedComparison:
    """A paired bootstrap comparison of entries a and b on one scope (a part or "mean")."""
    scope: str
    a: float | None
    b: float | None
    diff: float | None
    ci95: list[float] | None
    p_value: float | None
    significant: bool
    n_resamples: int
    alpha: float

    def to_dict(self) -> dict:
        return asdict(self)


def paired_p_value(differences: np.ndarray) -> float | None:
    """Two-sided paired-bootstrap p-value of H0 "no difference" (NaN resamples left out)."""
    defined = differences[~np.isnan(differences)]
    if not defined.size:
        return None
    below, above = float(np.mean(defined <= 0)), float(np.mean(defined >= 0))
    return min(1.0, 2.0 * min(below, above))


def compare(scope: str, point_a: float | None, point_b: float | None,
            distribution_a: np.ndarray, distribution_b: np.ndarray, *,
            alpha: float = DEFAULT_ALPHA) -> PairedComparison:
    """Paired comparison from two distributions drawn with the same resample indices."""
    if len(distribution_a) != len(distribution_b):
        raise ValueError("distributions of different resample counts cannot be paired")
    differences = np.asarray(distribution_a, dtype=float) - np.asarray(distribution_b,
                                                                       dtype=float)
    diff = None if point_a is None or point_b is None else point_a - point_b
    p_value = paired_p_value(differences) if diff is not None else None
    return PairedComparison(scope, point_a, point_b, diff,
                            interval(differences) if diff is not None else None, p_value,
                            p_value is not None and p_value < alpha, len(differences), alpha)


@dataclass(frozen=True)
class BoardEntry:
    """What ranking needs of an entry: point headlines and distributions per part."""
    entry_id: int | str  # ties rank in id order: the service gives submission numbers
    points: Mapping[str, float | None]
    distributions: Mapping[str, np.ndarray]

    def covers(self, parts: Sequence[str]) -> bool:
        return all(self.points.get(part) is not None for part in parts)

    def tested(self, parts: Sequence[str]) -> bool:
        """Whether the entry has a distribution for every part (it gets intervals, a band)."""
        return all(part in self.distributions for part in parts)

    def aggregate(self, parts: Sequence[str]) -> tuple[float | None, np.ndarray | None]:
        return mean_of(self.points, parts), (mean_distribution(self.distributions, parts)
                                             if self.tested(parts) else None)


@dataclass(frozen=True)
class RankedEntry:
    entry_id: int | str
    score: float
    ci95: list[float] | None
    rank: int
    band: int | None
    versus_above: PairedComparison | None
    above_id: int | str | None = None  # the entry `versus_above` compares with

    def to_dict(self) -> dict:
        data = asdict(self)
        data["versus_above"] = None if self.versus_above is None else self.versus_above.to_dict()
        return data


BAND_METHODS = ("adjacent", "clusters")


def rank_entries(entries: Sequence[BoardEntry], parts: Sequence[str], *,
                 alpha: float = DEFAULT_ALPHA, bands: str = "adjacent"
                 ) -> tuple[list[RankedEntry], list[str]]:
    """(complete entries ranked best first with intervals and bands where they have
    distributions, ids of the others); `bands`: see the module."""
    complete = [entry for entry in entries if entry.covers(parts)]
    partial = [entry.entry_id for entry in entries if not entry.covers(parts)]
    aggregates = {entry.entry_id: entry.aggregate(parts) for entry in complete}
    order = sorted(complete, key=lambda entry: (-aggregates[entry.entry_id][0], entry.entry_id))
    ranked: list[RankedEntry] = []
    above: RankedEntry | None = None  # the nearest entry above with distributions
    for position, entry in enumerate(order, start=1):
        score, distribution = aggregates[entry.entry_id]
        if distribution is None:
            ranked.append(RankedEntry(entry.entry_id, score, None, position, None, None))
            continue
        band, versus = 1, None
        if above is not None:
            above_score, above_distribution = aggregates[above.entry_id]
            versus = compare("mean", above_score, score, above_distribution, distribution,
                             alpha=alpha)
            band = above.band + 1 if versus.significant else above.band
        above = RankedEntry(entry.entry_id, score, interval(distribution), position, band,
                            versus, None if above is None else above.entry_id)
        ranked.append(above)
    if bands == "clusters":
        ranked = _with_cluster_bands(ranked, aggregates, alpha)
    return ranked, partial


def cluster_bands(points: Sequence[float], distributions: Sequence[np.ndarray],
                  alpha: float = DEFAULT_ALPHA) -> list[int]:
    """The bands of entries sorted best first (`bands="clusters"`, see the module)."""
    pairs = [(i, j) for i in range(len(points)) for j in range(i + 1, len(points))]
    pvalues = [bootstrap_difference_p(points[i] - points[j],
                                      np.asarray(distributions[i]) - np.asarray(distributions[j]))
               for i, j in pairs]
    adjusted = holm([1.0 if np.isnan(p) else p for p in pvalues])
    square = np.ones((len(points), len(points)))
    for (i, j), p in zip(pairs, adjusted):
        square[i, j] = p
    return significance_clusters(square, alpha)


def _with_cluster_bands(ranked: list[RankedEntry], aggregates: Mapping, alpha: float
                        ) -> list[RankedEntry]:
    tested = [row for row in ranked if row.band is not None]
    bands = cluster_bands([row.score for row in tested],
                          [aggregates[row.entry_id][1] for row in tested], alpha)
    band_of = {row.entry_id: band for row, band in zip(tested, bands)}
    return [replace(row, band=band_of[row.entry_id]) if row.entry_id in band_of else row
            for row in ranked]


def per_part_ranks(points: Mapping[str, Mapping[str, float | None]]) -> dict[str, dict[str, int]]:
    """entry -> part -> 1-based rank among entries with a defined value for that part
    (higher is better; equal values share the better rank)."""
    ranks: dict[str, dict[str, int]] = {entry: {} for entry in points}
    parts = sorted({part for values in points.values() for part in values})
    for part in parts:
        values = {entry: values[part] for entry, values in points.items()
                  if values.get(part) is not None}
        ordered = sorted(value for value in values.values() if value == value)  # not NaN
        for entry, value in values.items():  # 1 + how many are higher (none above a NaN)
            ranks[entry][part] = 1 + (len(ordered) - bisect.bisect_right(ordered, value)
                                      if value == value else 0)
    return ranks


def aggregate_rule(parts: Sequence[str], part_kind: str = "task") -> str:
    return (f"Aggregate = mean of the {len(parts)} {part_kind} headlines. Only entries with a "
            f"defined headline for every {part_kind} are ranked; partial entries are listed "
            f"apart with — for what they lack and are never ranked as if they scored 0.")


def cluster_band_rule(n_resamples: int, alpha: float, seed: int, resampled: str) -> str:
    return (f"Rank bands are significance clusters (mt-metrics-eval's AssignRanks): entries in "
            f"order of their scores, an entry opens a new band when it is significantly worse "
            f"than any entry of the current band. Tests: SacreROUGE's paired bootstrap test "
            f"({n_resamples} resamples of {resampled}, seed {seed}, two-sided), "
            f"Holm-corrected over every pair of entries, alpha {alpha}. Intervals are 95% "
            f"percentile bootstrap intervals over the same resamples.")


def band_rule(n_resamples: int, alpha: float, seed: int) -> str:
    return (f"Rank bands: an entry shares the band of the entry directly above it unless a "
            f"paired bootstrap test ({n_resamples} resamples of the test items, seed {seed}, "
            f"two-sided, alpha {alpha}) finds their aggregates significantly different. "
            f"Intervals are 95% percentile bootstrap intervals over the same resamples.")
