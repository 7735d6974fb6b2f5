"""Non-neural baselines for the eight USB tasks: deterministic, no training, inputs only.

Each baseline reads only what a model would see (input lines, the claim, the summary to fix or
annotate), never a reference or label, and its predictions become official prediction records
(`task.prediction_record`) that `sumbench score` reads and a leaderboard accepts.

| task | baseline | prediction |
| --- | --- | --- |
| abstractive_summarization | Lead-k | the first k input lines after the title line, joined |
| topicbased_summarization | Lead-k | the first k input lines after the title line |
| multisentence_compression | Lead-1 | the first input line |
| extractive_summarization | position prior | p(line j) = P(positive at position j) |
| evidence_extraction | lexical overlap | p(line j) = overlap(j) / max overlap (the best get 1) |
| factuality_classification | constant | p(supported) = 0.5 for every claim |
| fixing_factuality | copy input | the summary sentence unchanged |
| unsupported_span_prediction | no spans | the summary unchanged (no [] ... [/] marks) |

k of Lead-k is the median number of reference lines per record of the task's train split when
`train_instances` are given (reference lengths of the train split are public data), else
`DEFAULT_LEAD_K`. The position prior is the smoothed share of positive labels at each line
position over `train_instances` (positions past the longest train document use the last
one), else 1 / (1 + j): earlier lines more likely. The lexical overlap of a line is the share
of the claim's content tokens (tasks.plumbing.text.content_tokens) that it contains; dividing by the
record's largest overlap makes the best-matching lines the predicted evidence (p = 1 >= 0.5)
and keeps the ranking for AUC.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from tasks.plumbing.text import content_tokens

DEFAULT_LEAD_K = 3
#: the display name of each task's baseline
BASELINES = {"abstractive_summarization": "Lead-k", "topicbased_summarization": "Lead-k",
             "multisentence_compression": "Lead-1",
             "extractive_summarization": "position prior",
             "evidence_extraction": "lexical overlap",
             "factuality_classification": "constant 0.5",
             "fixing_factuality": "copy input", "unsupported_span_prediction": "no spans"}

#: the baselines fitted on the train split, and the defaults they use when it is empty
FITTED_ON_TRAIN = {"abstractive_summarization": f"k = {DEFAULT_LEAD_K}",
                   "topicbased_summarization": f"k = {DEFAULT_LEAD_K}",
                   "extractive_summarization": "the prior 1 / (1 + j)"}


def lead_k(train_instances: Sequence[dict] | None) -> int:
    if not train_instances:
        return DEFAULT_LEAD_K
    counts = [len(instance.get("output_lines", [])) for instance in train_instances]
    return max(1, int(round(statistics.median(counts)))) if counts else DEFAULT_LEAD_K


def lead_text(lines: Sequence[str], k: int, skip: int = 0) -> str:
    return " ".join(line for line in list(lines)[skip:skip + k])


def position_prior(train_instances: Sequence[dict] | None) -> Callable[[int], float]:
    """p(position j) from train labels (add-one smoothed), or 1 / (1 + j)."""
    if not train_instances:
        return lambda position: 1.0 / (1.0 + position)
    positives: list[int] = []
    totals: list[int] = []
    for instance in train_instances:
        for position, label in enumerate(instance.get("labels", [])):
            if position >= len(totals):
                positives.append(0)
                totals.append(0)
            positives[position] += int(label)
            totals[position] += 1
    rates = [(positive + 1) / (total + 2) for positive, total in zip(positives, totals)]
    return lambda position: rates[min(position, len(rates) - 1)] if rates else 0.5


def overlap(claim: str, line: str) -> float:
    wanted = set(content_tokens(claim))
    return len(wanted & set(content_tokens(line))) / len(wanted) if wanted else 0.0


def baseline_prediction(task_name: str, instance: dict, *, k: int,
                        prior: Callable[[int], float]) -> Any:
    """The baseline's prediction for one instance (reads input fields only)."""
    lines = instance.get("input_lines", [])
    if task_name in ("abstractive_summarization", "topicbased_summarization"):
        return lead_text(lines, k, skip=1 if len(lines) > 1 else 0)
    if task_name == "multisentence_compression":
        return lead_text(lines, 1)
    if task_name == "extractive_summarization":
        return [prior(position) for position in range(len(lines))]
    if task_name == "evidence_extraction":
        overlaps = [overlap(instance["claim"], line) for line in lines]
        best = max(overlaps, default=0.0)
        return [value / best if best else 0.0 for value in overlaps]
    if task_name == "factuality_classification":
        return [0.5]
    if task_name == "fixing_factuality":
        return instance["initial_summary"]
    if task_name == "unsupported_span_prediction":
        return instance["summary"]
    raise KeyError(f"no baseline for task {task_name!r} (baselines: {', '.join(BASELINES)})")


def baseline_records(task, instances: Sequence[dict], *,
                     train_instances: Sequence[dict] | None = None) -> list[dict]:
    """Official prediction records of the task's baseline, one per instance, in order."""
    k = lead_k(train_instances)
    prior = position_prior(train_instances)
    return [task.prediction_record(instance, baseline_prediction(task.name, instance, k=k,
                                                                  prior=prior))
            for instance in instances]


def baseline_settings(train_instances: Sequence[dict] | None) -> dict:
    """What the baselines were fitted to (for results files)."""
    return {"lead_k": lead_k(train_instances),
            "position_prior": "train label rates" if train_instances else "1 / (1 + j)"}
