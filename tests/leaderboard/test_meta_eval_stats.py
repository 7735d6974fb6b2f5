"""`sumbench meta-eval --ci/--test/--correction` (leaderboard/meta_eval_stats.py) on
REALSumm: the intervals and p-values it writes are tasks.metrics.resampling's over the same
matrices and the same seeded draws, every number recorded with how it was made; per-system
metrics take Fisher and Williams only; what cannot be computed is one line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tasks.metrics.correlation_bootstrap import bootstrap_interval
from tasks.metrics.metric_tests import (
    bootstrap_difference_pvalue,
    permutation_masks,
    permutation_pvalue,
    significance_clusters,
)
from tasks.metrics.recall import rouge_recall_by_system
from tasks.metrics.resampling import (
    bootstrap_draws,
    correlate,
    fisher_interval,
    holm,
    williams_pvalue,
)
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

from helpers import sumbench

METRICS = ("rouge1_recall", "rouge2_recall")


@pytest.fixture(scope="module")
def realsumm(pyramid_data_dir):
    folder = pyramid_data_dir / "realsumm"
    data = load_pyramid_dataset(folder)
    systems = list(data.systems)
    rouge = rouge_recall_by_system(data.summaries, data.references, METRICS)
    matrices = {metric: np.array([rouge[metric][s] for s in systems]) for metric in METRICS}
    human = np.array([[float(np.mean(labels)) for labels in data.labels[s]] for s in systems])
    return folder, systems, matrices, human


@pytest.fixture(scope="module")
def scored(realsumm, tmp_path_factory) -> dict[str, str]:
    """{metric: a per-example score file of it, named as the metric}: the tests pass these to
    skip scoring REALSumm's 2,500 summaries again in every run (the issue's own command
    below runs the evaluators)."""
    folder = tmp_path_factory.mktemp("scored")
    _, systems, matrices, _ = realsumm
    paths = {}
    for metric, matrix in matrices.items():
        paths[metric] = str(folder / f"{metric}.json")
        Path(paths[metric]).write_text(json.dumps({s: [float(v) for v in row]
                                                   for s, row in zip(systems, matrix)}))
    return paths


def test_intervals_and_tests_are_the_statistics_of_the_same_draws(scored, realsumm, tmp_path,
                                                                  capsys):
    folder, _, matrices, Z = realsumm
    out = tmp_path / "stats.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder,
                               "--metric", scored[METRICS[0]], "--metric", scored[METRICS[1]],
                               "--methods", "kendall", "pearson",
                               "--ci", "boot-both", "--test", "perm-both", "--n-resamples",
                               "20", "--seed", "3", "--summary-undefined", "skip", "--out", out)
    assert code == 0, stderr
    assert "95% CI (boot-both)" in stderr and "p vs rouge2_recall" in stderr
    assert "p: perm-both (two-sided), holm-adjusted within a level and method" in stderr
    statistics = json.loads(out.read_text())["statistics"]
    found = statistics["intervals"]
    assert (found["method"], found["n_resamples"], found["seed"], found["confidence"]) == (
        "boot-both", 20, 3, 0.95)
    for li, level in enumerate(("system", "summary")):
        for mi, method in enumerate(("kendall", "pearson")):
            draws = bootstrap_draws(np.random.default_rng([3, li, mi]), Z.shape, "both", 20)
            for metric in METRICS:
                expected = bootstrap_interval(matrices[metric], Z, level, method,
                                              summary_undefined="skip", draws=draws)
                assert found["intervals"][metric][level][method] == pytest.approx(
                    [expected["lower"], expected["upper"]], abs=1e-12)
                lower, upper = found["intervals"][metric][level][method]
                assert -1 <= lower < upper <= 1
            masks = permutation_masks(np.random.default_rng([3, li, mi]), Z.shape, "both", 20)
            better, worse = sorted(METRICS, key=lambda m: -correlate(
                matrices[m], Z, level, method, "skip"))  # a pair is tested best first
            p = permutation_pvalue(matrices[better], matrices[worse], Z, level, method,
                                   masks=masks, summary_undefined="skip")
            row = next(row for row in statistics["tests"]["pairs"]
                       if (row["level"], row["method"]) == (level, method))
            assert (row["a"], row["b"], row["p"], row["p_adjusted"]) == (
                better, worse, p, holm([p])[0])
            clusters = [statistics["tests"]["clusters"][m][level][method]
                        for m in (better, worse)]
            assert clusters == ([1, 2] if p <= 0.05 else [1, 1])
    assert statistics["tests"]["n_resamples"] == 20 and statistics["tests"]["standardised"]
    assert statistics["correlations"][METRICS[0]]["system"]["kendall"] == pytest.approx(
        correlate(matrices[METRICS[0]], Z, "system", "kendall"), abs=1e-15)


def test_the_issues_command_gives_one_table_with_intervals_p_values_and_clusters(
        realsumm, tmp_path, capsys):
    """Three metrics (two ROUGE recalls and ROUGE-1.5.5's ROUGE-2 R), boot-both intervals,
    perm-both tests, Holm: every pair tested best first, its adjusted p-value in the table,
    clusters as AssignRanks makes them from the adjusted p-values; paired bootstrap tests
    as tasks.metrics.metric_tests computes them from the same draws."""
    folder, _, matrices, Z = realsumm
    metrics = ["rouge1_recall", "rouge2_recall", "rouge155-2-r"]
    out = tmp_path / "three.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder,
                               *(arg for m in metrics for arg in ("--metric", m)),
                               "--methods", "kendall", "--ci", "boot-both", "--test",
                               "perm-both", "--correction", "holm", "--n-resamples", "30",
                               "--table", "markdown", "--out", out)
    assert code == 0, stderr
    tests = json.loads(out.read_text())["statistics"]["tests"]
    assert "| metric | level | method | r | 95% CI (boot-both) | cluster |" in stderr
    for level in ("system", "summary"):
        rows = [row for row in tests["pairs"] if row["level"] == level]
        ranked = [rows[0]["a"], rows[0]["b"], rows[1]["b"]]
        assert sorted(ranked) == sorted(metrics) and len(rows) == 3
        assert [r["p_adjusted"] for r in rows] == pytest.approx(holm([r["p"] for r in rows]))
        square = np.ones((3, 3))
        for row in rows:
            square[ranked.index(row["a"]), ranked.index(row["b"])] = row["p_adjusted"]
        assert [tests["clusters"][m][level]["kendall"] for m in ranked] == \
            significance_clusters(square)
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder, "--metric",
                               METRICS[0], "--metric", METRICS[1], "--methods", "pearson",
                               "--test", "boot-inputs", "--n-resamples", "15", "--seed", "4",
                               "--out", out)
    assert code == 0, stderr
    (row,) = [row for row in json.loads(out.read_text())["statistics"]["tests"]["pairs"]
              if row["level"] == "summary"]
    draws = bootstrap_draws(np.random.default_rng([4, 1, 1]), Z.shape, "inputs", 15)
    assert row["p"] == bootstrap_difference_pvalue(
        matrices[row["a"]], matrices[row["b"]], Z, "summary", "pearson",
        summary_undefined="zero", draws=draws)


def test_per_system_metrics_take_fisher_and_williams(realsumm, tmp_path, capsys):
    folder, systems, matrices, Z = realsumm
    files = []
    for metric in METRICS:   # one value per system: the system means
        path = tmp_path / f"{metric}.json"
        path.write_text(json.dumps({s: float(v) for s, v in
                                    zip(systems, matrices[metric].mean(axis=1))}))
        files += ["--metric", str(path)]
    out = tmp_path / "fisher.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder, *files, "--methods",
                               "pearson", "--ci", "fisher", "--test", "williams",
                               "--correction", "bonferroni", "--out", out)
    assert code == 0, stderr
    statistics = json.loads(out.read_text())["statistics"]
    means = {metric: matrices[metric].mean(axis=1, keepdims=True) for metric in METRICS}
    human = Z.mean(axis=1, keepdims=True)
    assert statistics["intervals"]["intervals"][METRICS[0]]["system"]["pearson"] == \
        pytest.approx(list(fisher_interval(means[METRICS[0]], human, "system", "pearson")))
    (row,) = statistics["tests"]["pairs"]
    assert row["p"] == pytest.approx(williams_pvalue(*means.values(), human, "system",
                                                     "pearson"))
    assert row["p_adjusted"] == pytest.approx(min(1.0, row["p"]))
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder, *files, "--ci",
                               "boot-both")
    assert code == 2 and "has one value per system: use --ci fisher" in stderr


@pytest.mark.parametrize("extra, needle", [
    (["--metric", "rouge1_recall", "--test", "williams"], "compares metrics: give two"),
    (["--metric", "rouge1_recall", "--metric", "rouge2_recall", "--ci", "fisher",
      "--summary-undefined", "lite-pyramid"], "intervals and tests take zero or skip"),
    (["--metric", "rouge1_recall", "--metric", "CONSTANT", "--ci", "boot-both"],
     "--metric constant is constant (every score is 0.5): its correlations are undefined"),
    (["--metric", "rouge1_recall", "--metric", "rouge2_recall", "--test", "williams",
      "--systems", "FIRST3"], "--test williams needs more than 3 systems"),
    (["--metric", "rouge1_recall", "--metric", "rouge2_recall", "--test", "perm-both",
      "--significance", "1.5"], "--significance must be between 0 and 1"),
])
def test_what_cannot_be_computed_is_one_line(scored, realsumm, tmp_path, capsys, extra,
                                             needle):
    folder, systems, matrices, _ = realsumm
    extra = [scored[arg] if arg in scored else arg for arg in extra]
    if "CONSTANT" in extra:
        constant = tmp_path / "constant.json"
        constant.write_text(json.dumps({s: [0.5] * matrices[METRICS[0]].shape[1]
                                        for s in systems}))
        extra = [str(constant) if arg == "CONSTANT" else arg for arg in extra]
    if "FIRST3" in extra:
        extra = extra[:-1] + systems[:3]
    out = tmp_path / "out.json"
    code, stdout, stderr = sumbench(capsys, "meta-eval", "--pyramid", realsumm[0], *extra,
                                    "--out", out)
    assert code == 2 and stdout == "" and not out.exists()
    assert len(stderr.strip().splitlines()) == 1 and needle in stderr, stderr


def test_the_global_level_pools_every_score(scored, realsumm, tmp_path, capsys):
    folder, _, matrices, Z = realsumm
    out = tmp_path / "global.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder,
                               "--metric", scored[METRICS[0]], "--metric", scored[METRICS[1]],
                               "--levels", "global", "system",
                               "--methods", "pearson", "--ci", "fisher", "--out", out)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    found = report["correlations"][METRICS[0]]["all"]
    assert set(found) == {"systems", "global", "system"}
    assert found["global"]["pearson"] == pytest.approx(
        correlate(matrices[METRICS[0]], Z, "global", "pearson"), abs=1e-12)
    assert report["statistics"]["intervals"]["intervals"][METRICS[1]]["global"]["pearson"] == \
        pytest.approx(list(fisher_interval(matrices[METRICS[1]], Z, "global", "pearson")))
    assert report["config"]["levels"] == ["global", "system"]


def test_delta_bands_split_realsumms_system_pairs(scored, realsumm, tmp_path, capsys):
    from scipy import stats

    folder, _, matrices, Z = realsumm
    out = tmp_path / "bands.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder,
                               "--metric", scored[METRICS[1]], "--delta-bands", "5", "--out", out)
    assert code == 0, stderr
    assert "pairwise acc" in stderr
    found = json.loads(out.read_text())["statistics"]["delta_bands"]
    bands = found["bands"][METRICS[1]]
    assert [b["band"] for b in bands] == [1, 2, 3, 4, 5] and found["n_bands"] == 5
    assert sum(b["pairs"] for b in bands) == 25 * 24 // 2
    x, z = matrices[METRICS[1]].mean(axis=1), Z.mean(axis=1)
    concordance = [b["kendall"] * b["pairs"] for b in bands]
    assert sum(concordance) / 300 == pytest.approx(stats.kendalltau(x, z)[0], abs=1e-12)


def test_the_forest_plot_is_one_png_of_every_level_and_method(scored, realsumm, tmp_path,
                                                              capsys):
    folder = realsumm[0]
    plot = tmp_path / "forest.png"
    args = ["meta-eval", "--pyramid", folder, "--metric", scored[METRICS[0]],
    "--metric", scored[METRICS[1]],
            "--methods", "kendall", "--ci", "boot-both", "--test", "perm-both",
            "--n-resamples", "20", "--plot", plot]
    code, _, stderr = sumbench(capsys, *args)
    assert code == 0, stderr
    first = plot.read_bytes()
    assert first.startswith(b"\x89PNG") and len(first) > 5000
    assert sumbench(capsys, *args)[0] == 0 and plot.read_bytes() == first  # deterministic
    for bad, needle in ((["--ci", "none"], "give --ci too"),
                        (["--plot", tmp_path / "forest.pdf"], "give a .png file's name")):
        code, _, stderr = sumbench(capsys, *args, *bad)
        assert code == 2 and needle in stderr


def _unjudged_file(tmp_path, systems, matrices, extra: int = 30):
    """Each metric's scores on `extra` more inputs (their first columns again, shifted)."""
    path = tmp_path / "unjudged.json"
    path.write_text(json.dumps({metric: {s: [float(v) + 0.01 for v in row[:extra]]
                                         for s, row in zip(systems, matrix)}
                                for metric, matrix in matrices.items()}))
    return path


def test_unjudged_inputs_enter_the_system_level_and_its_statistics(scored, realsumm, tmp_path,
                                                                   capsys):
    from scipy import stats

    from tasks.metrics.unpaired import (
        resampled_system_correlations,
        unpaired_bootstrap_difference_pvalue,
        unpaired_draws,
    )

    folder, systems, matrices, Z = realsumm
    extra = _unjudged_file(tmp_path, systems, matrices)
    out = tmp_path / "unjudged-out.json"
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder,
                               "--metric", scored[METRICS[0]], "--metric", scored[METRICS[1]],
                               "--methods", "kendall", "--ci",
                               "boot-both", "--test", "boot-inputs", "--n-resamples", "25",
                               "--unjudged-inputs", extra, "--out", out)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    full = {m: np.hstack([matrices[m], matrices[m][:, :30] + 0.01]) for m in METRICS}
    system = stats.kendalltau(full[METRICS[0]].mean(axis=1), Z.mean(axis=1))[0]
    assert report["correlations"][METRICS[0]]["all"]["system"]["kendall"] == \
        pytest.approx(system, abs=1e-12)
    assert report["correlations"][METRICS[0]]["all"]["summary"]["kendall"] == pytest.approx(
        correlate(matrices[METRICS[0]], Z, "summary", "kendall", "zero"), abs=1e-12)
    statistics = report["statistics"]
    draws = unpaired_draws(np.random.default_rng([0, 0, 0]), 25, 130, 100, "both", 25)
    samples = resampled_system_correlations([full[METRICS[1]]], Z, draws, "kendall")[0]
    expected = np.percentile(samples, [2.5, 97.5])
    assert statistics["intervals"]["intervals"][METRICS[1]]["system"]["kendall"] == \
        pytest.approx(list(expected), abs=1e-12)
    assert statistics["intervals"]["unjudged_inputs"] == 30
    (row,) = [row for row in statistics["tests"]["pairs"] if row["level"] == "system"]
    draws = unpaired_draws(np.random.default_rng([0, 0, 0]), 25, 130, 100, "inputs", 25)
    assert row["p"] == unpaired_bootstrap_difference_pvalue(full[row["a"]], full[row["b"]], Z,
                                                            "kendall", draws)


@pytest.mark.parametrize("change, needle", [
    (lambda data: data.pop(METRICS[1]), "no unjudged scores for --metric rouge2_recall"),
    (lambda data: data[METRICS[0]][next(iter(data[METRICS[0]]))].pop(),
     "scores; the others have"),
    (lambda data: data[METRICS[0]].__setitem__(next(iter(data[METRICS[0]])), ["x"]),
     "expected a finite number"),
])
def test_a_bad_unjudged_file_is_one_line_naming_the_field(scored, realsumm, tmp_path, capsys,
                                                          change,
                                                          needle):
    folder, systems, matrices, _ = realsumm
    path = _unjudged_file(tmp_path, systems, matrices)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    out = tmp_path / "never.json"
    code, stdout, stderr = sumbench(capsys, "meta-eval", "--pyramid", folder, "--metric",
                                    scored[METRICS[0]], "--metric", scored[METRICS[1]], "--ci",
                                    "fisher",
                                    "--unjudged-inputs", path, "--out", out)
    assert code == 2 and stdout == "" and not out.exists()
    assert len(stderr.strip().splitlines()) == 1 and needle in stderr and "unjudged" in stderr


def test_several_datasets_give_their_tables_and_the_partial_conjunction_count(
        pyramid_data_dir, tmp_path, capsys):
    from tasks.metrics.metric_tests import partial_conjunction

    out = tmp_path / "both.json"
    args = ["--metric", METRICS[0], "--metric", METRICS[1], "--methods", "pearson", "--test",
            "perm-both", "--n-resamples", "30"]
    code, _, stderr = sumbench(capsys, "meta-eval", "--pyramid", pyramid_data_dir / "realsumm",
                               "--pyramid", pyramid_data_dir / "pyrxsum", *args, "--out", out)
    assert code == 0, stderr
    assert "== realsumm ==" in stderr and "== pyrxsum ==" in stderr and "differ in" in stderr
    report = json.loads(out.read_text())
    assert report["config"]["datasets"] == ["realsumm", "pyrxsum"]
    assert set(report["datasets"]) == {"realsumm", "pyrxsum"}
    rows = report["partial_conjunction"]["rows"]
    assert {(row["level"], row["method"]) for row in rows} == {("system", "pearson"),
                                                             ("summary", "pearson")}
    for row in rows:
        pvalues = [row["pvalues"][name] for name in ("realsumm", "pyrxsum")]
        count, which = partial_conjunction(pvalues, 0.05)
        assert (row["significant"], row["datasets"]) == (count, 2)
        assert row["which"] == [["realsumm", "pyrxsum"][i] for i in which]
    alone = tmp_path / "alone.json"
    assert sumbench(capsys, "meta-eval", "--pyramid", pyramid_data_dir / "pyrxsum", *args,
                    "--out", alone)[0] == 0
    assert report["datasets"]["pyrxsum"]["statistics"] == \
        json.loads(alone.read_text())["statistics"]   # each dataset as it is alone
    code, stdout, stderr = sumbench(capsys, "meta-eval", "--pyramid",
                                    pyramid_data_dir / "realsumm", "--pyramid",
                                    pyramid_data_dir / "pyrxsum", "--human", "pyramid",
                                    "--human", "pyramid", "--human", "pyramid", *args)
    assert code == 2 and "--human: give it once, or once per --pyramid (2); got 3" in stderr
