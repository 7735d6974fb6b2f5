"""Task-agnostic inference: format -> batched generation or Yes/No label probabilities ->
parse/combine -> the task's official prediction records, resumable on disk.

Only the `Task` interface is used: `format`, `output_kind`, `parse`, `combine`,
`prediction_record`. Text tasks ("text", "spans") keep the generated text as `parse` sees it;
"probabilities" tasks get Yes-probabilities per label position (see trainers.inference.label_probs).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.base import ModelInput, Task
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json
from trainers.inference.generation import (
    EncodedSource,
    GeneratedRow,
    encode_sources,
    generate_batch_texts,
    generate_texts,
    iter_batches,
    prepare_for_inference,
)
from trainers.inference.label_probs import (
    label_batch,
    label_probabilities,
    label_token_ids,
    label_values,
)
from trainers.inference.predict_spec import PredictSpec
from trainers.inference.prediction_io import OutputStore, digest, model_fingerprint
from trainers.models.disk_cache import hub_commit
from trainers.models.model_loading import check_model_source, load_errors, load_failure

__all__ = ["PredictSpec", "TaskRun", "predict_task", "run_task", "generate_texts",
           "label_probabilities", "load_model"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    """One model input of one instance."""
    instance: int
    model_input: ModelInput

    @property
    def key(self) -> tuple[int, int]:
        return self.instance, self.model_input.window

    @property
    def n_lines(self) -> int | None:
        lines = self.model_input.lines
        return None if lines is None else lines[1] - lines[0]


@dataclass
class TaskRun:
    """A finished task: its prediction records, per-window outputs and counts."""
    records: list[dict]
    outputs: list[dict]
    counts: dict = field(default_factory=dict)


def format_windows(task: Task, instances: Sequence[dict], tokenizer,
                   spec: PredictSpec) -> list[Window]:
    windows = []
    for index, instance in enumerate(instances):
        inputs = task.format(instance, tokenizer, spec.window_budget)
        numbers = [model_input.window for model_input in inputs]
        if len(set(numbers)) != len(numbers):
            raise SumbenchError(f"task {task.name}: instance {index} has repeated window "
                                f"numbers {numbers}")
        windows.extend(Window(index, model_input) for model_input in inputs)
    return windows


def run_fingerprint(task: Task, windows: Sequence[Window], model, tokenizer,
                    spec: PredictSpec, model_print: dict | None = None) -> dict:
    """What decides a run's outputs (by content, not by where the model was loaded from);
    `model_print`: the prepared model's `model_fingerprint`, when the caller has it."""
    inputs = [[w.instance, w.model_input.window, w.model_input.source,
               list(w.model_input.lines) if w.model_input.lines else None] for w in windows]
    return {"task": task.name, "task_version": task.version, "output_kind": task.output_kind,
            "model": model_print or model_fingerprint(model, tokenizer),
            "spec": spec.result_fields(), "inputs": digest(inputs), "windows": len(windows)}


def prepared_fingerprint(model, tokenizer, spec: PredictSpec) -> dict:
    """The model prepared for `spec` (evaluation mode, device, dtype) and fingerprinted: what
    `run_task` takes as `model_print` for every task predicted with this model."""
    prepare_for_inference(model, spec)
    return model_fingerprint(model, tokenizer)


def window_output(window: Window, encoded: EncodedSource, row: GeneratedRow, task: Task,
                  spec: PredictSpec, tokenizer, labels) -> dict:
    """The per-window output line (what outputs/<task>.jsonl holds)."""
    output = {"instance": window.instance, "window": window.model_input.window,
              "lines": list(window.model_input.lines) if window.model_input.lines else None,
              "source_tokens": encoded.source_tokens, "input_tokens": len(encoded.input_ids),
              "generated_tokens": generated_tokens(row, spec), "text": row.text,
              "probabilities": None}
    if task.output_kind == "probabilities":
        values = label_values(row, window.n_lines, spec.label_rule, labels, tokenizer)
        output.update(probabilities=list(values.values), label_steps=list(values.steps),
                      missing_labels=values.missing, extra_labels=values.extra)
    return output


def generated_tokens(row: GeneratedRow, spec: PredictSpec) -> int:
    """The tokens the model generated for one window: its output's, and the end of sequence
    that ended it before the cap."""
    return len(row.token_ids) + (len(row.token_ids) < spec.max_new_tokens)


def compute_windows(task: Task, windows: Sequence[Window], model, tokenizer, spec: PredictSpec):
    """Yield the outputs of `windows`, one list per batch (length-sorted batches)."""
    encoded = encode_sources(tokenizer, [w.model_input.source for w in windows],
                             spec.max_input_tokens)
    labels = label_token_ids(tokenizer) if task.output_kind == "probabilities" else None

    def run(batch: Sequence[EncodedSource]) -> list[GeneratedRow]:
        if labels is None:
            return generate_batch_texts(model, tokenizer, batch, spec)
        return label_batch(model, tokenizer, batch, spec, labels,
                           [windows[row.index].n_lines for row in batch])

    for rows in iter_batches(encoded, spec.batch_size, run, description=task.name):
        yield [window_output(windows[row.index], encoded[row.index], row, task, spec,
                             tokenizer, labels) for row in rows]


def window_prediction(task: Task, instance: dict, window: Window, output: dict) -> Any:
    if task.output_kind == "probabilities":
        return list(output["probabilities"])
    return task.parse(output["text"], instance, window.model_input)


def build_records(task: Task, instances: Sequence[dict], windows: Sequence[Window],
                  outputs: dict[tuple[int, int], dict]) -> list[dict]:
    """Parse each window, stitch windows per instance with `task.combine`, make records."""
    by_instance: dict[int, list[Window]] = {index: [] for index in range(len(instances))}
    for window in windows:
        by_instance[window.instance].append(window)
    records = []
    for index, instance in enumerate(instances):
        parts = by_instance[index]
        predictions = [window_prediction(task, instance, w, outputs[w.key]) for w in parts]
        combined = task.combine(predictions, instance, [w.model_input for w in parts])
        records.append(task.prediction_record(instance, combined))
    return records


def run_counts(outputs: Sequence[dict], computed: int) -> dict:
    counts = {"windows": len(outputs), "computed": computed, "resumed": len(outputs) - computed,
              "generated_tokens": sum(output.get("generated_tokens", 0) for output in outputs),
              "truncated_inputs": sum(o["input_tokens"] < o["source_tokens"] for o in outputs)}
    if outputs and outputs[0].get("probabilities") is not None:
        counts["missing_labels"] = sum(o["missing_labels"] for o in outputs)
        counts["extra_labels"] = sum(o["extra_labels"] for o in outputs)
        counts["label_count_mismatches"] = sum(
            len(o["probabilities"]) != 1 for o in outputs if o["lines"] is None)
    return counts


def run_task(task: Task, instances: Sequence[dict], model, tokenizer, spec: PredictSpec,
             out_dir: str | Path | None = None, resume: bool = True, *,
             model_info: dict | None = None, model_print: dict | None = None,
             on_batch: Callable[[int], None] | None = None) -> TaskRun:
    """Predict every instance; with `out_dir`, resumable and written to files (see
    trainers.inference.prediction_io). `on_batch(n)` is called after the n-th finished batch. A
    finished run's outputs are reused, but its records are rebuilt from `instances`.
    `model_info` (where the model was loaded from) goes to meta.json's provenance only;
    `model_print` is `model_fingerprint` of the model prepared for `spec`, when the caller
    predicts several tasks with it (`prepared_fingerprint`: hashed once, not per task)."""
    prepare_for_inference(model, spec)
    windows = format_windows(task, instances, tokenizer, spec)
    store = None
    if out_dir is not None:
        store = OutputStore(out_dir, task.name, run_fingerprint(
            task, windows, model, tokenizer, spec, model_print))
    if store and resume:
        finished = reuse_finished_run(task, instances, windows, store)
        if finished is not None:
            return finished
    done = store.load_partial(resume) if store else {}
    pending = [w for w in windows if w.key not in done]
    for number, batch_outputs in enumerate(
            compute_windows(task, pending, model, tokenizer, spec), start=1):
        done.update(((o["instance"], o["window"]), o) for o in batch_outputs)
        if store:
            store.append(batch_outputs)
        if on_batch:
            on_batch(number)
    records = build_records(task, instances, windows, done)
    outputs = [done[w.key] for w in windows]
    counts = run_counts(outputs, len(pending))
    if counts.get("missing_labels") or counts.get("label_count_mismatches"):
        logger.warning("%s: %s", task.name, counts)
    if store:
        meta = {"task": task.name, "spec": spec.to_dict(), "counts": counts}
        store.finish(outputs, records, meta,
                     config={"task": task.name, "spec": spec.to_dict(), "model": model_info,
                             "instances": len(instances)})
    return TaskRun(records, outputs, counts)


def reuse_finished_run(task: Task, instances: Sequence[dict], windows: Sequence[Window],
                       store: OutputStore) -> TaskRun | None:
    """A finished run with the same fingerprint: its stored per-window outputs, with records
    rebuilt from the current `instances` (the fingerprint covers the model inputs only, so
    corrected references reach the records) and the prediction file updated when they
    changed."""
    finished = store.finished_outputs()
    if finished is None:
        return None
    outputs, counts = finished
    by_window = {(output["instance"], output["window"]): output for output in outputs}
    for window in windows:
        if window.key not in by_window:
            raise DataError(f"no output for instance {window.instance}, window "
                            f"{window.model_input.window}; delete the file or run without "
                            f"resuming", path=str(store.outputs_path))
    records = build_records(task, instances, windows, by_window)
    if store.write_records(records):
        logger.info("%s: prediction records rebuilt from the stored outputs", task.name)
    return TaskRun(records, [by_window[w.key] for w in windows], counts)


def predict_task(task: Task, instances: Sequence[dict], model, tokenizer, spec: PredictSpec,
                 out_dir: str | Path | None = None, resume: bool = True, **options) -> list[dict]:
    """The task's prediction records for `instances` (see `run_task`)."""
    return run_task(task, instances, model, tokenizer, spec, out_dir, resume, **options).records


def load_model(path_or_id: str, revision: str | None = None, *, safetensors_only: bool = False):
    """(model, tokenizer, info) for a seq2seq checkpoint; a folder holding a peft adapter
    (adapter_config.json) loads its base model and merges the adapter into it.
    `safetensors_only`: weights from safetensors files only, never a pickle (which can run
    code), as a server loading a submitted model does; the model's own code never runs
    (`trust_remote_code` stays off)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    check_model_source(path_or_id)
    path = Path(path_or_id)
    safe = {"use_safetensors": True} if safetensors_only else {}
    try:
        if (path / "adapter_config.json").is_file():
            return _load_adapter(path, safe)
        model = AutoModelForSeq2SeqLM.from_pretrained(path_or_id, revision=revision,
                                                      trust_remote_code=False, **safe)
        tokenizer = AutoTokenizer.from_pretrained(path_or_id, revision=revision,
                                                  trust_remote_code=False)
    except load_errors() as error:
        raise load_failure(path_or_id, error) from None
    source = str(path.resolve()) if path.is_dir() else path_or_id
    info = {"model": source, "revision": revision, "commit": hub_commit(path_or_id, revision),
            "adapter": None}
    return model, tokenizer, info


def _load_adapter(path: Path, safe: dict):
    from peft import PeftModel
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    config = read_json(path / "adapter_config.json")
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not base:
        raise SumbenchError(f"{path / 'adapter_config.json'}: no base_model_name_or_path")
    base_revision = config.get("revision")
    model = AutoModelForSeq2SeqLM.from_pretrained(base, revision=base_revision,
                                                  trust_remote_code=False, **safe)
    model = PeftModel.from_pretrained(model, str(path), **safe).merge_and_unload()
    has_tokenizer = any((path / name).is_file()
                        for name in ("tokenizer.json", "tokenizer_config.json", "spiece.model"))
    tokenizer = AutoTokenizer.from_pretrained(str(path) if has_tokenizer else base,
                                              revision=None if has_tokenizer else base_revision,
                                              trust_remote_code=False)
    info = {"model": base, "revision": base_revision,
            "commit": hub_commit(base, base_revision), "adapter": str(path.resolve())}
    return model, tokenizer, info
