"""Track "evaluators": a metric's per-summary scores, ranked by agreement with humans.

One board per loaded Pyramid set. A submission is one JSON line per (system, example) of the
set's human-judged systems: `{"dataset": "realsumm", "system": "...", "id": "...", "score":
0.42}` (a finite number). It is meta-evaluated against the human Pyramid scores (share of SCUs
labelled present) with Kendall tau-b, Pearson and Spearman at system level (correlation of
per-system means) and summary level (per example across systems, averaged; undefined counted
as 0), as `sumbench meta-eval` does. The headline is the system-level Kendall tau x100.
Intervals and rank bands resample systems and examples together (`boot-both`: with 10 to 25
systems, the systems matter as much as the examples), every entry with the same draws
(`[seed, 0, 0]`, tasks.metrics.resampling.bootstrap_draws), computed in batches
(tasks.metrics.correlation_bootstrap); the bands are significance clusters of Holm-corrected
paired bootstrap tests (leaderboard.ranking, `bands="clusters"`), as `sumbench meta-eval
--test boot-both --correction holm` forms them.
Built-in rows (computed here): ROUGE-1/2/L recall and lexical Pyramid over SCUs, STUs, reference
sentences and (when the set has them) QA units.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from leaderboard.evaluators.pyramid.presence import LexicalBackend
from leaderboard.evaluators.pyramid.scoring import evaluate_system
from leaderboard.ranking import cluster_band_rule
from leaderboard.tracks.base import PartScore
from leaderboard.tracks.pyramid_gold import PyramidSetTrack, human_pyramid
from tasks.metrics.correlation import METHODS, correlation, summary_level, system_level
from tasks.metrics.correlation_bootstrap import resampled_correlations
from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.metrics.resampling import bootstrap_draws
from tasks.qapyramid.pyramid_data import sentence_units

LEVELS = ("system", "summary")
HEADLINE = ("system", "kendall")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def correlations(metric: Mapping[str, Sequence[float]],
                 human: Mapping[str, Sequence[float]]) -> dict[str, float | None]:
    """{"system_kendall", ..., "summary_spearman"}: None where undefined."""
    result = {}
    for method in METHODS:
        for level, function in (("system", system_level), ("summary", summary_level)):
            value = function(metric, human, method)
            result[f"{level}_{method}"] = None if math.isnan(value) else value
    return result


def system_kendall_statistic(sample: Sequence[Mapping]) -> float | None:
    """System-level Kendall tau x100 of a resample of examples (material items hold the
    metric's and the humans' scores of every system on one example)."""
    metric = np.mean([item["metric"] for item in sample], axis=0)
    human = np.mean([item["human"] for item in sample], axis=0)
    value = correlation(metric.tolist(), human.tolist(), "kendall")
    return None if math.isnan(value) else 100.0 * value


class EvaluatorsTrack(PyramidSetTrack):
    name = "evaluators"
    title = "Evaluators: agreement with human Pyramid judgments"
    description = ("A metric's per-summary scores for the human-judged systems, ranked by "
                   "system-level Kendall tau with human Pyramid scores.")
    submission_fields = ("dataset", "system", "id", "score")
    id_fields = ("system", "id")
    value_field = "score"
    headline_bounds = (-100.0, 100.0)  # Kendall tau x100
    band_method = "clusters"
    #: 2: boot-both distributions and cluster bands (version 1 resampled examples only)
    version = "2"

    def manifest_items(self, payload: Mapping) -> list[dict]:
        return [{"system": system, "id": example_id} for system in sorted(payload["labels"])
                for example_id in payload["ids"]]

    def value_problem(self, value) -> str | None:
        return None if _number(value) else f"expected a finite number, got {value!r}"

    def score(self, checked, gold, board: str) -> dict[str, PartScore]:
        payload = gold[board][board]
        metric = scores_by_system(checked[board])
        human = human_pyramid(payload)
        systems = sorted(metric)
        result = correlations(metric, {s: human[s] for s in systems})
        headline = result["system_kendall"]
        result.update(headline=None if headline is None else 100.0 * headline,
                      n_systems=len(systems), n_examples=len(payload["ids"]))
        material = [{"metric": [metric[s][i] for s in systems],
                     "human": [human[s][i] for s in systems]}
                    for i in range(len(payload["ids"]))]
        return {board: PartScore(result, result["headline"], material)}

    def statistic(self, part: str, gold, board: str):
        return system_kendall_statistic

    def distribution(self, part: str, gold, board: str, material: Sequence, *,
                     n_resamples: int, seed: int) -> np.ndarray:
        """System-level Kendall tau x100 on `boot-both` resamples of the systems and the
        examples (the same draws for every entry of the board)."""
        X = np.array([item["metric"] for item in material], dtype=float).T
        Z = np.array([item["human"] for item in material], dtype=float).T
        draws = bootstrap_draws(np.random.default_rng([seed, 0, 0]), Z.shape, "both",
                                n_resamples)
        return 100.0 * resampled_correlations([X], Z, draws, "system", "kendall")[0]

    def band_rule(self, n_resamples: int, alpha: float, seed: int) -> str:
        return cluster_band_rule(n_resamples, alpha, seed, "the systems and the examples")

    def headline_name(self, part: str) -> str:
        return "system_kendall"


def scores_by_system(records: Sequence[Mapping]) -> dict[str, list[float]]:
    """system -> scores in record order (records are in manifest order)."""
    by_system: dict[str, list[float]] = {}
    for record in records:
        by_system.setdefault(record["system"], []).append(float(record["score"]))
    return by_system


def builtin_metric_records(payload: Mapping) -> dict[str, list[dict]]:
    """Submission records of the built-in evaluators for one set: name -> lines."""
    systems = sorted(payload["labels"])
    summaries = {system: payload["summaries"][system] for system in systems}
    per_metric: dict[str, dict[str, list[float]]] = {}
    recall = rouge_recall_by_system(summaries, payload["references"], list(RECALL_METRICS))
    per_metric.update({name.replace("_", "-"): scores for name, scores in recall.items()})
    units = {kind: payload["units"][kind] for kind in ("scus", "stus", "qas")
             if kind in payload["units"]}
    units["sentences"] = sentence_units(payload["references"])
    lexical = LexicalBackend(payload["lexical_threshold"])
    for kind, unit_lists in units.items():
        per_metric[f"lexical-pyramid-{kind}"] = {
            system: list(evaluate_system(system, summaries[system], unit_lists,
                                         lexical).per_example) for system in systems}
    return {name: [{"dataset": payload["name"], "system": system, "id": example_id,
                    "score": scores[system][index]}
                   for system in systems for index, example_id in enumerate(payload["ids"])]
            for name, scores in per_metric.items()}
