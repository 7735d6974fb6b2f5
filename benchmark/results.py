"""Run specs and results files: what a `sumbench run` did and what it scored.

`RunSpec` is a frozen, JSON-round-tripping description of a run (HELM style): everything that
decides its numbers, plus a few knobs that never change them (`NON_RESULT_FIELDS`, e.g. the
batch size), which a resumed run may change.

`DIR/results.json` (format `RESULTS_FORMAT`), written atomically:
  spec         RunSpec.to_dict()
  scores       {task: {metric: value, ..., "headline", "n_records", "length_mismatches"}}
               exactly as `sumbench score DIR/predictions/*.jsonl` prints them
  table        [{"task", "metric", "value"}]: each task's headline metric (value x100;
               None when the metric is undefined, printed "n/a")
  predictions  {task: {"path": relative path, "sha256", "records"}}
  models       per task, the checkpoint that produced its predictions (name, revision, the
               hub commit it resolved to when known, adapter; few-shot: the backend too)
  training     per training folder: tasks, the fine-tuning spec (FinetuneSpec.to_dict()),
               result (train_result.json), model, total_steps, git (of the first run) and
               resumes ([{"step" resumed from, "git"}]) (finetune mode)
  fewshot      per task: the few-shot runner's report (fewshot mode)
  provenance   tasks.plumbing.provenance.provenance(config, seeds): command, resolved configs,
               seeds, git commit, package versions, platform, time
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import get_task
from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.errors import DataError, SumbenchError, json_type
from tasks.plumbing.io import file_sha256, json_text, read_json
from tasks.plumbing.json_fields import JsonFields
from tasks.plumbing.provenance import provenance
from trainers.finetuning.profiles import RESUMABLE_SPEC_FIELDS

RESULTS_FILE = "results.json"
RESULTS_FORMAT = "sumbench-results/1"
MODES = ("finetune", "fewshot")
TRAINING_MODES = ("multitask", "per-task", "none")
EARLY_STOPPING = ("metric", "loss", "none")
FEWSHOT_BACKENDS = ("hf-causal", "hf-seq2seq", "openai")
#: the OpenAI-compatible endpoints the openai backend speaks
OPENAI_APIS = ("chat", "completions")
#: fields that never change a run's numbers (a resumed run may change them)
NON_RESULT_FIELDS = ("batch_size", "device")
RESULT_KEYS = ("format", "spec", "scores", "table", "predictions", "models", "training",
               "fewshot", "provenance")


@dataclass(frozen=True)
class RunSpec(JsonFields):
    """Everything that determines a `sumbench run` apart from its output folder."""

    model: str
    tasks: tuple[str, ...]
    mode: str = "finetune"
    variant: str = "all"
    split: str = "test"
    seed: int = 0
    revision: str | None = None
    data_dir: str | None = None
    raw_dir: str | None = None
    # --- fine-tuning (mode "finetune") ---------------------------------------------------
    profile: str = "flan-t5-large"
    lora: bool = False
    training: str = "multitask"
    train_tasks: tuple[str, ...] = ()          # empty: the evaluated tasks
    early_stopping: str = "metric"
    train_overrides: tuple[tuple[str, Any], ...] = ()   # FinetuneSpec fields
    # --- prediction -----------------------------------------------------------------------
    batch_size: int = 8
    max_input_tokens: int | None = None        # None: the profile's
    max_new_tokens: int | None = None          # None: the profile's / the task's default
    num_beams: int = 4                         # text/span tasks (the release's 4); labels greedy
    label_rule: str = "official"               # Yes/No positions (trainers.inference.label_probs)
    device: str = "auto"
    # --- few-shot (mode "fewshot") --------------------------------------------------------
    fewshot_backend: str | None = None
    style: str | None = None
    n_shots: int | None = None
    max_prompt_tokens: int | None = None       # None: no limit of its own; HF backends
    #                                            always fit the model's context
    base_url: str | None = None
    openai_api: str = "chat"                   # or "completions" (openai backend)
    max_concurrency: int = 1                   # requests at once (openai backend)
    top_logprobs: int = 5                      # 0: no token log-probabilities asked for
    label_reading: str | None = None           # FAC/EXT/EVEXT answers of the paper's
    #                                            Llama/Vicuna styles: "probabilities" (their
    #                                            default) or "phrases" (the release's rules)
    # --- scoring --------------------------------------------------------------------------
    bootstrap: int = 0
    rouge_aggregate: str = "mean"              # or "bootstrap-mid" (seeded with `seed`)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "train_tasks", tuple(self.train_tasks))
        pairs = self.train_overrides.items() if isinstance(self.train_overrides, Mapping) \
            else self.train_overrides
        object.__setattr__(self, "train_overrides",
                           tuple(sorted((str(key), value) for key, value in pairs)))
        self.validate()

    def validate(self) -> None:
        if not self.model:
            raise SumbenchError("RunSpec.model is empty: give a hub id or a local folder")
        if not self.tasks:
            raise SumbenchError("RunSpec.tasks is empty")
        for name, value, allowed in (("mode", self.mode, MODES),
                                     ("training", self.training, TRAINING_MODES),
                                     ("early_stopping", self.early_stopping, EARLY_STOPPING)):
            if value not in allowed:
                raise SumbenchError(f"RunSpec.{name} must be one of {', '.join(allowed)}; "
                                    f"got {value!r}")
        if self.mode == "fewshot" and self.fewshot_backend not in FEWSHOT_BACKENDS:
            raise SumbenchError(f"few-shot runs need a backend: one of "
                                f"{', '.join(FEWSHOT_BACKENDS)}; got {self.fewshot_backend!r}")
        if self.training == "per-task" and self.train_tasks \
                and tuple(self.train_tasks) != tuple(self.tasks):
            raise SumbenchError("per-task training trains one model per evaluated task; "
                                "train_tasks cannot differ from tasks")
        if self.openai_api not in OPENAI_APIS:
            raise SumbenchError(f"RunSpec.openai_api must be one of {', '.join(OPENAI_APIS)}, "
                                f"got {self.openai_api!r}")
        if not 0 <= int(self.top_logprobs) <= 20:
            raise SumbenchError(f"RunSpec.top_logprobs must be in 0..20, got "
                                f"{self.top_logprobs}")
        if self.rouge_aggregate not in ("mean", "bootstrap-mid"):
            raise SumbenchError(f"RunSpec.rouge_aggregate must be mean or bootstrap-mid, got "
                                f"{self.rouge_aggregate!r}")
        if self.data_dir and self.raw_dir:
            raise SumbenchError("give either a task-dataset folder or a raw folder, not both")
        for name in ("batch_size", "num_beams", "max_concurrency"):
            if int(getattr(self, name)) < 1:
                raise SumbenchError(f"RunSpec.{name} must be >= 1, got {getattr(self, name)}")
        for name, low in (("bootstrap", 0), ("n_shots", 0), ("max_prompt_tokens", 1)):
            value = getattr(self, name)
            if value is not None and int(value) < low:
                raise SumbenchError(f"RunSpec.{name} must be >= {low}, got {value}")

    @property
    def trained_tasks(self) -> tuple[str, ...]:
        return self.train_tasks or self.tasks

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "train_overrides": dict(self.train_overrides)}

    def result_fields(self) -> dict[str, Any]:
        """The fields a resumed run must share with the run it continues (train_overrides
        without the fine-tuning fields a resumed training may change)."""
        fields = {key: value for key, value in self.to_dict().items()
                  if key not in NON_RESULT_FIELDS}
        overrides = fields["train_overrides"]
        fields["train_overrides"] = {key: overrides[key] for key in overrides
                                     if key not in RESUMABLE_SPEC_FIELDS}
        return fields

    def differences(self, other: RunSpec) -> list[str]:
        """Result fields whose values differ between the two specs."""
        mine, theirs = self.result_fields(), other.result_fields()
        return sorted(key for key in mine if mine[key] != theirs.get(key))


# ---- the table ----------------------------------------------------------------------------

def results_table(scores: Mapping[str, Mapping[str, Any]],
                  order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per task: its headline metric's name and value (x100; None when undefined),
    in `order`."""
    rows = []
    for name in order or sorted(scores):
        task = get_task(name)
        headline = scores[task.name]["headline"]
        rows.append({"task": task.name, "metric": task.main_metric,
                     "value": None if headline is None else float(headline)})
    return rows


def format_value(value: float | None) -> str:
    """Two decimals, or "n/a" for an undefined (None) value."""
    return "n/a" if value is None else f"{value:.2f}"


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text table: task, metric, value (two decimals; "n/a" when undefined)."""
    header = ("task", "metric", "value")
    body = [(row["task"], row["metric"], format_value(row["value"])) for row in rows]
    widths = [max(len(line[column]) for line in [header, *body]) for column in range(3)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}" for a, b, c in
             [header, tuple("-" * w for w in widths), *body]]
    return "\n".join(lines)


# ---- the document -------------------------------------------------------------------------

def prediction_entries(out_dir: str | Path, paths: Mapping[str, Path],
                       scores: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """{task: {"path" (relative to out_dir), "sha256", "records"}}."""
    out_dir = Path(out_dir).resolve()
    return {task: {"path": Path(path).resolve().relative_to(out_dir).as_posix(),
                   "sha256": file_sha256(path),
                   "records": int(scores[task]["n_records"])}
            for task, path in paths.items()}


def build_results(spec: RunSpec, scores: Mapping[str, Mapping[str, Any]], *,
                  predictions: Mapping[str, dict], models: Mapping[str, Any],
                  training: Mapping[str, Any] | None = None,
                  fewshot: Mapping[str, Any] | None = None,
                  config: Mapping[str, Any] | None = None,
                  seeds: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The results document (see the module docstring); `config` adds resolved settings."""
    full_config = {"run": spec.to_dict(), "models": dict(models), **dict(config or {})}
    return {"format": RESULTS_FORMAT, "spec": spec.to_dict(), "scores": dict(scores),
            "decoding": decoding_settings(spec, config),
            "table": results_table(scores, [name for name in spec.tasks if name in scores]),
            "predictions": dict(predictions), "models": dict(models),
            "training": None if training is None else dict(training),
            "fewshot": None if fewshot is None else dict(fewshot),
            "provenance": provenance(full_config, dict(seeds or {"seed": spec.seed}))}


def decoding_settings(spec: RunSpec, config: Mapping[str, Any] | None) -> dict[str, Any]:
    """How the predictions were decoded (fine-tuning: the prediction spec's beams and budgets;
    few-shot: the backend's)."""
    predict = dict((config or {}).get("predict_spec") or {})
    if spec.mode == "finetune":
        return {"text_and_span_tasks": {"num_beams": predict.get("num_beams", spec.num_beams)},
                "label_tasks": {"num_beams": predict.get("label_num_beams", 1),
                                "label_rule": predict.get("label_rule", spec.label_rule)},
                "max_new_tokens": predict.get("max_new_tokens"),
                "max_input_tokens": predict.get("max_input_tokens"),
                "window_tokens": predict.get("window_tokens")}
    return {"fewshot_backend": spec.fewshot_backend, "style": spec.style,
            "max_new_tokens": spec.max_new_tokens,
            **({"label_reading": spec.label_reading} if spec.label_reading else {})}


def _beams(count: Any) -> str:
    return "greedy (1 beam)" if count == 1 else f"{count} beams"


def format_decoding(decoding: Mapping[str, Any]) -> str:
    """One line for the terminal."""
    if "text_and_span_tasks" in decoding:
        text, label = (decoding[key]["num_beams"] for key in ("text_and_span_tasks",
                                                               "label_tasks"))
        return (f"decoding: text/span tasks {_beams(text)}, label tasks {_beams(label)} "
                f"({decoding['label_tasks']['label_rule']} Yes/No rule), at most "
                f"{decoding['max_new_tokens']} new tokens")
    return f"decoding: few-shot {decoding['fewshot_backend']} ({decoding['style']})"


def write_results(out_dir: str | Path, results: Mapping[str, Any]) -> Path:
    """Write DIR/results.json atomically (whole or not at all); returns its path."""
    validate_results(results, RESULTS_FILE)
    path = Path(out_dir) / RESULTS_FILE
    text = json_text(results) + "\n"
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


def read_results(path: str | Path) -> dict[str, Any]:
    """A results document, validated; a folder means its results.json."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    results = read_json(path, what="results file")
    validate_results(results, str(path))
    return results


def validate_results(results: Any, path: str) -> None:
    """Raise DataError (path, field) unless `results` is a well-formed results document."""
    if not isinstance(results, Mapping):
        raise DataError("expected a JSON object", path=path)
    for key in RESULT_KEYS:
        if key not in results:
            raise DataError("missing key", path=path, field=key)
    if results["format"] != RESULTS_FORMAT:
        raise DataError(f"unknown format {results['format']!r} (expected {RESULTS_FORMAT})",
                        path=path, field="format")
    try:
        RunSpec.from_dict(results["spec"])
    except (SumbenchError, TypeError) as error:
        raise DataError(str(error), path=path, field="spec") from None
    _validate_scores(results["scores"], path)
    if not isinstance(results["provenance"], Mapping):
        raise DataError(f"expected a JSON object, got {json_type(results['provenance'])}",
                        path=path, field="provenance")
    for key in ("git", "packages", "seeds", "config", "command"):
        if key not in results["provenance"]:
            raise DataError("missing key", path=path, field=f"provenance.{key}")


def _validate_scores(scores: Any, path: str) -> None:
    """task -> metrics objects, numbers finite, each headline a number or null."""
    if not isinstance(scores, Mapping):
        raise DataError(f"expected an object of task scores, got {json_type(scores)}",
                        path=path, field="scores")
    for task, metrics in scores.items():
        if not isinstance(metrics, Mapping):
            raise DataError(f"expected an object of metrics, got {json_type(metrics)}",
                            path=path, field=f"scores.{task}")
        if "headline" not in metrics:
            raise DataError("missing key", path=path, field=f"scores.{task}.headline")
        if not isinstance(metrics.get("ci95", {}), (Mapping, type(None))):
            raise DataError(f"expected an object of intervals, got "
                            f"{json_type(metrics['ci95'])}", path=path,
                            field=f"scores.{task}.ci95")
        headline = metrics["headline"]
        if headline is not None and (isinstance(headline, bool)
                                     or not isinstance(headline, (int, float))):
            raise DataError(f"expected a number or null, got {json_type(headline)}",
                            path=path, field=f"scores.{task}.headline")
        for metric, value in metrics.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise DataError("not a finite number", path=path,
                                field=f"scores.{task}.{metric}")
