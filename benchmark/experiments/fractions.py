"""Data-size curves (USB paper, Section 7, Table 5): fine-tune on seeded fractions of the
training articles and evaluate every model on the same test set.

Fractions are nested: for one seed the documents of a smaller fraction are a subset of a
larger one's (trainers.finetuning.data.select_documents ranks documents by a hash of (seed, id) and
keeps
the lowest). With several seeds (`--seeds 0,1,2`) each (fraction, seed) is its own model and
the result gives the mean and the spread (sample standard deviation) over seeds. Outputs:
fractions.json (per task and fraction: values per seed, mean, spread; the article ids each
model trained on), fractions.png (score vs fraction, log x), summary.md.
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.experiments.common import (
    ModelSettings,
    cell_values,
    check_distinct_names,
    tasks_with_test_items,
)
from benchmark.experiments.data import DataSource, split_article_ids
from benchmark.experiments.jobs import Job
from benchmark.experiments.plots import curves
from benchmark.experiments.report import notes, null_lines, number, table
from tasks.plumbing.errors import SumbenchError
from trainers.finetuning.data import select_documents

RESULT_FILE = "fractions.json"


@dataclass(frozen=True)
class FractionsSpec:
    source: DataSource
    settings: ModelSettings
    fractions: tuple[float, ...] = (0.05, 0.1, 0.2, 1.0)
    seeds: tuple[int, ...] = (0,)
    variant: str = "all"

    def __post_init__(self) -> None:
        object.__setattr__(self, "fractions", tuple(sorted(set(map(float, self.fractions)))))
        object.__setattr__(self, "seeds", tuple(dict.fromkeys(self.seeds)))
        if not self.fractions:
            raise SumbenchError("--fractions is empty")
        bad = [f for f in self.fractions if not 0.0 < f <= 1.0]
        if bad:
            raise SumbenchError(f"fractions must be in (0, 1]; got {bad}")
        if not self.seeds:
            raise SumbenchError("--seeds is empty")
        if any(seed < 0 for seed in self.seeds):
            raise SumbenchError(f"--seeds must be >= 0; got {list(self.seeds)}")
        check_distinct_names(self.fractions, "--fractions")

    def to_dict(self) -> dict:
        return {"kind": "fractions", "source": dataclasses.asdict(self.source),
                "settings": self.settings.to_dict(), "fractions": list(self.fractions),
                "seeds": list(self.seeds), "variant": self.variant}


def spec_from_dict(data: dict) -> FractionsSpec:
    return FractionsSpec(DataSource(**data["source"]), ModelSettings(**data["settings"]),
                         tuple(data["fractions"]), tuple(data["seeds"]), data["variant"])


def model_name(fraction: float, seed: int) -> str:
    return f"fraction-{fraction:g}-seed-{seed}"


def prepare_experiment(spec: FractionsSpec, out: Path) -> dict:
    """The data folder and, per model, the training article ids of every task."""
    data = spec.source.task_datasets(out, [spec.variant])
    if not (data / spec.variant).is_dir():
        raise SumbenchError(f"the data has no variant {spec.variant!r}")
    by_task = {task: split_article_ids(data, spec.variant, "train", [task])
               for task in spec.settings.tasks}
    empty = [task for task, ids in by_task.items() if not ids]
    if empty:
        raise SumbenchError(f"no training articles for {', '.join(empty)} in variant "
                            f"{spec.variant!r}")
    articles = {model_name(f, s): {task: sorted(select_documents(ids, f, s))
                                   for task, ids in by_task.items()}
                for f in spec.fractions for s in spec.seeds}
    return {"data": str(data), "articles": articles,
            "available": {task: len(ids) for task, ids in by_task.items()}}


def experiment_jobs(spec: FractionsSpec, out: Path, prepared: dict) -> list[Job]:
    """A training job per (fraction, seed), and its cell on the tasks with test items."""
    data, jobs = Path(prepared["data"]), []
    present = tasks_with_test_items(data, spec.variant, spec.settings.tasks)
    for fraction in spec.fractions:
        for seed in spec.seeds:
            name = model_name(fraction, seed)
            train_out, cell_out = out / "models" / name, out / "cells" / name
            jobs.append(Job(f"train/{name}", "train", spec.settings.train_argv(
                data, spec.variant, train_out, seed=seed, train_fraction=fraction),
                str(train_out)))
            if present:
                jobs.append(Job(f"cell/{name}", "cell", spec.settings.cell_argv(
                    spec.settings.final_folder(train_out), data, spec.variant, cell_out,
                    seed=seed, tasks=present), str(cell_out), needs=(f"train/{name}",)))
    return jobs


def experiment_result(spec: FractionsSpec, out: Path, prepared: dict) -> dict[str, Any]:
    tasks = list(spec.settings.tasks)
    present = tasks_with_test_items(Path(prepared["data"]), spec.variant, tasks)
    table: dict[str, dict[str, dict]] = {task: {} for task in tasks}
    reasons: dict[str, dict[str, str]] = {}
    for fraction in spec.fractions:
        values: dict[str, list] = {task: [] for task in tasks}
        for seed in spec.seeds:
            name = model_name(fraction, seed)
            headlines, _, why = cell_values(out / "cells" / name, tasks, present,
                                            spec.variant, f"cell/{name}")
            if why:
                reasons[name] = why
            for task in tasks:
                values[task].append(headlines[task])
        for task in tasks:
            defined = [v for v in values[task] if v is not None]
            complete = len(defined) == len(values[task])
            table[task][f"{fraction:g}"] = {
                "values": values[task],
                "mean": statistics.fmean(defined) if complete else None,
                "spread": statistics.stdev(defined) if complete and len(defined) > 1
                else (0.0 if complete else None)}
    return {"tasks": tasks, "fractions": list(spec.fractions), "seeds": list(spec.seeds),
            "scores": table, "null_reasons": reasons, "articles": prepared["articles"],
            "available_train_articles": prepared["available"]}


def write_figures(result: dict, out: Path) -> list[str]:
    series = {task: [(result["scores"][task][f"{f:g}"]["mean"],
                      result["scores"][task][f"{f:g}"]["spread"] or 0.0)
                     for f in result["fractions"]] for task in result["tasks"]}
    curves(result["fractions"], series, out / "fractions.png",
           title="Score vs share of training articles (mean ± sd over seeds)",
           xlabel="fraction of training articles")
    return ["fractions.png"]


def summary_markdown(result: dict) -> str:
    columns = [f"{f:g}" for f in result["fractions"]]

    def cell(entry: dict) -> str:
        if entry["mean"] is None:
            return "—"
        return number(entry["mean"]) + (f" ± {entry['spread']:.1f}"
                                        if len(result["seeds"]) > 1 else "")
    rows = [[task, *[cell(result["scores"][task][c]) for c in columns]]
            for task in result["tasks"]]
    return "\n".join(["# Data-size curves", "",
                      f"Headlines x100 on the same test set; seeds {result['seeds']} "
                      f"(mean ± sample standard deviation).", "",
                      table(["task \\ fraction", *columns], rows)]) + \
        notes(null_lines(result.get("null_reasons", {})), "Empty cells") + "\n"
