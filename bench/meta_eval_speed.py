"""Benchmark (not a test; the benchmark "meta_eval_speed"): `boot-both` bootstrap intervals of
system- and summary-level Kendall, Pearson and Spearman correlations for many metrics on
REALSumm's human Pyramid matrix (25 systems x 100 inputs), sumbench's batched resampling
(tasks/metrics/correlation_bootstrap.py) against nlpstats 0.0.1's own `bootstrap` loop.

The metrics: `--metrics` (20) noisy copies of the human matrix (seeded; the noise grows from
metric to metric), rounded to 3 decimals so that ties occur as they do in real scores.
Every level and method gets one list of `--resamples` draws (`resampling.bootstrap_draws`,
seeded), fed to both arms:
  ours      `resampled_correlations` of all the metrics at once, then each one's percentile
            interval (what `sumbench meta-eval --ci boot-both` computes);
  baseline  `nlpstats.correlations.bootstrap(X, Z, level, method, "both")` per metric, its
            global `np.random.choice` answered with the same draws.
Both arms alternate `--repeat` times (bench/harness.py); ratio = median baseline / median
ours, goal >= 20. "identical": every interval within 1e-12.
Also reported: ours alone at `--full-resamples` (10,000, the issue's size) and nlpstats'
time per resample scaled to it; the peak memory (tracemalloc) of ours for all the metrics
against a quarter of them, at `--memory-resamples` (flat in the number of metrics: about 1).

nlpstats' loop takes about a second per resample for 20 metrics on 2 CPU cores, hence the
small default `--resamples`.

    python bench/meta_eval_speed.py [--nlpstats DIR] [--metrics 20] [--resamples 30]
                                    [--full-resamples 10000] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
from harness import add_options, compare_arms, report  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "pyramid" / "realsumm"
LEVELS = {"system": "system", "summary": "input"}   # ours -> nlpstats'
METHODS = ("kendall", "pearson", "spearman")


def human_matrix(data: Path) -> np.ndarray:
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    dataset = load_pyramid_dataset(data)
    return np.array([[float(np.mean(labels)) for labels in dataset.labels[s]]
                     for s in dataset.systems])


def metric_matrices(Z: np.ndarray, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.round(Z + rng.normal(scale=0.05 * (1 + k), size=Z.shape), 3)
            for k in range(count)]


def cell_draws(shape, resamples: int, seed: int) -> dict:
    from tasks.metrics.resampling import bootstrap_draws

    return {(level, method): bootstrap_draws(np.random.default_rng([seed, li, mi]), shape,
                                             "both", resamples)
            for li, level in enumerate(LEVELS) for mi, method in enumerate(METHODS)}


def ours(metrics, Z, draws_by_cell) -> dict:
    from tasks.metrics.correlation_bootstrap import interval_of_defined, resampled_correlations

    found = {}
    for (level, method), draws in draws_by_cell.items():
        samples = resampled_correlations(metrics, Z, draws, level, method, "skip")
        for k, row in enumerate(samples):
            found[level, method, k] = interval_of_defined(row, 0.95)
    return found


@contextlib.contextmanager
def replayed(values: list):
    """nlpstats' `np.random.choice` calls answered with `values`, in order."""
    queue, original = list(values), np.random.choice
    np.random.choice = lambda n, size, replace=True: queue.pop(0)
    try:
        yield queue
    finally:
        np.random.choice = original


def baseline(nlpstats, metrics, Z, draws_by_cell) -> dict:
    found = {}
    for (level, method), draws in draws_by_cell.items():
        flat = [index for rows, columns in draws for index in (rows, columns)]
        for k, X in enumerate(metrics):
            with replayed(flat) as queue:
                result = nlpstats.bootstrap(X, Z, LEVELS[level], method, "both",
                                            n_resamples=len(draws))
            assert not queue
            found[level, method, k] = (float(result.lower), float(result.upper))
    return found


def same(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(
        abs(a - b) <= 1e-12 for key in first for a, b in zip(first[key], second[key]))


def peak_memory(function) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def load_nlpstats(folder: str | None):
    if not folder or not os.path.isdir(folder):
        raise SystemExit("nlpstats 0.0.1 is needed: pip install --no-deps --target DIR "
                         "nlpstats==0.0.1, then --nlpstats DIR (or SUMBENCH_NLPSTATS_OFFICIAL)")
    sys.path.insert(0, folder)
    return importlib.import_module("nlpstats.correlations")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--nlpstats", default=os.environ.get("SUMBENCH_NLPSTATS_OFFICIAL"),
                        help="folder holding the nlpstats package (`pip install --no-deps "
                             "--target DIR nlpstats==0.0.1`); default: "
                             "$SUMBENCH_NLPSTATS_OFFICIAL")
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--resamples", type=int, default=30)
    parser.add_argument("--full-resamples", type=int, default=10_000)
    parser.add_argument("--memory-resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    nlpstats = load_nlpstats(args.nlpstats)
    Z = human_matrix(args.data)
    metrics = metric_matrices(Z, args.metrics, args.seed)
    draws = cell_draws(Z.shape, args.resamples, args.seed)
    result = compare_arms(lambda: ours(metrics, Z, draws), lambda: baseline(nlpstats, metrics,
                                                                           Z, draws),
                          repeat=args.repeat, same=same)
    full = cell_draws(Z.shape, args.full_resamples, args.seed + 1)
    started = time.perf_counter()
    ours(metrics, Z, full)
    full_seconds = time.perf_counter() - started
    few = cell_draws(Z.shape, args.memory_resamples, args.seed)
    quarter = metrics[:max(1, len(metrics) // 4)]
    memory = (peak_memory(lambda: ours(metrics, Z, few)),
              peak_memory(lambda: ours(quarter, Z, few)))
    per_resample = result["baseline"]["median"] / args.resamples
    extra = {"shape": "realsumm", "metrics": args.metrics, "resamples": args.resamples,
             "full_resamples": args.full_resamples, "ours_full_seconds": round(full_seconds, 1),
             "nlpstats_full_seconds_scaled": round(per_resample * args.full_resamples, 1),
             "peak_memory_bytes": memory[0],
             "peak_memory_ratio_all_vs_quarter": round(memory[0] / memory[1], 2),
             "goal_met": result["ratio"] >= 20 and result["identical"]}
    report("meta_eval_speed", result, as_json=args.json, extra=extra,
           labels=("sumbench batched resampling", "nlpstats bootstrap loop"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
