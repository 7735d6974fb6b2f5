"""How `sumbench score` scales: time and peak memory for 20k and 200k records.

A benchmark, not a test. It writes prediction files of all eight USB tasks (the shared
fixture's predictions repeated, each copy with its own id; the 200k set is the 20k set ten
times over, so every official number must come out the same), then scores each set in a fresh
process (`tasks.scoring.score_files`, as `sumbench score` does), alternating the two sizes
`--repeat` times (default 5), and reports the medians (and each size's minimum and runs):

  time_ratio      t(200k) / t(20k)           goal <= 11 (linear)
  peak_rss_ratio  peak RSS(200k) / (20k)     goal <= 1.5 (memory flat in the records)
  records_per_s   200k / t(200k)             goal: 200k in <= 10 s on 2 cores
  identical       the same official numbers for both sets (to 1e-9: sums of ten copies)

Scoring uses `--workers` processes (default: as `sumbench score`, the CPUs available, at most
8); peak RSS is the scoring process's, and `worker_peak_rss_mib` the largest forked worker's.

    python3 bench/score_scale.py [--small 20000] [--repeat 5] [--workers W] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from harness import add_options, machine  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
PREDICTIONS = SHARED / "fixtures" / "usb" / "predictions"

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from tasks.scoring import score_files
scores = score_files(sys.argv[2:], workers=int(sys.argv[1]))
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "worker_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "torch": "torch" in sys.modules,
                  "headlines": {task: result["headline"] for task, result in scores.items()}}))
"""


def write_set(folder: Path, n_records: int, copies: int = 1) -> list[Path]:
    """Prediction files of all eight tasks with about `n_records` records in all, written
    `copies` times over (with other ids): the same official numbers for every `copies`."""
    from tasks.plumbing.io import dumps_record, read_jsonl

    files = sorted(PREDICTIONS.glob("*.jsonl"))
    fixture = {path.stem: read_jsonl(path) for path in files}
    per_task = n_records // len(fixture)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for task, records in fixture.items():
        path = folder / f"{task}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for copy in range(copies):
                for k in range(per_task):
                    record = records[k % len(records)]
                    handle.write(dumps_record(dict(record, id=f"{record['id']}#{k}.{copy}"))
                                 + "\n")
        paths.append(path)
    return paths


def score_in_child(paths: list[Path], workers: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(workers), *map(str, paths)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def same_numbers(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(
        (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 1e-9)
        for a, b in ((first[k], second[k]) for k in first))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=20_000, help="records of the small set")
    parser.add_argument("--factor", type=int, default=10, help="large = small x factor")
    parser.add_argument("--workers", type=int, default=None,
                        help="scoring processes (default: the CPUs available, at most 8)")
    add_options(parser)
    args = parser.parse_args(argv)
    from tasks.plumbing.chunk_workers import default_workers

    workers = default_workers() if args.workers is None else max(1, args.workers)
    if not PREDICTIONS.is_dir():
        print(f"shared fixtures not found at {PREDICTIONS}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        small = write_set(Path(tmp) / "small", args.small)
        large = write_set(Path(tmp) / "large", args.small, copies=args.factor)
        runs: dict[str, list[dict]] = {"small": [], "large": []}
        for index in range(max(1, args.repeat)):
            order = [("small", small), ("large", large)]
            for name, paths in order if index % 2 == 0 else order[::-1]:
                runs[name].append(score_in_child(paths, workers))
    median = {name: {key: statistics.median(run[key] for run in series)
                     for key in ("seconds", "rss_kib", "worker_rss_kib")}
              for name, series in runs.items()}
    n_large = args.small * args.factor
    summary = {
        "benchmark": "score_scale", "records": [args.small, n_large],
        "time_ratio": round(median["large"]["seconds"] / median["small"]["seconds"], 3),
        "peak_rss_ratio": round(median["large"]["rss_kib"] / median["small"]["rss_kib"], 3),
        "records_per_s": round(n_large / median["large"]["seconds"]),
        "seconds": [round(median["small"]["seconds"], 2), round(median["large"]["seconds"], 2)],
        "seconds_min": [round(min(run["seconds"] for run in runs[n]), 2)
                        for n in ("small", "large")],
        "runs": {n: [round(run["seconds"], 2) for run in runs[n]] for n in ("small", "large")},
        "peak_rss_mib": [round(median[n]["rss_kib"] / 1024) for n in ("small", "large")],
        "worker_peak_rss_mib": [round(median[n]["worker_rss_kib"] / 1024)
                                for n in ("small", "large")],
        "workers": workers,
        "identical": all(same_numbers(runs["small"][0]["headlines"], run["headlines"])
                         for series in runs.values() for run in series),
        "torch_imported": any(run["torch"] for series in runs.values() for run in series)}
    summary["ratio"] = summary["time_ratio"]
    summary["machine"] = machine()
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        for key, value in summary.items():
            print(f"{key}: {value}")
    return 0 if summary["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
