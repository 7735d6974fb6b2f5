"""Pure metric functions (no I/O, no models). The USB benchmark's official metrics:

- rouge: ROUGE-1/2/L F-measure and exact match (per example, means, geometric mean)
- classification: pooled binary metrics for EXT/EVEXT/FAC, length alignment
- spans: BIO tags from "[]" ... "[/]" marks and seqeval span scores for UNSUP
- bootstrap: seeded percentile intervals over per-example items

Each family separates per-example work (`*_examples`, `rouge_per_example`) from aggregation
(`pooled_scores`, `aggregate_rouge`, `aggregate_spans`) so resampling never re-scores.
`evaluate_modules/` wraps the same functions as local `evaluate` modules.
"""
from __future__ import annotations

from pathlib import Path

from tasks.plumbing.errors import check_choice

EVALUATE_MODULES = ("usb_rouge", "usb_classification", "usb_spans")


def evaluate_module_path(name: str) -> str:
    """Absolute path of a local `evaluate` module, for `evaluate.load(path)` (works offline)."""
    check_choice(name, EVALUATE_MODULES, "evaluate module")
    return str(Path(__file__).resolve().parent / "evaluate_modules" / name)


def evaluate_metric_info(description: str, inputs_description: str,
                         features: dict | None = None):
    """The `evaluate.MetricInfo` of a local module: string predictions and references unless
    `features` ({column: datasets feature}) says otherwise."""
    import datasets
    import evaluate

    if features is None:
        features = {"predictions": datasets.Value("string"),
                    "references": datasets.Value("string")}
    return evaluate.MetricInfo(description=description, citation="",
                               inputs_description=inputs_description,
                               features=datasets.Features(features))
