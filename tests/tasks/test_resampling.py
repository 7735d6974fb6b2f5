"""Meta-evaluation statistics (tasks/metrics/resampling.py) against nlpstats 0.0.1, the
reference code of Deutsch, Dror and Roth (2021), installed without its pins into a folder of
its own (`.ci/run` does; SUMBENCH_NLPSTATS_OFFICIAL names the folder): the three levels,
Fisher intervals and Williams' test to 1e-12 on REALSumm's ROUGE scores and on random
matrices with NaNs; bootstrap intervals and permutation p-values exactly, given the same
resamples (nlpstats' global `np.random` calls answered with our draws)."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from tasks.metrics.resampling import (
    bonferroni,
    bootstrap_draws,
    bootstrap_interval,
    correlate,
    fisher_interval,
    holm,
    permutation_masks,
    permutation_pvalue,
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
