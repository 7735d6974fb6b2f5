"""What every benchmark in bench/ shares: fair timing of two arms and one way to report it.

`compare_arms` runs the arms alternately (A B, then B A, ...) `repeat` times, so that a machine
that slows down or warms up during the run hurts both equally; it keeps every time, reports the
minimum and the median of each arm, the ratio of the medians (baseline / ours: > 1 means ours
is faster) and whether both arms gave identical outputs (`same(ours, baseline)`, default ==).
`report` prints a readable summary, or with `--json` one JSON line with "ratio" and "identical";
both name the machine (`machine()`: CPU model, CPUs, torch threads, package versions, commit),
since ratios of batched to one-at-a-time work depend on how much a call costs on that CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

#: published T5 configs, as trainers.models.tiny.build_tiny_t5 options ("tiny": the test shape)
T5_SHAPES = {"tiny": {},
             "t5-small": {"d_model": 512, "num_layers": 6, "num_heads": 8, "d_ff": 2048,
                          "relative_buckets": 32, "vocab_size": 32128},
             "flan-t5-base": {"d_model": 768, "num_layers": 12, "num_heads": 12, "d_ff": 2048,
                              "relative_buckets": 32, "vocab_size": 32128},
             "flan-t5-large": {"d_model": 1024, "num_layers": 24, "num_heads": 16,
                               "d_ff": 2816, "relative_buckets": 32, "vocab_size": 32128}}


def add_options(parser: argparse.ArgumentParser, repeat: int = 5) -> None:
    """--repeat and --json, the options every benchmark takes."""
    parser.add_argument("--repeat", type=int, default=repeat,
                        help=f"alternating runs of each arm (default {repeat})")
    parser.add_argument("--json", action="store_true",
                        help='print one JSON line with "ratio" (of medians) and "identical"')


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    output = function()
    return time.perf_counter() - start, output


def compare_arms(ours: Callable[[], Any], baseline: Callable[[], Any], *, repeat: int = 5,
                 same: Callable[[Any, Any], bool] | None = None) -> dict:
    """{"ours": {...}, "baseline": {...}, "ratio": median_baseline / median_ours,
    "identical": bool}; each arm: {"runs": [...], "min": s, "median": s}."""
    runs: dict[str, list[float]] = {"ours": [], "baseline": []}
    outputs: dict[str, Any] = {}
    identical = True
    for index in range(max(1, repeat)):
        order = (("ours", ours), ("baseline", baseline))
        for name, function in (order if index % 2 == 0 else order[::-1]):
            seconds, output = timed(function)
            runs[name].append(seconds)
            if name in outputs:
                identical &= (same or _equal)(output, outputs[name])
            outputs[name] = output
    identical &= (same or _equal)(outputs["ours"], outputs["baseline"])
    arms = {name: {"runs": [round(t, 4) for t in times], "min": min(times),
                   "median": statistics.median(times)} for name, times in runs.items()}
    return {**arms, "ratio": arms["baseline"]["median"] / arms["ours"]["median"],
            "identical": bool(identical), "outputs": outputs}


def _equal(first: Any, second: Any) -> bool:
    return first == second


def timings(result: dict, arm: str, keys: tuple[str, ...] = ("min", "median", "runs")) -> dict:
    """The chosen timings of one arm ("ours" or "baseline") of a `compare_arms` result."""
    return {key: result[arm][key] for key in keys}


def cpus() -> int:
    from tasks.plumbing.provenance import available_cpus

    return available_cpus()


def machine() -> dict:
    """What a timing depends on: CPU, CPUs available, torch threads, build and GPUs used (when
    torch is loaded), tokenizer parallelism, and the run's provenance (commit, package
    versions, platform)."""
    from tasks.plumbing.provenance import provenance

    record = provenance()
    return {"cpu": record["cpu"], "cpus": record["threads"]["cpus"],
            "torch_threads": record["threads"]["torch_threads"],
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"),
            **{key: record[key] for key in ("git", "python", "platform", "torch_runtime")},
            "packages": {name: version for name, version in record["packages"].items()
                         if version is not None}}


def report(name: str, result: dict, *, as_json: bool, extra: dict | None = None,
           labels: tuple[str, str] = ("ours", "baseline")) -> None:
    """Print the comparison: readable lines, or one JSON line (`extra` keys added)."""
    summary = {"benchmark": name, "ratio": round(result["ratio"], 3),
               "identical": result["identical"], "cpus": cpus(),
               **{arm: timings(result, arm) for arm in ("ours", "baseline")},
               **(extra or {}), "machine": machine()}
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return
    for arm, label in zip(("ours", "baseline"), labels):
        print(f"{label}: median {result[arm]['median']:.3f} s, min {result[arm]['min']:.3f} s "
              f"(runs: {', '.join(f'{t:.3f}' for t in result[arm]['runs'])})")
    for key, value in (extra or {}).items():
        print(f"{key}: {value}")
    host = summary["machine"]
    gpus = (host["torch_runtime"] or {}).get("gpus")
    print(f"machine: {host['cpu']}, {host['cpus']} CPUs, torch threads {host['torch_threads']}, "
          f"{'GPU ' + ', '.join(gpus) + ', ' if gpus else ''}"
          f"commit {(host['git']['commit'] or 'unknown')[:12]}"
          f"{' (dirty)' if host['git']['dirty'] else ''}")
    print(f"ratio of medians: {result['ratio']:.2f}x")
    print("outputs identical" if result["identical"] else "OUTPUTS DIFFER")
