"""Meta-evaluation statistics (tasks/metrics/resampling.py, metric_tests.py) against the
reference code of Deutsch, Dror and Roth (2021), nlpstats 0.0.1 and SacreROUGE 0.2.5's
`stats.py`, each installed without its pins into a folder of its own (`.ci/run` does;
SUMBENCH_NLPSTATS_OFFICIAL and SUMBENCH_SACREROUGE_OFFICIAL name the folders): the three
levels, Fisher intervals and Williams' test to 1e-12 on REALSumm's ROUGE scores and on random
matrices with NaNs; bootstrap intervals, permutation and paired-bootstrap p-values exactly,
given the same resamples (the references' global `np.random` calls answered with our draws);
partial conjunction counts and clusters by hand."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tasks.metrics.correlation_bootstrap import bootstrap_interval
from tasks.metrics.metric_tests import (
    bootstrap_difference_pvalue,
    partial_conjunction,
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
from tasks.plumbing.errors import SumbenchError

from helpers import official_or_skip

METHODS = ("kendall", "pearson", "spearman")
#: our level names -> nlpstats'
NLPSTATS_LEVEL = {"system": "system", "summary": "input", "global": "global"}


@pytest.fixture(scope="module")
def nlpstats():
    given = os.environ.get("SUMBENCH_NLPSTATS_OFFICIAL")
    folder = official_or_skip(Path(given) if given and os.path.isdir(given) else None,
                              "SUMBENCH_REQUIRE_NLPSTATS",
                              "nlpstats 0.0.1 is not installed (pip install --no-deps --target "
                              "DIR nlpstats==0.0.1; SUMBENCH_NLPSTATS_OFFICIAL=DIR)")
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("nlpstats.correlations")
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def sacrerouge():
    """SacreROUGE 0.2.5's `stats.py`, loaded from its file with the one import it needs for
    typing only (`sacrerouge.data.Metrics`, whose package needs AllenNLP-era dependencies)
    shimmed while it loads."""
    given = os.environ.get("SUMBENCH_SACREROUGE_OFFICIAL")
    folder = official_or_skip(Path(given) if given and os.path.isdir(given) else None,
                              "SUMBENCH_REQUIRE_SACREROUGE",
                              "SacreROUGE 0.2.5 is not installed (pip install --no-deps "
                              "--target DIR sacrerouge==0.2.5; SUMBENCH_SACREROUGE_OFFICIAL=DIR)")
    shims = {"sacrerouge": types.ModuleType("sacrerouge"),
             "sacrerouge.data": types.ModuleType("sacrerouge.data")}
    shims["sacrerouge.data"].Metrics = object
    saved = {name: sys.modules.get(name) for name in shims}
    sys.modules.update(shims)
    try:
        spec = importlib.util.spec_from_file_location("sacrerouge_stats",
                                                      folder / "sacrerouge" / "stats.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for name, before in saved.items():
            if before is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = before


@pytest.fixture(scope="module")
def realsumm(pyramid_data_dir):
    """(ROUGE-1, ROUGE-2 recall, human Pyramid) matrices of REALSumm's 25 systems x 100."""
    from tasks.metrics.recall import rouge_recall_by_system
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    data = load_pyramid_dataset(pyramid_data_dir / "realsumm")
    systems = sorted(data.labels)
    rouge = rouge_recall_by_system({s: data.summaries[s] for s in systems}, data.references,
                                   ("rouge1_recall", "rouge2_recall"))
    human = [[float(np.mean(labels)) for labels in data.labels[s]] for s in systems]
    return tuple(np.array([table[s] for s in systems]) for table in rouge.values()) + \
        (np.array(human),)


def random_matrices(seed: int, shape=(12, 30), nan_share: float = 0.1):
    """X, Y (noisy copies of Z) and Z with NaN in the same random cells."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=shape)
    X, Y = Z + rng.normal(scale=1.0, size=shape), Z + rng.normal(scale=1.5, size=shape)
    missing = rng.random(shape) < nan_share
    missing[:, 0] = False   # every row keeps a score
    for matrix in (X, Y, Z):
        matrix[missing] = np.nan
    return X, Y, Z


def cases(realsumm):
    yield "realsumm", realsumm
    for seed in (1, 2):
        yield f"random-{seed}", random_matrices(seed)


@pytest.mark.parametrize("method", METHODS)
def test_levels_fisher_and_williams_equal_nlpstats(nlpstats, realsumm, method):
    for name, (X, Y, Z) in cases(realsumm):
        for level, theirs in NLPSTATS_LEVEL.items():
            assert correlate(X, Z, level, method) == pytest.approx(
                nlpstats.correlate(X, Z, theirs, method), abs=1e-12), (name, level)
            ours = fisher_interval(X, Z, level, method, 0.9)
            official = nlpstats.fisher(X, Z, theirs, method, confidence_level=0.9)
            assert ours == pytest.approx((official.lower, official.upper), abs=1e-12)
            for alternative in ("two-sided", "greater", "less"):
                assert williams_pvalue(X, Y, Z, level, method, alternative) == \
                    pytest.approx(nlpstats.williams_test(X, Y, Z, theirs, method,
                                                         alternative).pvalue, abs=1e-12)


def replaying(monkeypatch, values):
    """Answer nlpstats' global np.random.choice / rand calls with `values`, in order."""
    queue = list(values)
    monkeypatch.setattr(np.random, "choice", lambda n, size, replace=True: queue.pop(0))
    monkeypatch.setattr(np.random, "rand", lambda *shape: queue.pop(0).reshape(shape))
    return queue


@pytest.mark.parametrize("resampling", ["systems", "inputs", "both"])
@pytest.mark.parametrize("level", ["system", "summary", "global"])
def test_bootstrap_equals_nlpstats_given_the_same_draws(nlpstats, realsumm, monkeypatch,
                                                        resampling, level):
    _, X, Z = (matrix[:, :40] for matrix in realsumm)   # ROUGE-2 recall vs human Pyramid
    draws = bootstrap_draws(np.random.default_rng(7), X.shape, resampling, 30)
    ours = bootstrap_interval(X, Z, level, "kendall", draws=draws)
    queue = replaying(monkeypatch, [index for rows, columns in draws
                                    for index in (rows, columns) if index is not None])
    official = nlpstats.bootstrap(X, Z, NLPSTATS_LEVEL[level], "kendall", resampling,
                                  n_resamples=30)
    assert not queue
    assert ours["samples"] == pytest.approx(official.samples, abs=1e-12)
    assert (ours["lower"], ours["upper"]) == pytest.approx((official.lower, official.upper),
                                                           abs=1e-12)


@pytest.mark.parametrize("permutation", ["systems", "inputs", "both"])
def test_permutation_equals_nlpstats_given_the_same_masks(nlpstats, realsumm, monkeypatch,
                                                          permutation):
    X, Y, Z = (matrix[:, :20] for matrix in realsumm)
    masks = permutation_masks(np.random.default_rng(3), X.shape, permutation, 30)
    for level in ("system", "summary"):
        ours = permutation_pvalue(X, Y, Z, level, "pearson", masks=masks)
        queue = replaying(monkeypatch, [mask.astype(float) for rows, columns in masks
                                        for mask in (rows, columns) if mask is not None])
        official = nlpstats.permutation_test(X, Y, Z, NLPSTATS_LEVEL[level], "pearson",
                                             permutation, n_resamples=30)
        assert not queue and ours == official.pvalue


def test_seeded_runs_repeat_and_resampling_changes_the_interval(realsumm):
    _, X, Z = realsumm
    first, again = (bootstrap_interval(X, Z, "system", "kendall", n_resamples=200,
                                       rng=np.random.default_rng(11)) for _ in range(2))
    assert first == again
    inputs = bootstrap_interval(X, Z, "system", "kendall", resampling="inputs",
                                n_resamples=200, rng=np.random.default_rng(11))
    r = correlate(X, Z, "system", "kendall")
    assert first["lower"] < r < first["upper"]
    # resampling the systems as well widens the system-level interval (Deutsch et al.)
    assert first["upper"] - first["lower"] > inputs["upper"] - inputs["lower"]


def test_summary_level_undefined_columns_skip_or_count_zero():
    Z = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])   # second column constant
    X = np.array([[1.0, 5.0], [2.0, 4.0], [3.0, 3.0]])
    assert correlate(X, Z, "summary", "pearson") == pytest.approx(1.0)
    assert correlate(X, Z, "summary", "pearson", summary_undefined="zero") == \
        pytest.approx(0.5)


def test_holm_and_bonferroni_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3 x 0.01, max(0.03, 2 x 0.02), max(0.04, 1 x 0.04)
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8])
    assert bonferroni([0.04, 0.01, 0.6]) == pytest.approx([0.12, 0.03, 1.0])


@pytest.mark.parametrize("call, message", [
    (lambda X, Z: correlate(X, Z, "corpus", "kendall"), "unknown correlation level 'corpus'"),
    (lambda X, Z: fisher_interval(X, Z[:2], "system", "kendall"), "different shapes"),
    (lambda X, Z: fisher_interval(X, np.where(np.eye(3, 4) > 0, np.nan, Z), "system",
                                  "kendall"), "NaN in different cells"),
    (lambda X, Z: williams_pvalue(X, X, Z, "system", "kendall"), "more than 3 system-level"),
    (lambda X, Z: bootstrap_interval(X, Z, "system", "kendall"), "needs a seeded generator"),
    (lambda X, Z: fisher_interval(X, Z, "system", "kendall", 1.5), "between 0 and 1"),
    (lambda X, Z: bootstrap_draws(np.random.default_rng(0), X.shape, "columns", 3),
     "unknown resampling 'columns'"),
])
def test_bad_input_is_one_line(call, message):
    X = np.arange(12, dtype=float).reshape(3, 4)
    with pytest.raises(SumbenchError, match=message):
        call(X, X * 2)


# ---- SacreROUGE 0.2.5 ---------------------------------------------------------------------
def sacrerouge_level(stats, level: str, method: str):
    from scipy import stats as scipy_stats

    function = {"system": stats.system_level_corr, "summary": stats.summary_level_corr,
                "global": stats.global_corr}[level]
    coefficient = {"kendall": scipy_stats.kendalltau, "pearson": scipy_stats.pearsonr,
                   "spearman": scipy_stats.spearmanr}[method]
    return functools.partial(function, coefficient)


@pytest.mark.parametrize("method", METHODS)
def test_levels_fisher_and_williams_equal_sacrerouge(sacrerouge, realsumm, method):
    for name, (X, Y, Z) in cases(realsumm):
        for level in ("system", "summary", "global"):
            theirs = sacrerouge_level(sacrerouge, level, method)
            assert correlate(X, Z, level, method) == pytest.approx(theirs(X, Z), abs=1e-12)
            assert fisher_interval(X, Z, level, method, 0.9) == pytest.approx(
                sacrerouge.fisher_ci(theirs, X, Z, alpha=0.1), abs=1e-12), (name, level)
            for alternative, two_tailed in (("two-sided", True), ("greater", False)):
                assert williams_pvalue(X, Y, Z, level, method, alternative) == pytest.approx(
                    sacrerouge.williams_diff_test(theirs, X, Y, Z, two_tailed), abs=1e-12)


@pytest.mark.parametrize("resampling", ["systems", "inputs", "both"])
def test_bootstrap_interval_and_test_equal_sacrerouge_given_the_same_draws(
        sacrerouge, realsumm, monkeypatch, resampling):
    X, Y, Z = (matrix[:, :20] for matrix in realsumm)
    draws = bootstrap_draws(np.random.default_rng(5), X.shape, resampling, 12)
    indices = [index for rows, columns in draws for index in (rows, columns)
               if index is not None]
    name = {"systems": "system", "inputs": "input", "both": "both"}[resampling]
    sample = getattr(sacrerouge, f"bootstrap_{name}_sample")
    for level in ("system", "summary"):
        theirs = sacrerouge_level(sacrerouge, level, "kendall")
        queue = replaying(monkeypatch, indices)
        official = sacrerouge.bootstrap_ci(theirs, X, Z, sample, alpha=0.1, num_samples=12)
        assert not queue
        ours = bootstrap_interval(X, Z, level, "kendall", confidence=0.9, draws=draws)
        assert (ours["lower"], ours["upper"]) == pytest.approx(official, abs=1e-12)
        for alternative, two_tailed in (("two-sided", True), ("greater", False)):
            queue = replaying(monkeypatch, indices)
            official = sacrerouge.bootstrap_diff_test(theirs, X, Y, Z, sample, two_tailed,
                                                      num_samples=12)
            assert not queue and official == bootstrap_difference_pvalue(
                X, Y, Z, level, "kendall", alternative=alternative, draws=draws)


@pytest.mark.parametrize("permutation, theirs_name", [
    ("systems", "permute_systems"), ("inputs", "permute_inputs"), ("cells", "permute_both")])
def test_permutation_equals_sacrerouge_given_the_same_masks(sacrerouge, realsumm,
                                                            monkeypatch, permutation,
                                                            theirs_name):
    """SacreROUGE's "permutation-both" swaps single cells (ours: "cells"), leaves Z as it is
    and counts the observed difference once more: (hits + 1) / (n + 1)."""
    X, Y, Z = (matrix[:, :20] for matrix in realsumm)
    masks = permutation_masks(np.random.default_rng(9), X.shape, permutation, 30)
    flat = [mask for rows, columns in masks for mask in (rows, columns) if mask is not None]
    for level in ("system", "summary"):
        for alternative, two_tailed in (("two-sided", True), ("greater", False)):
            queue = list(flat)
            monkeypatch.setattr(sacrerouge, "random_bool_mask",
                                lambda *shape, queue=queue: queue.pop(0).reshape(shape))
            official = sacrerouge.permutation_diff_test(
                sacrerouge_level(sacrerouge, level, "pearson"), X, Y, Z,
                getattr(sacrerouge, theirs_name), two_tailed, num_permutations=30)
            assert not queue and official == permutation_pvalue(
                X, Y, Z, level, "pearson", alternative=alternative, masks=masks,
                reference="sacrerouge")


@pytest.mark.parametrize("pvalues, alpha", [
    ([0.01, 0.04, 0.03, 0.2], 0.05), ([0.001, 0.001, 0.5], 0.01), ([0.3, 0.02], 0.05),
    ([0.012, 0.013, 0.014, 0.015, 0.016], 0.06)])
def test_partial_conjunction_equals_sacrerouge(sacrerouge, pvalues, alpha):
    count, indices = partial_conjunction(pvalues, alpha)
    assert (count, indices) == sacrerouge.partial_conjunction_pvalue_test(
        "bonferroni", pvalues, alpha)


def test_partial_conjunction_and_clusters_by_hand():
    # sorted 0.01 (x4 = 0.04), 0.03 (x3 = 0.09): only the first survives at 0.05
    assert partial_conjunction([0.03, 0.01, 0.2, 0.04], 0.05) == (1, [1])
    # metrics in decreasing correlation; p[i, j]: i does not beat j
    p = np.ones((4, 4))
    p[0, 1], p[0, 2], p[1, 2], p[0, 3], p[1, 3], p[2, 3] = 0.3, 0.01, 0.2, 0.001, 0.04, 0.5
    # 1 ties 0 (cluster 1); 2 loses to 0: a new cluster from 2; 3 ties 2 (p 0.5): cluster 2,
    # though 1 beat it, for 1 is not in the current cluster
    assert significance_clusters(p, 0.05) == [1, 1, 2, 2]
    assert significance_clusters(p, 0.005) == [1, 1, 1, 2]


# ---- batched resampled correlations ---------------------------------------------------------
@pytest.mark.parametrize("resampling", ["systems", "inputs", "both"])
def test_batched_correlations_equal_the_resample_by_resample_loop(resampling):
    """Ties everywhere (scores rounded to 0.1, duplicated systems, a constant input): the
    batched values equal `correlate`'s resample by resample, at every level and method."""
    from tasks.metrics.correlation_bootstrap import resampled_correlations

    rng = np.random.default_rng(0)
    Z = np.round(rng.normal(size=(9, 25)), 1)
    Z[:, 3] = 1.0
    metrics = [np.round(Z + rng.normal(size=Z.shape), 1) for _ in range(2)]
    draws = bootstrap_draws(np.random.default_rng(1), Z.shape, resampling, 12)

    def taken(matrix, rows, columns):
        matrix = matrix if rows is None else matrix[rows]
        return matrix if columns is None else matrix[:, columns]

    for level in ("system", "summary", "global"):
        for method in METHODS:
            for rule in ("skip", "zero"):
                batched = resampled_correlations(metrics, Z, draws, level, method, rule,
                                                 batch=7)
                loop = [[correlate(taken(X, r, c), taken(Z, r, c), level, method, rule)
                         for r, c in draws] for X in metrics]
                assert batched == pytest.approx(np.array(loop), abs=1e-12, nan_ok=True), \
                    (level, method, rule)


@pytest.mark.parametrize("permutation", ["systems", "inputs", "both", "cells"])
def test_batched_permutations_equal_the_swap_by_swap_loop(permutation):
    from tasks.metrics.correlation_bootstrap import permuted_differences
    from tasks.metrics.metric_tests import standardised, swapped

    rng = np.random.default_rng(0)
    Z = np.round(rng.normal(size=(10, 30)), 1)
    Z[:, 2] = 0.5
    X, Y = (standardised(np.round(Z + rng.normal(size=Z.shape) * scale, 1))
            for scale in (1.0, 1.5))
    masks = permutation_masks(np.random.default_rng(1), X.shape, permutation, 10)
    for level in ("system", "summary"):
        for method in METHODS:
            def difference(first, second, level=level, method=method):
                return correlate(first, Z, level, method) - correlate(second, Z, level, method)
            observed, samples = permuted_differences(X, Y, Z, masks, level, method, batch=6)
            assert observed == pytest.approx(difference(X, Y), abs=1e-12)
            assert samples == pytest.approx([difference(*swapped(X, Y, r, c))
                                             for r, c in masks], abs=1e-12)
    assert permuted_differences(X, Y, Z, masks, "global", "pearson") is None


# ---- unpaired inputs (Deutsch et al. 2022) ------------------------------------------------
def unpaired_matrices():
    """X and Y over 50 inputs (the 20 judged ones first), Z over the 20 judged ones."""
    rng = np.random.default_rng(0)
    Z = np.round(rng.random((12, 20)), 2)
    X, Y = (np.round(np.hstack([Z + rng.normal(size=Z.shape) * noise, rng.random((12, 30))]),
                     2) for noise in (0.3, 0.5))
    return X, Y, Z


@pytest.mark.parametrize("resampling", ["systems", "inputs", "both"])
def test_unpaired_statistics_equal_nlpstats_given_the_same_draws(nlpstats, monkeypatch,
                                                                 resampling):
    from tasks.metrics.unpaired import (
        resampled_system_correlations,
        unpaired_draws,
        unpaired_permutation_pvalue,
    )

    X, Y, Z = unpaired_matrices()
    draws = unpaired_draws(np.random.default_rng(1), 12, 50, 20, resampling, 40)
    ours = resampled_system_correlations([X], Z, draws, "kendall")[0]
    queue = replaying(monkeypatch, [a for draw in draws for a in draw if a is not None])
    official = nlpstats.bootstrap(X, Z, "system", "kendall", resampling, paired_inputs=False,
                                  n_resamples=40)
    assert not queue and ours == pytest.approx(official.samples, abs=1e-12)
    masks = permutation_masks(np.random.default_rng(3), X.shape, resampling, 30)
    queue = replaying(monkeypatch, [mask.astype(float) for rows, columns in masks
                                    for mask in (rows, columns) if mask is not None])
    official = nlpstats.permutation_test(X, Y, Z, "system", "pearson", resampling,
                                         paired_inputs=False, n_resamples=30)
    assert not queue
    assert unpaired_permutation_pvalue(X, Y, Z, "pearson", masks) == official.pvalue


def test_with_their_own_generators_the_intervals_agree_within_monte_carlo_error(nlpstats):
    """10,000 resamples each, ours from a seeded Generator and nlpstats' from numpy's global
    state: the system-level Kendall interval's bounds and a permutation p-value agree within
    0.02 (the stated tolerance; a 2.5% percentile of 10,000 draws moves by about 0.01)."""
    X, Y, Z = random_matrices(4, shape=(10, 15), nan_share=0.0)
    ours = bootstrap_interval(X, Z, "system", "kendall", resampling="both", n_resamples=10_000,
                              rng=np.random.default_rng(8))
    state = np.random.get_state()
    try:
        np.random.seed(8)
        official = nlpstats.bootstrap(X, Z, "system", "kendall", "both", n_resamples=10_000)
        theirs_p = nlpstats.permutation_test(X, Y, Z, "system", "pearson", "both",
                                             n_resamples=10_000).pvalue
    finally:
        np.random.set_state(state)
    assert ours["lower"] == pytest.approx(official.lower, abs=0.02)
    assert ours["upper"] == pytest.approx(official.upper, abs=0.02)
    ours_p = permutation_pvalue(X, Y, Z, "system", "pearson", n_resamples=10_000,
                                rng=np.random.default_rng(8))
    assert ours_p == pytest.approx(theirs_p, abs=0.02)
