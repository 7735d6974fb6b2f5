"""Heuristic labels vs human labels (USB paper, Section 7, Table 5).

For EVEXT, FAC and FIX (or a subset): models trained on heuristic training data (one per
evidence method x corruption method, made by `sumbench data heuristic`) and models trained on
fractions of the human training data, all evaluated on the human test set. Outputs:
labels.json (rows = label sources, columns = tasks, headline x100), labels.png, summary.md,
and the heuristic data folders' reports (agreement of heuristic evidence with the human one).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.experiments.common import (
    ModelSettings,
    cell_values,
    check_distinct_names,
    tasks_with_test_items,
)
from benchmark.experiments.data import DataSource
from benchmark.experiments.jobs import Job
from benchmark.experiments.report import notes, null_lines, number, table
from leaderboard.charts import task_bar_chart
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json
from tasks.usb.heuristic import CORRUPTION_METHODS, EVIDENCE_METHODS, HEURISTIC_TASKS

RESULT_FILE = "labels.json"


@dataclass(frozen=True)
class LabelsSpec:
    source: DataSource
    settings: ModelSettings
    human_fractions: tuple[float, ...] = (1.0, 0.2, 0.1, 0.05)
    evidence: tuple[str, ...] = ("rougeL", "entity")
    corruption: tuple[str, ...] = ("factcc",)
    superpal_model: str | None = None
    infill_model: str | None = None

    def __post_init__(self) -> None:
        for name in ("human_fractions", "evidence", "corruption"):
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        if not self.source.raw:
            raise SumbenchError("heuristic labels are derived from raw annotations: give --raw")
        bad = [f for f in self.human_fractions if not 0.0 < float(f) <= 1.0]
        if bad or not self.human_fractions:
            raise SumbenchError(f"--human-fractions must be in (0, 1]; got "
                                f"{list(self.human_fractions)}")
        check_distinct_names(self.human_fractions, "--human-fractions")
        for name, allowed in (("evidence", EVIDENCE_METHODS), ("corruption",
                                                               CORRUPTION_METHODS)):
            unknown = [m for m in getattr(self, name) if m not in allowed]
            if unknown or not getattr(self, name):
                raise SumbenchError(f"--{name} takes {', '.join(allowed)}; got "
                                    f"{', '.join(getattr(self, name)) or 'nothing'}")
        others = [t for t in self.settings.tasks if t not in HEURISTIC_TASKS]
        if others:
            raise SumbenchError(f"heuristic labels exist for {', '.join(HEURISTIC_TASKS)} "
                                f"only; remove {', '.join(others)} from --tasks")
        if "superpal" in self.evidence and not self.superpal_model:
            raise SumbenchError("--evidence superpal needs --superpal-model")
        if "infill" in self.corruption and not self.infill_model:
            raise SumbenchError("--corruption infill needs --infill-model")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data.update(kind="labels", source=dataclasses.asdict(self.source),
                    settings=self.settings.to_dict(),
                    human_fractions=list(self.human_fractions),
                    evidence=list(self.evidence), corruption=list(self.corruption))
        return data


def spec_from_dict(data: dict) -> LabelsSpec:
    return LabelsSpec(DataSource(**data["source"]), ModelSettings(**data["settings"]),
                      tuple(data["human_fractions"]), tuple(data["evidence"]),
                      tuple(data["corruption"]), data["superpal_model"], data["infill_model"])


def rows(spec: LabelsSpec) -> dict[str, dict]:
    """label source name -> how its training data is made."""
    table = {f"human {f:g}": {"kind": "human", "fraction": f} for f in spec.human_fractions}
    for evidence in spec.evidence:
        for corruption in spec.corruption:
            table[f"heuristic {evidence}+{corruption}"] = {
                "kind": "heuristic", "evidence": evidence, "corruption": corruption}
    return table


def _folder(name: str) -> str:
    return name.replace(" ", "-").replace("+", "-")


def prepare_experiment(spec: LabelsSpec, out: Path) -> dict:
    data = spec.source.task_datasets(out, ["all"])
    return {"data": str(data)}


def _heuristic_job(spec: LabelsSpec, out: Path, row: dict, folder: str) -> Job:
    target = out / "data" / folder
    argv = ["data", "heuristic", "--raw", str(spec.source.raw), "--out", str(target),
            "--tasks", ",".join(spec.settings.tasks), "--evidence", row["evidence"],
            "--corruption", row["corruption"], "--seed", str(spec.settings.seed)]
    if row["evidence"] == "superpal":
        argv += ["--superpal-model", spec.superpal_model]
    if row["corruption"] == "infill":
        argv += ["--infill-model", spec.infill_model]
    return Job(f"data/{folder}", "data", tuple(argv), str(target))


def experiment_jobs(spec: LabelsSpec, out: Path, prepared: dict) -> list[Job]:
    human, jobs = Path(prepared["data"]), []
    present = tasks_with_test_items(human, "all", spec.settings.tasks)
    for name, row in rows(spec).items():
        folder = _folder(name)
        train_out, cell_out = out / "models" / folder, out / "cells" / folder
        needs: tuple[str, ...] = ()
        if row["kind"] == "heuristic":
            jobs.append(_heuristic_job(spec, out, row, folder))
            needs = (f"data/{folder}",)
            train_argv = spec.settings.train_argv(out / "data" / folder, "all", train_out)
        else:
            train_argv = spec.settings.train_argv(human, "all", train_out,
                                                  train_fraction=row["fraction"])
        jobs.append(Job(f"train/{folder}", "train", train_argv, str(train_out), needs))
        if present:
            jobs.append(Job(f"cell/{folder}", "cell", spec.settings.cell_argv(
                spec.settings.final_folder(train_out), human, "all", cell_out,
                tasks=present), str(cell_out), needs=(f"train/{folder}",)))
    return jobs


def experiment_result(spec: LabelsSpec, out: Path, prepared: dict) -> dict[str, Any]:
    tasks = list(spec.settings.tasks)
    present = tasks_with_test_items(Path(prepared["data"]), "all", tasks)
    table, reasons, reports = {}, {}, {}
    for name, row in rows(spec).items():
        folder = _folder(name)
        table[name], _, why = cell_values(out / "cells" / folder, tasks, present, "all",
                                          f"cell/{folder}")
        if why:
            reasons[name] = why
        info = out / "data" / folder / "build_info.json"
        if row["kind"] == "heuristic" and info.is_file():
            report = read_json(info)
            reports[name] = {key: report.get(key) for key in (
                "evidence_agreement_with_human", "corruption_types",
                "corruption_agreement_with_human")}
    return {"tasks": tasks, "rows": list(table), "scores": table, "null_reasons": reasons,
            "heuristic_data": reports}


def write_figures(result: dict, out: Path) -> list[str]:
    chart_rows = [{"label": name, "values": result["scores"][name], "ci95": {}}
                  for name in result["rows"]]
    (out / "labels.png").write_bytes(task_bar_chart(
        chart_rows, result["tasks"], title="Human vs heuristic training labels"))
    return ["labels.png"]


def summary_markdown(result: dict) -> str:
    rows = [[name, *[number(result["scores"][name][task]) for task in result["tasks"]]]
            for name in result["rows"]]
    lines = ["# Heuristic vs human training labels", "",
             "Headlines x100 on the human test set (EVEXT F1, FAC AUC, FIX exact match).", "",
             table(["training labels", *result["tasks"]], rows)]
    for name, report in result["heuristic_data"].items():
        agreement = report["evidence_agreement_with_human"] or {}
        lines += ["", f"- {name}: heuristic evidence vs human evidence on the training "
                      f"articles: precision {number(_pct(agreement.get('precision')))}, "
                      f"recall {number(_pct(agreement.get('recall')))}; corruptions "
                      f"{report['corruption_types']}. {report['corruption_agreement_with_human']}"]
    return "\n".join(lines) + notes(null_lines(result.get("null_reasons", {})),
                                    "Empty cells") + "\n"


def _pct(value: float | None) -> float | None:
    return None if value is None else 100.0 * value
