"""Lite²/³Pyramid features beyond the unweighted Pyramid score.

- Unit weights (Lite²Pyramid's `--weight`): a summary's score is sum(presence x weight) /
  sum(weight) over its reference units. `read_unit_weights` reads a file aligned with the
  units (one line per example, TAB-separated non-negative numbers, one per unit).
- A mix by example (`--units mix-by-example`; sumbench's own, not Lite²·⁵Pyramid's
  algorithm, which mixes by sentence: leaderboard.evaluators.pyramid.lite25 and `sumbench stus
  --scus`): a share of the examples keeps its human SCUs and the rest uses STUs; presence is
  decided by the same backend for both. Which examples keep SCUs: those whose STUs
  approximate their SCUs worst (lowest easiness recall: mean over SCUs of the best ROUGE-1 F1
  against any STU, rouge-score without stemming) — an oracle choice, since it reads the
  SCUs — or an explicit list of example ids. Lite²Pyramid's released
  `STUs_SCUs_percentage50.txt` files are read with `--units file --units-file`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_number_rows


def weighted_pyramid_score(presences: Sequence[float], weights: Sequence[float]) -> float:
    """sum(presence x weight) / sum(weight) of one summary's units; 0 without units, as
    Lite²Pyramid scores a summary none of whose units it saw."""
    if len(presences) != len(weights):
        raise SumbenchError(f"{len(weights)} weights for {len(presences)} units")
    if not presences:
        return 0.0
    total = sum(weights)
    if total <= 0:
        raise SumbenchError("the units' weights sum to 0")
    return sum(float(p) * w for p, w in zip(presences, weights)) / total


def read_unit_weights(path: str | Path, units: Sequence[Sequence[str]],
                      fractional: bool = False) -> list[list[float]]:
    """Per-example unit weights aligned with `units`; errors name the line and the count.
    Integers, read with `int()` as Lite²Pyramid.py reads its --weight file (then `.long()`);
    `fractional` also takes other numbers (not the official rule)."""
    weights = read_number_rows(
        path, [len(example_units) for example_units in units], what="weights file",
        lines_for="examples", parse=float if fractional else int,
        expected="TAB-separated numbers" if fractional else (
            "TAB-separated integers (Lite²Pyramid reads weights with int(); "
            "--fractional-weights takes other numbers)"),
        count_error=lambda found, wanted: f"{found} weights for {wanted} units")
    for number, row in enumerate(weights, start=1):
        if any(not math.isfinite(w) or w < 0 for w in row) or not sum(row) > 0:
            raise DataError("weights must be finite, non-negative and not all 0",
                            path=str(path), line=number)
    return weights


def easiness_recall(scus: Sequence[str], stus: Sequence[str]) -> float:
    """Mean over SCUs of the best ROUGE-1 F1 against any STU (0 without STUs)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"])
    if not scus:
        return 0.0
    return sum(max((scorer.score(scu, stu)["rouge1"].fmeasure for stu in stus), default=0.0)
               for scu in scus) / len(scus)


def scu_examples(ids: Sequence[str], scus, stus, share: float,
                 chosen_ids: Sequence[str] | None = None) -> set[str]:
    """Ids of the examples that keep their SCUs: the given ones, or the `share` of examples
    with the lowest easiness recall (ties by id order)."""
    if chosen_ids is not None:
        unknown = sorted(set(chosen_ids) - set(ids))
        if unknown:
            raise SumbenchError(f"unknown example ids in the SCU list: {', '.join(unknown[:5])}")
        return set(chosen_ids)
    if not 0.0 <= share <= 1.0:
        raise SumbenchError(f"--scu-share must be in [0, 1], got {share}")
    count = round(share * len(ids))
    ranked = sorted(range(len(ids)), key=lambda i: (easiness_recall(scus[i], stus[i]), i))
    return {ids[i] for i in ranked[:count]}


def mixed_units(ids: Sequence[str], scus, stus, keep_scus: set[str]) -> tuple:
    """Per example: its SCUs when its id is in `keep_scus`, else its STUs."""
    return tuple(tuple(scus[i]) if example_id in keep_scus else tuple(stus[i])
                 for i, example_id in enumerate(ids))
