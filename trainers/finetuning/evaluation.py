"""Validation signals for early stopping and best-model selection during fine-tuning.

`early_stopping_fn(kind, spec, tasks, data_dir)` picks one (`benchmark.results.EARLY_STOPPING`):
"metric" (`headline_metric_fn`: the tasks' mean validation headline score), "loss"
(`trainers.finetuning.finetune.validation_loss_fn`: minus the validation loss) or "none" (None).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from trainers.finetuning.data import resolve_tasks
from trainers.finetuning.finetune import validation_loss_fn
from trainers.finetuning.training_run import EvaluateFn
from trainers.inference.predict import PredictSpec, predict_task


def early_stopping_fn(kind: str, spec, task_names: Sequence[str],
                      data_dir: str | None) -> EvaluateFn | None:
    """evaluate_fn for best-model selection: validation headline metric, -loss, or None."""
    if kind == "loss":
        return validation_loss_fn(spec, list(task_names), data_dir)
    if kind == "metric":
        return headline_metric_fn(spec, list(task_names), data_dir)
    return None


def headline_metric_fn(spec, task_names: Sequence[str], data_dir: str | None) -> EvaluateFn:
    """evaluate_fn: the mean over tasks of the headline score on the validation split,
    predicted with trainers.inference.predict (every process predicts everything) on the
    windows training used, with the release's decoding (`validation_predict_spec`). NaN when
    a task's headline is undefined (e.g. AUC with one class), which the training loop counts
    as an evaluation without improvement."""
    cache: dict = {}

    def evaluate(model, tokenizer) -> float:
        if not cache:
            for task in resolve_tasks(task_names, spec.variant):
                cache[task.name] = (task, task.instances(
                    task.load("validation", spec.variant, data_dir)))
        predict_spec = validation_predict_spec(spec, str(next(model.parameters()).device))
        scores = [task.headline(task.score(predict_task(task, instances, model, tokenizer,
                                                        predict_spec)))
                  for task, instances in cache.values()]
        return mean_headline(scores)

    return evaluate


def validation_predict_spec(spec, device: str):
    """The PredictSpec of validation predictions: the FinetuneSpec's input, window and output
    budgets, and the release's decoding (4 beams for text and span tasks, greedy labels)."""
    return PredictSpec(max_input_tokens=spec.max_input_tokens, window_tokens=spec.window_tokens,
                       max_new_tokens=spec.max_output_tokens, device=device)


def mean_headline(scores: Iterable[float | None]) -> float:
    """The mean of per-task headline scores; NaN when any is undefined (None or NaN)."""
    values = [math.nan if score is None else float(score) for score in scores]
    return sum(values) / len(values) if values else math.nan
