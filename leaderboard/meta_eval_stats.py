"""Intervals and tests of `sumbench meta-eval` (`--ci`, `--test`, `--correction`): the
statistics of tasks.metrics.resampling over the metrics' and the humans' score matrices
(systems x examples, the systems in the run's order).

- Intervals, per metric, level (system, summary, global) and method: `fisher` (Fisher's
  z), or a percentile bootstrap over the systems, the inputs or both (`boot-systems`,
  `boot-inputs`, `boot-both`). Every metric is resampled with the same draws (one
  generator seeded with `[--seed, level, method]`), so their intervals are paired, and a
  level and method's draws do not depend on what else is asked for.
- Tests, for every pair of metrics, level and method, the pair ordered by decreasing
  correlation (a tests "a correlates better than b" under `--alternative greater`): a
  permutation test (`perm-systems`, `perm-inputs`, `perm-both`: rows then columns swapped,
  nlpstats' test; `perm-cells`: single cells swapped, SacreROUGE's "permutation-both" and its
  (hits + 1) / (n + 1)), SacreROUGE's paired bootstrap test (`boot-systems`, `boot-inputs`,
  `boot-both`) or Williams' test; the p-values of a level and method are adjusted together
  (`holm`, `bonferroni`, `none`), and the adjusted ones cluster the metrics as
  mt-metrics-eval's `AssignRanks` does at `--significance` (tasks.metrics.metric_tests).
- A metric with one value per system (a per-system score file) has the system level only,
  and only Fisher intervals and Williams' test there (nothing to resample by input).
- With unjudged inputs (leaderboard.meta_eval_unjudged) the system level takes every input
  the metrics scored, and its statistics resample each side's inputs apart
  (tasks.metrics.unpaired).
- `delta_band_rows`: τ and pairwise accuracy by band of the system-score gap
  (tasks.metrics.system_pairs).

Every number is recorded with how it was made: the method, resamples, confidence and seed.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leaderboard.meta_eval import ALL_LEVELS, MetricScores, render_table, score_matrix
from tasks.metrics.correlation import METHODS
from tasks.metrics.correlation_bootstrap import interval_of_defined, resampled_correlations
from tasks.metrics.metric_tests import (
    bootstrap_difference_pvalue,
    permutation_masks,
    permutation_pvalue,
    significance_clusters,
)
from tasks.metrics.resampling import (
    bonferroni,
    bootstrap_draws,
    correlate,
    fisher_interval,
    holm,
    williams_pvalue,
)
from tasks.metrics.system_pairs import delta_bands, pairwise_accuracy
from tasks.metrics.unpaired import (
    resampled_system_correlations,
    system_correlation,
    unpaired_bootstrap_difference_pvalue,
    unpaired_draws,
    unpaired_permutation_pvalue,
)
from tasks.plumbing.errors import SumbenchError, check_choice

CI_METHODS = ("boot-systems", "boot-inputs", "boot-both", "fisher", "none")
TESTS = ("perm-both", "perm-systems", "perm-inputs", "perm-cells", "boot-both",
         "boot-systems", "boot-inputs", "williams", "none")
CORRECTIONS = ("holm", "bonferroni", "none")
LEVELS = ("system", "summary")
#: meta-eval's summary-level rules the resampling statistics take
RESAMPLED_RULES = ("zero", "skip")


def check_statistics(ci: str, test: str, correction: str, rule: str,
                     metrics: Sequence[MetricScores], alpha: float = 0.05,
                     n_systems: int | None = None, unjudged: bool = False) -> None:
    """Refuse (one line) what cannot be computed: a rule the statistics do not resample, a
    resampled statistic of a per-system metric, a test with fewer than two metrics, Williams'
    test with 3 systems or fewer, a constant metric."""
    check_choice(ci, CI_METHODS, "--ci")
    check_choice(test, TESTS, "--test")
    check_choice(correction, CORRECTIONS, "--correction")
    if not 0 < alpha < 1:
        raise SumbenchError(f"--significance must be between 0 and 1, got {alpha}")
    if (ci, test) == ("none", "none"):
        return
    if rule not in RESAMPLED_RULES:
        raise SumbenchError(f"--summary-undefined {rule}: intervals and tests take zero or "
                            f"skip (the lite-pyramid perturbation depends on the systems' "
                            f"order, which resampling changes)")
    per_system = [m.label for m in metrics if m.per_example is None]
    if per_system and (ci.startswith("boot") or test not in ("williams", "none")):
        raise SumbenchError(f"--metric {per_system[0]} has one value per system: use --ci "
                            f"fisher and --test williams (nothing to resample by input)")
    if test != "none" and len(metrics) < 2:
        raise SumbenchError(f"--test {test} compares metrics: give two --metric or more")
    if unjudged and test == "perm-cells":
        raise SumbenchError("--test perm-cells swaps single cells, which needs the metrics "
                            "and the humans on the same inputs: with --unjudged-inputs use "
                            "perm-systems, perm-inputs, perm-both, boot-* or williams")
    if test == "williams" and n_systems is not None and n_systems <= 3:
        raise SumbenchError(f"--test williams needs more than 3 systems (n - 3 degrees of "
                            f"freedom); the data has {n_systems}")
    for metric in metrics:
        values = {float(v) for scores in (metric.per_example or {}).values() for v in scores} \
            if metric.per_example is not None else set(map(float, metric.per_system.values()))
        if len(values) == 1:
            raise SumbenchError(f"--metric {metric.label} is constant (every score is "
                                f"{values.pop():g}): its correlations are undefined")


@dataclass(frozen=True)
class Study:
    """What the statistics are computed on: the metrics' and the humans' matrices (systems x
    examples, in `systems` order), the levels and methods asked for, the summary-level rule.
    A metric with one value per system makes every matrix one column of system means, and
    the study the system level only."""
    metrics: Sequence[MetricScores]
    human: Mapping[str, Sequence[float]]
    systems: Sequence[str]
    methods: Sequence[str]
    levels: Sequence[str] = LEVELS
    rule: str = "zero"
    #: {label: systems x unjudged inputs} (leaderboard.meta_eval_unjudged), or None
    unjudged: Mapping[str, np.ndarray] | None = None

    @property
    def per_system(self) -> bool:
        return any(m.per_example is None for m in self.metrics)

    @functools.cached_property
    def Z(self) -> np.ndarray:
        Z = score_matrix(self.human, self.systems)
        return Z.mean(axis=1, keepdims=True) if self.per_system else Z

    @functools.cached_property
    def matrices(self) -> dict[str, np.ndarray]:
        if self.per_system:
            return {m.label: np.array([[float(m.means()[s])] for s in self.systems])
                    for m in self.metrics}
        return {m.label: score_matrix(m.per_example, self.systems) for m in self.metrics}

    def unpaired(self, level: str) -> bool:
        """Whether `level` takes the unjudged inputs (the system level, when given)."""
        return level == "system" and self.unjudged is not None

    @functools.cached_property
    def full(self) -> dict[str, np.ndarray]:
        """{label: the metric over every input, judged then unjudged}."""
        return {label: np.hstack([X, self.unjudged[label]])
                for label, X in self.matrices.items()}

    def cells(self):
        """(level, method, the seed key of their draws): each level and method's draws come
        from `[seed, level's index, method's index]` in ALL_LEVELS and METHODS, whatever
        else is asked for."""
        levels = ("system",) if self.per_system else tuple(self.levels)
        for level, method in itertools.product(levels, self.methods):
            yield level, method, (ALL_LEVELS.index(level), METHODS.index(method))


def observed(study: Study) -> dict[str, Any]:
    """{label: {level: {method: r}}}: the correlations the intervals and tests are about."""
    found: dict[str, dict] = {label: {} for label in study.matrices}
    for level, method, _ in study.cells():
        for label, X in study.matrices.items():
            found[label].setdefault(level, {})[method] = \
                system_correlation(study.full[label], study.Z, method) \
                if study.unpaired(level) else correlate(X, study.Z, level, method, study.rule)
    return found


def intervals(study: Study, *, ci: str, confidence: float, n_resamples: int,
              seed: int) -> dict[str, Any]:
    """{label: {level: {method: [lower, upper]}}} and how they were made; every metric of a
    level and method resampled with the same draws (tasks.metrics.bootstrap, batched)."""
    found: dict[str, dict] = {label: {} for label in study.matrices}
    labels = list(study.matrices)
    for level, method, key in study.cells():
        if study.unpaired(level):
            bounds = _unpaired_intervals(study, method, key, ci=ci, confidence=confidence,
                                         n_resamples=n_resamples, seed=seed)
        elif ci == "fisher":
            bounds = [fisher_interval(study.matrices[label], study.Z, level, method,
                                      confidence, study.rule) for label in labels]
        else:
            draws = bootstrap_draws(np.random.default_rng([seed, *key]), study.Z.shape,
                                    ci.removeprefix("boot-"), n_resamples)
            samples = resampled_correlations([study.matrices[label] for label in labels],
                                             study.Z, draws, level, method, study.rule)
            bounds = [interval_of_defined(row, confidence) for row in samples]
        for label, bound in zip(labels, bounds):
            found[label].setdefault(level, {})[method] = list(bound)
    made = {"method": ci, "confidence": confidence, "summary_undefined": study.rule,
            **_unjudged_record(study)}
    if ci.startswith("boot"):
        made.update(n_resamples=n_resamples, seed=seed, percentile=True,
                    draws="the same resamples for every metric of a level and method, "
                          "seeded [seed, level, method]")
    return {"intervals": found, **made}


def _means_column(matrix: np.ndarray) -> np.ndarray:
    return matrix.mean(axis=1, keepdims=True)


def _unpaired_intervals(study: Study, method: str, key, *, ci: str, confidence: float,
                        n_resamples: int, seed: int) -> list:
    """System-level intervals over every input (tasks.metrics.unpaired)."""
    labels = list(study.matrices)
    if ci == "fisher":
        return [fisher_interval(_means_column(study.full[label]), _means_column(study.Z),
                                "system", method, confidence) for label in labels]
    draws = _unpaired_draws(study, ci.removeprefix("boot-"), seed, key, n_resamples)
    samples = resampled_system_correlations([study.full[label] for label in labels], study.Z,
                                            draws, method)
    return [interval_of_defined(row, confidence) for row in samples]


def _unpaired_draws(study: Study, kind: str, seed: int, key, n_resamples: int) -> list:
    width = next(iter(study.full.values())).shape[1]
    return unpaired_draws(np.random.default_rng([seed, *key]), study.Z.shape[0], width,
                          study.Z.shape[1], kind, n_resamples)


def _unpaired_test_draws(study: Study, test: str, seed: int, key, n_resamples: int):
    """The seeded resamples of an unpaired level and method's tests (one set for every pair):
    unpaired bootstrap draws or permutation masks over the metrics' inputs."""
    if test.startswith("boot"):
        return _unpaired_draws(study, test.removeprefix("boot-"), seed, key, n_resamples)
    if test.startswith("perm"):
        return permutation_masks(np.random.default_rng([seed, *key]),
                                 next(iter(study.full.values())).shape,
                                 test.removeprefix("perm-"), n_resamples)
    return None


def _unpaired_pvalue(test: str, X, Y, Z, method: str, draws, alternative: str) -> float:
    if test == "williams":
        return williams_pvalue(_means_column(X), _means_column(Y), _means_column(Z), "system",
                               method, alternative)
    if test.startswith("boot"):
        return unpaired_bootstrap_difference_pvalue(X, Y, Z, method, draws, alternative)
    return unpaired_permutation_pvalue(X, Y, Z, method, draws, alternative)


def _unjudged_record(study: Study) -> dict:
    if study.unjudged is None:
        return {}
    return {"unjudged_inputs": int(next(iter(study.unjudged.values())).shape[1]),
            "system_level": "metric means over judged and unjudged inputs, each side's "
                            "inputs resampled apart (nlpstats paired_inputs=False)"}


def _draws(test: str, seed: int, key: tuple[int, int], shape, n_resamples: int):
    """The seeded resamples of a level and method: permutation masks or bootstrap draws."""
    rng = np.random.default_rng([seed, *key])
    kind = test.split("-", 1)[-1]
    if test.startswith("perm"):
        return permutation_masks(rng, shape, kind, n_resamples)
    return bootstrap_draws(rng, shape, kind, n_resamples) if test.startswith("boot") else None


def _pvalue(test: str, X, Y, Z, level: str, method: str, draws, alternative: str,
            rule: str) -> float:
    if test == "williams":
        return williams_pvalue(X, Y, Z, level, method, alternative)
    if test.startswith("boot"):
        return bootstrap_difference_pvalue(X, Y, Z, level, method, alternative=alternative,
                                           summary_undefined=rule, draws=draws)
    return permutation_pvalue(X, Y, Z, level, method, alternative=alternative,
                              summary_undefined=rule, masks=draws,
                              reference="sacrerouge" if test == "perm-cells" else "nlpstats")


def pairwise_tests(study: Study, *, test: str, correction: str, alternative: str,
                   n_resamples: int, seed: int, alpha: float = 0.05) -> dict[str, Any]:
    """Every pair (a, b) of metrics per level and method, a correlating at least as well as b:
    p that they correlate equally with the humans, adjusted within the level and method, and
    each metric's cluster there."""
    found, matrices, Z = observed(study), study.matrices, study.Z
    rows, clusters = [], {}
    for level, method, key in study.cells():
        ranked = sorted(matrices, key=lambda label: -_sortable(found[label][level][method]))
        pairs = list(itertools.combinations(ranked, 2))
        if study.unpaired(level):
            draws = _unpaired_test_draws(study, test, seed, key, n_resamples)
            pvalues = [_unpaired_pvalue(test, study.full[a], study.full[b], Z, method, draws,
                                        alternative) for a, b in pairs]
        else:
            draws = _draws(test, seed, key, Z.shape, n_resamples)
            pvalues = [_pvalue(test, matrices[a], matrices[b], Z, level, method, draws,
                               alternative, study.rule) for a, b in pairs]
        adjusted = {"holm": holm, "bonferroni": bonferroni,
                    "none": list}[correction](pvalues)
        rows += [{"a": a, "b": b, "level": level, "method": method, "p": p,
                  "p_adjusted": q} for (a, b), p, q in zip(pairs, pvalues, adjusted)]
        square = np.ones((len(ranked), len(ranked)))
        for (a, b), q in zip(pairs, adjusted):
            square[ranked.index(a), ranked.index(b)] = q
        for label, cluster in zip(ranked, significance_clusters(square, alpha)):
            clusters.setdefault(label, {}).setdefault(level, {})[method] = cluster
    made = {"test": test, "alternative": alternative, "correction": correction,
            "summary_undefined": study.rule, "alpha": alpha, **_unjudged_record(study),
            "clusters_by": "mt-metrics-eval AssignRanks on the adjusted p-values"}
    if test != "williams":
        made.update(n_resamples=n_resamples, seed=seed)
    if test.startswith("perm"):
        made.update(standardised=True, reference="sacrerouge" if test == "perm-cells"
                    else "nlpstats")
    return {"pairs": rows, "clusters": clusters, **made}


def _sortable(value: float) -> float:
    return -math.inf if value is None or math.isnan(value) else value


def delta_band_rows(study: Study, n_bands: int) -> dict[str, Any]:
    """Per metric, Kendall's τ and pairwise accuracy by band of its system-score gap
    (tasks.metrics.system_pairs), and how they were made."""
    human = study.Z.mean(axis=1)
    matrices = study.full if study.unjudged is not None else study.matrices
    means = {label: X.mean(axis=1) for label, X in matrices.items()}
    found = {label: delta_bands(values, human, n_bands) for label, values in means.items()}
    accuracy = {label: pairwise_accuracy(values, human) for label, values in means.items()}
    return {"bands": found, "pairwise_accuracy": accuracy, "n_bands": n_bands,
            "level": "system", "split": "quantiles of the metric's |score gap| over system "
                                        "pairs; tau = (concordant - discordant) / pairs"}


def format_delta_bands(found: Mapping[str, Any], digits: int = 3,
                       markdown: bool = False) -> str:
    rows = [[label, str(band["band"]), f"{_shown(band['delta_low'], digits + 1)}-"
             f"{_shown(band['delta_high'], digits + 1)}", str(band["pairs"]),
             _shown(band["kendall"], digits), _shown(band["pairwise_accuracy"], digits)]
            for label, bands in found["bands"].items() for band in bands]
    return render_table(["metric", "band", "|delta|", "pairs", "tau", "pairwise acc"], rows,
                        markdown)


def format_statistics(statistics: Mapping[str, Any], digits: int = 3,
                      markdown: bool = False) -> str:
    """One table: a row per metric, level and method with its correlation, interval,
    cluster and adjusted p-value against each other metric."""
    correlations = statistics["correlations"]
    found, tests = statistics.get("intervals"), statistics.get("tests")
    labels = list(correlations)
    header = ["metric", "level", "method", "r"]
    if found:
        header.append(f"{found['confidence']:.0%} CI ({found['method']})")
    if tests:
        header += ["cluster", *(f"p vs {label}" for label in labels)]
    rows = []
    for label, levels in correlations.items():
        for level, methods in levels.items():
            for method, r in methods.items():
                row = [label, level, method, _shown(r, digits)]
                if found:
                    lower, upper = found["intervals"][label][level][method]
                    row.append(f"[{_shown(lower, digits)}, {_shown(upper, digits)}]")
                if tests:
                    row.append(str(tests["clusters"][label][level][method]))
                    row += [_pair_cell(tests["pairs"], label, other, level, method, digits)
                            for other in labels]
                rows.append(row)
    lines = [render_table(header, rows, markdown)]
    if tests:
        lines += [""] if markdown else []
        lines.append(f"p: {tests['test']} ({tests['alternative']}), {tests['correction']}-"
                     f"adjusted within a level and method; clusters at {tests['alpha']}")
    return "\n".join(lines)


def _pair_cell(pairs: Sequence[Mapping], label: str, other: str, level: str, method: str,
               digits: int) -> str:
    if label == other:
        return "-"
    row = next(row for row in pairs if (row["level"], row["method"]) == (level, method)
               and {row["a"], row["b"]} == {label, other})
    return _shown(row["p_adjusted"], digits)


def _shown(value: float, digits: int) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"
