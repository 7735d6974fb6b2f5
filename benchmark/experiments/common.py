"""What every experiment shares: the model settings that become `sumbench train` / `sumbench
run` command lines, reading a cell's headlines, and the experiment folder's spec file."""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.results import read_results
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import iter_jsonl, json_text, read_json
from trainers.encoders.pipeline import is_encoder_profile

SPEC_FILE = "experiment.json"


@dataclass(frozen=True)
class ModelSettings:
    """How each model of an experiment is fine-tuned and evaluated."""
    model: str
    tasks: tuple[str, ...]
    profile: str = "flan-t5-large"
    lora: bool = False
    seed: int = 0
    max_steps: int | None = None
    overrides: tuple[tuple[str, str], ...] = ()     # --set FIELD=VALUE of train and run
    early_stopping: str = "metric"
    bootstrap: int = 0
    batch_size: int = 8
    max_new_tokens: int | None = None               # prediction output budget (run's)
    device: str = "auto"                            # train and run --device

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        pairs = self.overrides.items() if isinstance(self.overrides, Mapping) else self.overrides
        object.__setattr__(self, "overrides", tuple((str(k), str(v)) for k, v in pairs))
        if self.max_steps is not None and self.max_steps < 1:
            raise SumbenchError(f"--max-steps must be >= 1, got {self.max_steps}")
        if self.bootstrap < 0:
            raise SumbenchError(f"--bootstrap must be >= 0, got {self.bootstrap}")

    @property
    def encoder(self) -> bool:
        """Whether the profile fine-tunes encoders (one model per task, `roberta-large`)."""
        return is_encoder_profile(self.profile)

    def final_folder(self, train_out: Path) -> Path:
        """Where `sumbench train` leaves the trained weights (an encoder profile's: the
        folder of per-task models itself)."""
        if self.encoder:
            return train_out
        return train_out / ("adapter" if self.lora else "model")

    def _sets(self) -> list[str]:
        """--set of every override, and --device unless it is the default (auto)."""
        device = [] if self.device == "auto" else ["--device", self.device]
        return device + [item for key, value in self.overrides
                         for item in ("--set", f"{key}={value}")]

    def train_argv(self, data: Path, variant: str, out: Path, *, seed: int | None = None,
                   train_fraction: float | None = None, tasks: Sequence[str] | None = None
                   ) -> tuple[str, ...]:
        argv = ["train", "--tasks", *(tasks or self.tasks), "--data", str(data), "--variant",
                variant, "--out", str(out), "--profile", self.profile, "--model", self.model,
                "--seed", str(self.seed if seed is None else seed), "--early-stopping",
                self.early_stopping, "--resume"]
        if self.lora:
            argv.append("--lora")
        if self.max_steps is not None:
            argv += ["--max-steps", str(self.max_steps)]
        if train_fraction is not None:
            argv += ["--train-fraction", repr(float(train_fraction))]
        return tuple(argv + self._sets())

    def cell_argv(self, model: Path, data: Path, variant: str, out: Path, *,
                  seed: int | None = None, tasks: Sequence[str] | None = None
                  ) -> tuple[str, ...]:
        argv = ["run", "--model", str(model), "--training", "none", "--tasks",
                ",".join(tasks or self.tasks), "--data", str(data), "--variant", variant,
                "--split", "test", "--profile", self.profile, "--out", str(out), "--seed",
                str(self.seed if seed is None else seed), "--bootstrap", str(self.bootstrap),
                "--batch-size", str(self.batch_size), "--resume"]
        if self.max_new_tokens is not None:
            argv += ["--max-new-tokens", str(self.max_new_tokens)]
        return tuple(argv + self._sets())

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data.update(tasks=list(self.tasks), overrides=dict(self.overrides))
        return data


def cell_headlines(cell_dir: Path) -> dict[str, dict[str, Any]]:
    """task -> {"headline", "ci95", "metric"} of a finished run folder (headlines x100)."""
    results = read_results(cell_dir)
    metrics = {row["task"]: row["metric"] for row in results["table"]}
    table = {}
    for task, scores in results["scores"].items():
        ci = (scores.get("ci95") or {}).get("headline")
        table[task] = {"headline": scores["headline"], "ci95": ci,
                       "metric": metrics.get(task, "headline")}
    return table


def tasks_with_test_items(data: Path, variant: str, tasks: Sequence[str]) -> list[str]:
    """The tasks whose test file in `variant` holds at least one record (a cell runs those:
    a subsample can draw no item of a task in some domain)."""
    present = []
    for task in tasks:
        path = data / variant / task / "test.jsonl"
        if path.is_file() and next(iter_jsonl(path), None) is not None:
            present.append(task)
    return present


def no_items_reason(variant: str) -> str:
    return f"no test items in {variant}"


def cell_values(cell_dir: Path, tasks: Sequence[str], planned: Sequence[str], variant: str,
                job: str) -> tuple[dict[str, float | None], dict[str, dict | None],
                                   dict[str, str]]:
    """(task -> headline, task -> ci95, task -> why the headline is None) of one cell. A task
    the cell did not run had no test items; a finished task whose metric is undefined (e.g.
    UNSUP F1 with no gold and no predicted span) says so; an unfinished cell says which
    job to finish."""
    values: dict[str, float | None] = dict.fromkeys(tasks)
    cis: dict[str, dict | None] = dict.fromkeys(tasks)
    reasons: dict[str, str] = {task: no_items_reason(variant) for task in tasks
                               if task not in planned}
    if not planned:
        return values, cis, reasons
    if not (cell_dir / "results.json").is_file():
        reasons.update({task: f"job {job} has not finished" for task in planned})
        return values, cis, reasons
    table = cell_headlines(cell_dir)
    for task in planned:
        if task not in table:
            reasons[task] = f"{cell_dir / 'results.json'} has no {task} (an earlier plan?)"
            continue
        values[task], cis[task] = table[task]["headline"], table[task]["ci95"]
        if values[task] is None:
            reasons[task] = f"{table[task]['metric']} is undefined on this test set"
    return values, cis, reasons


def average_tasks(cells: Sequence[Mapping[str, float | None]],
                  tasks: Sequence[str]) -> list[str]:
    """The tasks defined in every cell that defines any: every average is then over the
    same tasks (a cell that defines none, e.g. one whose job has not finished, is left out
    of the choice and has no average)."""
    scored = [cell for cell in cells if any(value is not None for value in cell.values())]
    return [task for task in tasks
            if scored and all(cell.get(task) is not None for cell in scored)]


def check_distinct_names(fractions: Sequence[float], option: str) -> None:
    """Fractions name their jobs and rows as `{f:g}` (6 significant digits): two that read
    the same would share one model and one row, the second silently dropped."""
    named: dict[str, float] = {}
    for fraction in fractions:
        name = f"{float(fraction):g}"
        if name in named and named[name] != float(fraction):
            raise SumbenchError(f"{option}: {named[name]!r} and {fraction!r} both read "
                                f"{name} (names keep 6 significant digits): give distinct "
                                f"fractions")
        named[name] = float(fraction)


def mean_or_none(values: Sequence[float | None]) -> float | None:
    defined = [value for value in values if value is not None and math.isfinite(value)]
    return sum(defined) / len(defined) if defined and len(defined) == len(values) else None


#: settings that may change when an experiment resumes: they never change a number
#: (`sumbench run` predicts the same outputs at any batch size; each job records the device
#: it ran on, and an experiment recorded before the setting existed used auto)
RESUMABLE_CHANGES = ("settings.batch_size", "settings.device")


def claim_folder(out: Path, spec: Mapping[str, Any], resume: bool) -> None:
    """Write OUT/experiment.json; a folder holding another experiment (or this one without
    --resume) is refused, naming each setting that differs with its old and new value. A
    change of `RESUMABLE_CHANGES` alone is accepted and written to the spec file."""
    path = out / SPEC_FILE
    spec = json.loads(json.dumps(spec))
    if path.is_file():
        earlier = read_json(path, what="experiment spec")
        if not resume:
            raise SumbenchError(f"{out} already holds an experiment; pass --resume to continue "
                                f"it or choose another folder")
        changed = changed_settings(earlier, spec)
        refused = [line for name, line in changed if name not in RESUMABLE_CHANGES]
        if refused:
            raise SumbenchError(f"cannot resume {out}: the experiment was started with other "
                                f"settings ({path}):\n  " + "\n  ".join(refused) +
                                "\nresume with the same settings, or choose another --out")
        if changed:
            path.write_text(json_text(spec) + "\n", encoding="utf-8")
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SumbenchError(f"{out} exists and is not an empty folder; choose another (--out)")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(spec) + "\n", encoding="utf-8")


def changed_settings(earlier: Any, now: Any, name: str = "") -> list[tuple[str, str]]:
    """(dotted name, "name: old -> new") of every leaf that differs between two specs."""
    if isinstance(earlier, dict) and isinstance(now, dict):
        return [change for key in sorted(set(earlier) | set(now), key=str)
                for change in changed_settings(earlier.get(key, _ABSENT), now.get(key, _ABSENT),
                                               f"{name}.{key}" if name else str(key))]
    if earlier == now:
        return []
    return [(name, f"{name}: {_shown(earlier)} -> {_shown(now)}")]


_ABSENT = object()


def _shown(value: Any) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value)
