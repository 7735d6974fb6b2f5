"""`sumbench meta-eval --unjudged-inputs FILE`: metric scores on test inputs the humans did not
judge, for the system level of Deutsch, Dror and Roth (2022): a system's metric score is its
mean over every input (judged and unjudged), the humans' over the judged ones
(tasks.metrics.unpaired).

FILE is JSON `{metric label: {system: [score per unjudged input]}}`: every `--metric` (its
label as the tables show it) and every system of the run, the same number of inputs for
all, finite numbers. Summary and global levels keep the judged inputs only. Intervals and
tests at system level resample the systems together and each side's inputs apart (nlpstats'
`paired_inputs=False`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from leaderboard.meta_eval import MetricScores, score_matrix
from tasks.metrics.resampling import coefficient
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json

#: the permutation tests that have an unpaired form (nlpstats')
UNPAIRED_PERMUTATIONS = ("perm-systems", "perm-inputs", "perm-both")


def read_unjudged(path: str, metrics: Sequence[MetricScores], systems: Sequence[str]
                  ) -> dict[str, np.ndarray]:
    """{label: systems x unjudged inputs}, checked (a one-line DataError naming the field)."""
    data = read_json(path, what="--unjudged-inputs file")
    if not isinstance(data, dict):
        raise DataError("expected {metric label: {system: [scores]}}", path=path)
    found, width = {}, None
    for metric in metrics:
        if metric.per_example is None:
            raise SumbenchError(f"--metric {metric.label} has one value per system: it has no "
                                f"inputs to add unjudged ones to")
        scores = data.get(metric.label)
        if not isinstance(scores, dict):
            raise DataError(f"no unjudged scores for --metric {metric.label} (labels given: "
                            f"{', '.join(map(str, data)) or 'none'})", path=path,
                            field=metric.label)
        rows = []
        for system in systems:
            values = scores.get(system)
            field = f"{metric.label}.{system}"
            if not isinstance(values, list) or not values:
                raise DataError("expected a non-empty list of scores", path=path, field=field)
            if width is not None and len(values) != width:
                raise DataError(f"{len(values)} scores; the others have {width}", path=path,
                                field=field)
            width = len(values)
            rows.append([_finite(value, path, f"{field}[{i}]") for i, value in
                         enumerate(values)])
        found[metric.label] = np.array(rows, dtype=float)
    return found


def _finite(value, path: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value):
        raise DataError(f"expected a finite number, got {value!r}", path=path, field=field)
    return float(value)


def all_inputs(metric: MetricScores, systems: Sequence[str], unjudged: np.ndarray
               ) -> np.ndarray:
    """The metric's matrix over every input: the judged ones, then the unjudged ones."""
    return np.hstack([score_matrix(metric.per_example, systems), unjudged])


def with_unjudged_system_level(results: dict, metrics: Sequence[MetricScores],
                               human: Mapping[str, Sequence[float]],
                               unjudged: Mapping[str, np.ndarray],
                               systems: Sequence[str]) -> dict:
    """`compare`'s results with each group's system level computed from every input."""
    human_means = {s: float(np.mean(human[s])) for s in systems}
    for metric in metrics:
        means = dict(zip(systems, all_inputs(metric, systems, unjudged[metric.label])
                         .mean(axis=1)))
        for entry in results[metric.label].values():
            members = entry["systems"]
            entry["system"] = {method: coefficient(np.array([means[s] for s in members]),
                                                   np.array([human_means[s] for s in members]),
                                                   method) for method in entry["system"]}
    return results
