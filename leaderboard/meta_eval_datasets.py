"""Several datasets in one `sumbench meta-eval` (`--pyramid A --pyramid B ...`): each
dataset's tests as one dataset's, and per pair of metrics, level and method the partial
conjunction count (SacreROUGE's Bonferroni partial-conjunction test, Holm's procedure over
the datasets' unadjusted p-values; tasks.metrics.metric_tests.partial_conjunction): in how
many of the datasets the two metrics' correlations differ at `alpha`, and which.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.meta_eval import render_table
from tasks.metrics.metric_tests import partial_conjunction
from tasks.plumbing.provenance import provenance


def partial_conjunction_rows(tests: Mapping[str, Mapping[str, Any]], labels: Sequence[str],
                             alpha: float) -> list[dict]:
    """One row per pair of metrics (in `labels` order), level and method found in every
    dataset's `tests` (meta_eval_stats.pairwise_tests' output, by dataset name)."""
    names = list(tests)
    found: dict[tuple, dict[str, float]] = {}
    for name in names:
        for row in tests[name]["pairs"]:
            a, b = sorted((row["a"], row["b"]), key=labels.index)
            found.setdefault((a, b, row["level"], row["method"]), {})[name] = row["p"]
    rows = []
    for (a, b, level, method), pvalues in found.items():
        if len(pvalues) != len(names):
            continue   # a level one dataset lacks (a per-system metric)
        ordered = [pvalues[name] for name in names]
        count, which = partial_conjunction(ordered, alpha)
        rows.append({"a": a, "b": b, "level": level, "method": method,
                     "datasets": len(names), "significant": count,
                     "which": [names[index] for index in which], "pvalues": pvalues})
    return rows


def format_partial_conjunction(rows: Sequence[Mapping], alpha: float,
                               markdown: bool = False) -> str:
    table = render_table(["metrics", "level", "method", "differ in", "datasets"],
                         [[f"{row['a']} vs {row['b']}", row["level"], row["method"],
                           f"{row['significant']} of {row['datasets']}",
                           ", ".join(row["which"]) or "-"] for row in rows], markdown)
    return table + ("\n\n" if markdown else "\n") + \
        f"partial conjunction: Holm over the datasets' p-values at {alpha}"


def dataset_name(pyramid: str | None, index: int, taken: Mapping) -> str:
    """A dataset's name in the combined report: its folder's name (made unique)."""
    name = Path(pyramid).name if pyramid else f"dataset{index + 1}"
    return name if name not in taken else f"{name}-{index + 1}"


def combined_report(reports: dict[str, dict], metrics: Sequence[str], test: str, alpha: float,
                    markdown: bool = False) -> tuple[dict, str]:
    """Several datasets: (each one's report and, with a test, the partial conjunction counts;
    the table to print)."""
    combined: dict = {"datasets": reports}
    table = ""
    if test != "none":
        labels = [m["label"] for m in next(iter(reports.values()))["config"]["metrics"]]
        rows = partial_conjunction_rows({name: report["statistics"]["tests"]
                                         for name, report in reports.items()}, labels, alpha)
        table = format_partial_conjunction(rows, alpha, markdown)
        combined["partial_conjunction"] = {
            "rows": rows, "alpha": alpha, "test": test, "p": "unadjusted, per dataset",
            "method": "Holm over the datasets (SacreROUGE's Bonferroni partial conjunction)"}
    config = {"datasets": list(reports), "metrics": list(metrics)}
    combined.update(config=config, provenance=provenance(config))
    return combined, table
