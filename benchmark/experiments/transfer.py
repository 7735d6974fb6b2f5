"""Cross-domain transfer (USB paper, Section 6, Fig. 2 and Table 4).

Each training domain's train / validation / test splits are subsampled to the given article
counts (seeded, ids recorded); one model per training domain is fine-tuned on the chosen tasks
(`sumbench train`); every model is evaluated on every domain's subsampled test set and on the
test-only domains the data has (`sumbench run --training none`, one run folder per cell under
OUT/cells/<train>/<test>). `--full-domain D` adds the paper's extra row: D trained on its full
train split. Outputs: transfer.json (matrix[train][test][task] = headline, average over tasks,
delta against the test domain's in-domain cell, optional bootstrap intervals, subsample ids,
provenance), transfer_heatmap.png, transfer_deltas.png, summary.md.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.experiments.common import (
    ModelSettings,
    average_tasks,
    cell_values,
    mean_or_none,
    tasks_with_test_items,
)
from benchmark.experiments.data import DataSource, shortfalls, split_article_ids, subsample_domain
from benchmark.experiments.jobs import Job
from benchmark.experiments.plots import delta_bars, heatmap
from benchmark.experiments.report import grid, notes, null_lines
from tasks.base import SPLITS
from tasks.plumbing.errors import SumbenchError, did_you_mean

TRAIN_DOMAINS = ("biographies", "companies", "disasters", "schools")
TEST_ONLY_DOMAINS = ("landmarks", "newspapers")
FULL_SUFFIX = "-full"
SUBSAMPLE_DIR = "subsample"


@dataclass(frozen=True)
class TransferSpec:
    source: DataSource
    settings: ModelSettings
    domains: tuple[str, ...] = TRAIN_DOMAINS
    counts: tuple[int, int, int] = (40, 19, 38)          # train, validation, test articles
    full_domain: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", tuple(self.domains))
        if not self.domains:
            raise SumbenchError("--domains is empty")
        if len(set(self.domains)) != len(self.domains):
            raise SumbenchError(f"a domain is listed twice: {', '.join(self.domains)}")
        bad = [count for count in self.counts if count < 1]
        if bad:
            raise SumbenchError(f"article counts must be >= 1, got {list(self.counts)}")
        if self.full_domain is not None and self.full_domain not in self.domains:
            raise SumbenchError(f"--full-domain {self.full_domain} is not one of --domains "
                                f"({', '.join(self.domains)})")

    def to_dict(self) -> dict:
        return {"kind": "transfer", "source": dataclasses.asdict(self.source),
                "settings": self.settings.to_dict(), "domains": list(self.domains),
                "counts": dict(zip(SPLITS, self.counts)), "full_domain": self.full_domain}


def check_known_domains(domains: Sequence[str], available: Sequence[str]) -> None:
    """Every training domain is one the data has (`all` is every domain at once, not one)."""
    known = [name for name in available if name != "all"]
    for domain in domains:
        if domain not in known:
            raise SumbenchError(f"unknown domain {domain!r}: the data has "
                                f"{', '.join(known) or 'none'}{did_you_mean(domain, known)}")


def check_domains(spec: TransferSpec, data_dir: Path) -> list[str]:
    """The test-only domains present; an error for a training domain without training
    articles, before anything is trained (unknown domains: `check_known_domains`)."""
    present = sorted(path.name for path in data_dir.iterdir() if path.is_dir())
    for domain in spec.domains:
        if not split_article_ids(data_dir, domain, "train", spec.settings.tasks):
            raise SumbenchError(f"domain {domain!r} has no train split: it cannot be a "
                                f"training domain (test-only domains are evaluated only)")
    return [domain for domain in TEST_ONLY_DOMAINS
            if domain in present and domain not in spec.domains]


def prepare(spec: TransferSpec, out: Path) -> tuple[Path, dict, list[str]]:
    """Subsampled task datasets under OUT/data/subsample; (folder, subsample record,
    test-only domains)."""
    variants = list(spec.domains) + list(TEST_ONLY_DOMAINS)
    available = spec.source.available_variants()
    check_known_domains(spec.domains, available)  # before any data is derived
    data_dir = spec.source.task_datasets(out, [v for v in variants if v in available])
    test_only = check_domains(spec, data_dir)
    target = out / "data" / SUBSAMPLE_DIR
    tasks = spec.settings.tasks
    counts = dict(zip(SPLITS, spec.counts))
    record = {domain: subsample_domain(data_dir, target, domain, counts, spec.settings.seed,
                                       tasks) for domain in spec.domains}
    for domain in test_only:
        record[domain] = subsample_domain(data_dir, target, domain,
                                          {"train": 0, "validation": 0, "test": counts["test"]},
                                          spec.settings.seed, tasks)
    if spec.full_domain:
        full = dict(counts, train=None)
        record[spec.full_domain + FULL_SUFFIX] = subsample_domain(
            data_dir, target, spec.full_domain, full, spec.settings.seed, tasks,
            target=spec.full_domain + FULL_SUFFIX)
    return target, record, test_only


def training_rows(spec: TransferSpec) -> list[str]:
    return list(spec.domains) + ([spec.full_domain + FULL_SUFFIX] if spec.full_domain else [])


def plan_jobs(spec: TransferSpec, out: Path, data: Path, test_domains: Sequence[str]
              ) -> list[Job]:
    """One training job per row, one cell per (row, test domain) that has a test item of
    some task; a cell runs the tasks its test domain has items of."""
    jobs = []
    present_in = {test: tasks_with_test_items(data, test, spec.settings.tasks)
                  for test in test_domains}
    for row in training_rows(spec):
        train_out = out / "models" / row
        jobs.append(Job(f"train/{row}", "train",
                        spec.settings.train_argv(data, row, train_out), str(train_out)))
        for test in test_domains:
            present = present_in[test]
            if not present:
                continue
            cell_out = out / "cells" / row / test
            jobs.append(Job(f"cell/{row}/{test}", "cell",
                            spec.settings.cell_argv(spec.settings.final_folder(train_out),
                                                    data, test, cell_out, tasks=present),
                            str(cell_out), needs=(f"train/{row}",)))
    return jobs


def collect(spec: TransferSpec, out: Path, data: Path, test_domains: Sequence[str]
            ) -> dict[str, Any]:
    """matrix / average / delta / intervals / null reasons from the finished cells."""
    tasks = list(spec.settings.tasks)
    matrix, cis, reasons, missing = {}, {}, {}, []
    planned_in = {test: tasks_with_test_items(data, test, tasks) for test in test_domains}
    for row in training_rows(spec):
        matrix[row], cis[row], reasons[row] = {}, {}, {}
        for test in test_domains:
            planned = planned_in[test]
            cell = out / "cells" / row / test
            matrix[row][test], cis[row][test], why = cell_values(
                cell, tasks, planned, test, f"cell/{row}/{test}")
            if why:
                reasons[row][test] = why
            if planned and not (cell / "results.json").is_file():
                missing.append(f"{row}/{test}")
    averaged = average_tasks([cell for tests in matrix.values() for cell in tests.values()],
                             tasks)
    average = {row: {test: mean_or_none([cells[task] for task in averaged])
                     for test, cells in tests.items()} for row, tests in matrix.items()}
    delta, delta_task = {}, {}
    for row, tests in matrix.items():
        delta[row], delta_task[row] = {}, {}
        for test, cells in tests.items():
            own = matrix.get(test, {}).get(test)
            delta[row][test] = None if own is None or average[row][test] is None or \
                average[test][test] is None else average[row][test] - average[test][test]
            delta_task[row][test] = {task: None if own is None or cells[task] is None or
                                     own[task] is None else cells[task] - own[task]
                                     for task in tasks}
    return {"matrix": matrix, "average": average, "average_tasks": averaged, "delta": delta,
            "delta_per_task": delta_task, "ci95": cis if spec.settings.bootstrap else None,
            "null_reasons": reasons, "missing_cells": missing}


RESULT_FILE = "transfer.json"


def spec_from_dict(data: dict) -> TransferSpec:
    counts = data["counts"]
    return TransferSpec(DataSource(**data["source"]), ModelSettings(**data["settings"]),
                        tuple(data["domains"]), tuple(counts[split] for split in SPLITS),
                        data["full_domain"])


def test_domains_of(spec: TransferSpec, prepared: dict) -> list[str]:
    return list(spec.domains) + list(prepared["test_only"])


def prepare_experiment(spec: TransferSpec, out: Path) -> dict:
    data, record, test_only = prepare(spec, out)
    return {"data": str(data), "subsample": record, "test_only": test_only,
            "shortfalls": shortfalls(record)}


def experiment_jobs(spec: TransferSpec, out: Path, prepared: dict) -> list[Job]:
    return plan_jobs(spec, out, Path(prepared["data"]), test_domains_of(spec, prepared))


def experiment_result(spec: TransferSpec, out: Path, prepared: dict) -> dict:
    return {**collect(spec, out, Path(prepared["data"]), test_domains_of(spec, prepared)),
            "rows": training_rows(spec), "columns": test_domains_of(spec, prepared),
            "tasks": list(spec.settings.tasks), "subsample": prepared["subsample"],
            "shortfalls": prepared["shortfalls"]}


def write_figures(result: dict, out: Path) -> list[str]:
    heatmap(result["rows"], result["columns"], result["average"],
            out / "transfer_heatmap.png", title="Cross-domain transfer: average headline",
            label="mean headline over " + averaged_label(result))
    delta_bars(result["rows"], result["columns"], result["tasks"], result["delta_per_task"],
               out / "transfer_deltas.png",
               title="Change against in-domain training (headline points)")
    return ["transfer_heatmap.png", "transfer_deltas.png"]


def averaged_label(result: dict) -> str:
    """The tasks the averages are over, as the figures and summary name them (a result
    written before `average_tasks` existed averaged over every task)."""
    averaged = result.get("average_tasks", result["tasks"])
    if averaged == result["tasks"]:
        return "all tasks"
    return ", ".join(averaged) if averaged else "no task (none is defined in every cell)"


def summary_markdown(result: dict) -> str:
    rows, columns = result["rows"], result["columns"]
    parts = ["# Cross-domain transfer", "",
             "Rows: training domain; columns: test domain. Headlines x100 (ROUGE geometric "
             "mean, AUC, F1 or exact match per task), averaged over the tasks defined in "
             f"every cell: {averaged_label(result)}.", "",
             "## Average headline", "", grid(rows, columns, result["average"], "train \\ test"),
             "", "## Change against in-domain training (average)", "",
             grid(rows, columns, result["delta"], "train \\ test", signed=True)]
    for task in result["tasks"]:
        per_task = {row: {col: result["delta_per_task"][row][col][task] for col in columns}
                    for row in rows}
        parts += ["", f"## {task}: change against in-domain", "",
                  grid(rows, columns, per_task, "train \\ test", signed=True)]
    missing = [f"cell {cell} has no results" for cell in result["missing_cells"]]
    return "\n".join(parts) + notes(result["shortfalls"] + missing) + \
        notes(null_lines(result.get("null_reasons", {})), "Empty cells") + "\n"
