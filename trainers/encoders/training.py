"""Fine-tuning and prediction of the encoder baselines (docs/usb-baselines.md §3.0).

`train_encoder` runs `spec.num_epochs` epochs over a task's encoder inputs: AdamW with the
spec's betas, epsilon and weight decay (none on biases and norms), transformers' linear schedule
(`spec.warmup_ratio`, 0: no warmup), gradients clipped at `spec.max_grad_norm`. A step's loss is
the sum over its micro-batches of their per-position BCE sums divided by the positions the
whole step counts (`batches.counted_positions`), so the micro-batch cut does not change it.
After each epoch `evaluate(model)` (the task's Table 2 metric on validation, higher is better)
decides whether the epoch is the best so far; the best epoch's model is saved to `best/`
(`heads.save_model`, written atomically). `train_log.jsonl` gets a line per epoch and
`train_result.json` the spec, the best epoch and metric, and provenance. Each epoch's loss is
read before anything is saved: a non-finite loss stops the run with a one-line error.

Randomness: the example order from `numpy.random.default_rng([spec.seed, epoch])`, dropout
from torch's generator seeded with `spec.seed` inside `torch.random.fork_rng` (the caller's
random state is left as it was).

`predict_probabilities` gives σ(logit) per pair (FAC, EVEXT), per token (UNSUP: one per input
id) or per sentence (EXT: one per kept sentence), in input order whatever the batch size.
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import write_json, write_jsonl
from tasks.plumbing.provenance import provenance
from trainers.encoders.batches import (
    collate,
    counted_positions,
    epoch_plan,
    feature_kind,
    feature_sizes,
    steps_per_epoch,
    trainable_indices,
)
from trainers.encoders.heads import TASK_MODELS, save_model
from trainers.encoders.inputs import IGNORED
from trainers.encoders.spec import EncoderSpec
from trainers.finetuning.finetune import decay_groups

#: padded tokens per micro-batch by default (32 inputs of 512 tokens, or 128 EVEXT pairs)
DEFAULT_TOKENS_PER_MICROBATCH = 16384
BEST_FOLDER = "best"
LOG_FILE = "train_log.jsonl"
RESULT_FILE = "train_result.json"


# ---- shared pieces ------------------------------------------------------------------------
def pad_token_id(model, tokenizer=None) -> int:
    """The padding id: the encoder config's (RoBERTa derives position ids from it), which the
    tokenizer's must equal when one is given."""
    config_pad = model.encoder.config.pad_token_id
    if tokenizer is not None and tokenizer.pad_token_id != config_pad:
        raise SumbenchError(f"the tokenizer pads with id {tokenizer.pad_token_id} but the "
                            f"encoder's config has pad_token_id {config_pad}; use the "
                            f"checkpoint's own tokenizer")
    return int(config_pad)


def autocast_dtype(precision: str, device) -> Any:
    """bfloat16 for "bf16", and for "auto" on a GPU that supports it; None (fp32) else."""
    import torch

    if precision == "fp32":
        return None
    supported = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if precision == "bf16":
        if device.type == "cuda" and not supported:
            raise SumbenchError("precision 'bf16' needs a GPU with bfloat16 support; use 'fp32'")
        return torch.bfloat16
    return torch.bfloat16 if supported else None


def _autocast(device, dtype):
    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def model_device(model):
    return next(model.parameters()).device


def logits_of(model, batch: dict) -> Any:
    if "sentence_mask" in batch:
        return model(batch["input_ids"], batch["attention_mask"], batch["sentence_mask"])
    return model(batch["input_ids"], batch["attention_mask"])


def bce_sum(logits, labels, mask=None):
    """Binary cross-entropy with logits (in fp32) summed over the positions that count (labels
    other than `IGNORED`, and `mask` true)."""
    import torch
    import torch.nn.functional as F

    counted = labels != IGNORED
    if mask is not None:
        counted = counted & mask.bool()
    losses = F.binary_cross_entropy_with_logits(
        logits.float(), labels.clamp(min=0).float(), reduction="none")
    return torch.where(counted, losses, torch.zeros_like(losses)).sum()


def _to_device(batch: dict, device) -> dict:
    return {name: value.to(device, non_blocking=True) for name, value in batch.items()}


# ---- one optimizer step -------------------------------------------------------------------
def accumulate_step(model, features: Sequence[Any], step: Sequence[np.ndarray], pad_id: int,
                    dtype: Any = None):
    """Forward and backward of one step's micro-batches (gradients added to the model's);
    returns the step's loss (a detached device tensor): Σ BCE over counted positions / their
    number in the whole step."""
    device = model_device(model)
    total = counted_positions(features, np.concatenate(step))
    loss = None
    for piece in step:
        batch = _to_device(collate(features, piece, pad_id), device)
        with _autocast(device, dtype):
            logits = logits_of(model, batch)
        part = bce_sum(logits, batch["labels"], batch.get("sentence_mask")) / max(1, total)
        part.backward()
        loss = part.detach() if loss is None else loss + part.detach()
    return loss


def build_optimizer(spec: EncoderSpec, model, total_steps: int):
    """AdamW (no weight decay on biases and norms) and the linear schedule."""
    import torch
    from transformers import get_scheduler

    optimizer = torch.optim.AdamW(decay_groups(model, spec.weight_decay),
                                  lr=spec.learning_rate, betas=tuple(spec.adam_betas),
                                  eps=spec.adam_epsilon)
    scheduler = get_scheduler("linear", optimizer,
                              num_warmup_steps=math.ceil(spec.warmup_ratio * total_steps),
                              num_training_steps=total_steps)
    return optimizer, scheduler


# ---- the run ------------------------------------------------------------------------------
@dataclass
class _Run:
    spec: EncoderSpec
    features: Sequence[Any]
    model: Any
    out_dir: Path
    optimizer: Any
    scheduler: Any
    pad_id: int
    dtype: Any
    budget: int | None
    tokenizer: Any
    global_step: int = 0
    best_epoch: int | None = None
    best_metric: float | None = None


def _epoch(run: _Run, epoch: int, bar) -> list[float]:
    """One epoch of optimizer steps; its step losses, read once at its end."""
    import torch

    run.model.train()
    losses = []
    for step in epoch_plan(run.features, run.spec.batch_size, run.spec.seed, epoch, run.budget):
        losses.append(accumulate_step(run.model, run.features, step, run.pad_id, run.dtype))
        torch.nn.utils.clip_grad_norm_(
            [p for p in run.model.parameters() if p.requires_grad], run.spec.max_grad_norm)
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad(set_to_none=True)
        run.global_step += 1
        bar.update(1)
    values = torch.stack(losses).float().cpu().tolist() if losses else []
    if not all(math.isfinite(value) for value in values):
        raise SumbenchError(f"training diverged in epoch {epoch + 1} (by step {run.global_step}): "
                            f"the loss is {next(v for v in values if not math.isfinite(v))} "
                            f"(learning_rate {run.spec.learning_rate:g}); lower the learning "
                            f"rate or check the data")
    return values


def _is_better(metric: float | None, best: float | None) -> bool:
    if metric is None or not math.isfinite(metric):
        return False
    return best is None or metric > best


def _save_best(run: _Run) -> None:
    with atomic_directory(run.out_dir / BEST_FOLDER) as staging:
        save_model(run.model, staging, run.tokenizer)


def _after_epoch(run: _Run, epoch: int, losses: list[float],
                 evaluate: Callable[[Any], float] | None, seconds: float) -> dict:
    """Evaluate, keep the model when best (the last epoch's without `evaluate` or when no
    epoch gave a finite metric), and the epoch's log line."""
    metric = None if evaluate is None else evaluate(run.model)
    metric = None if metric is None or not math.isfinite(float(metric)) else float(metric)
    last = epoch + 1 == run.spec.num_epochs
    best = _is_better(metric, run.best_metric) or last and run.best_epoch is None
    if best:
        run.best_epoch, run.best_metric = epoch + 1, metric
        _save_best(run)
    return {"epoch": epoch + 1, "step": run.global_step,
            "loss": sum(losses) / len(losses) if losses else None,
            "lr": run.scheduler.get_last_lr()[0], run.spec.selection_metric: metric,
            "best": best, "seconds": round(seconds, 3)}


def _result(run: _Run, epochs: int) -> dict:
    config = {"spec": run.spec.to_dict(), "model": run.model.kind,
              "model_options": run.model.options(), "examples": len(run.features),
              "tokens_per_microbatch": run.budget,
              "precision": "bf16" if run.dtype is not None else "fp32"}
    return {"spec": run.spec.to_dict(), "selection_metric": run.spec.selection_metric,
            "best_epoch": run.best_epoch, "best_metric": run.best_metric, "epochs": epochs,
            "steps": run.global_step, "best_model": BEST_FOLDER,
            "provenance": provenance(config, seeds={"seed": run.spec.seed})}


@contextlib.contextmanager
def _seeded(seed: int, device):
    """torch's generators seeded with `seed` inside, restored afterwards."""
    import torch

    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield


#: the inputs each task trains on (trainers.encoders.batches.feature_kind)
TASK_INPUTS = {"factuality_classification": "pair", "evidence_extraction": "pair",
               "unsupported_span_prediction": "token", "extractive_summarization": "article"}


def check_run(spec: EncoderSpec, features: Sequence[Any], model, out_dir: Path) -> None:
    """Inputs and a model of the spec's task, something to train on, and an `out_dir`
    holding no earlier run's results (its best/ could outlive a run that improves nothing)."""
    if not features or not trainable_indices(features).size:
        raise SumbenchError(f"no training examples with a label for {spec.task}")
    kind = feature_kind(features)
    if kind != TASK_INPUTS[spec.task] or model.kind != TASK_MODELS[spec.task]:
        raise SumbenchError(f"{spec.task} trains a {TASK_MODELS[spec.task]} on "
                            f"{TASK_INPUTS[spec.task]} inputs, got a {model.kind} and {kind} "
                            f"inputs")
    done = [name for name in (BEST_FOLDER, RESULT_FILE) if (out_dir / name).exists()]
    if done:
        raise SumbenchError(f"{out_dir} already holds a training run ({done[0]}); give an "
                            f"empty or new folder")


def train_encoder(spec: EncoderSpec, features_train: Sequence[Any], model, out_dir: str | Path,
                  *, evaluate: Callable[[Any], float] | None = None,
                  tokens_per_microbatch: int | None = DEFAULT_TOKENS_PER_MICROBATCH,
                  progress: bool = True, tokenizer=None) -> Path:
    """Fine-tune `model` (on its device) on `features_train`; returns `out_dir / "best"`, the
    best epoch's model (the last epoch's without `evaluate`). `model` ends with the last
    epoch's weights. `tokenizer`, when given, must pad as the encoder does and is saved with
    the model."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    check_run(spec, features_train, model, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_epoch = steps_per_epoch(features_train, spec.batch_size)
    optimizer, scheduler = build_optimizer(spec, model, per_epoch * spec.num_epochs)
    device = model_device(model)
    run = _Run(spec, features_train, model, out_dir, optimizer, scheduler,
               pad_token_id(model, tokenizer), autocast_dtype(spec.precision, device),
               tokens_per_microbatch, tokenizer)
    log: list[dict] = []
    with _seeded(spec.seed, device), tqdm(total=per_epoch * spec.num_epochs, unit="step",
                                          desc=f"fine-tuning {spec.task}",
                                          disable=None if progress else True) as bar:
        for epoch in range(spec.num_epochs):
            started = time.perf_counter()
            losses = _epoch(run, epoch, bar)
            log.append(_after_epoch(run, epoch, losses, evaluate,
                                    time.perf_counter() - started))
            write_jsonl(out_dir / LOG_FILE, log)
    write_json(out_dir / RESULT_FILE, _result(run, spec.num_epochs))
    return out_dir / BEST_FOLDER


# ---- prediction ---------------------------------------------------------------------------
def _rows_out(kind: str, features: Sequence[Any], piece: np.ndarray, probabilities) -> list:
    if kind == "pair":
        return [float(value) for value in probabilities.tolist()]
    widths = [len(features[int(index)].input_ids) if kind == "token"
              else len(features[int(index)].sentence_ids) for index in piece]
    return [row[:width] for row, width in zip(probabilities.tolist(), widths)]


#: a prediction batch closes where the next input is this many times smaller than its first
PREDICTION_GROWTH = 1.25


def prediction_batches(order: np.ndarray, sizes: np.ndarray, batch_size: int,
                       growth: float = PREDICTION_GROWTH) -> list[np.ndarray]:
    """`order` (largest first) in batches of at most `batch_size` inputs of similar size: a
    batch closes before an input `growth` times smaller than its first, so padding stays
    small however the lengths spread (one input at a time pads nothing)."""
    batches, start = [], 0
    for position in range(1, len(order) + 1):
        if position == len(order) or position - start == batch_size or \
                sizes[order[position]] * growth < sizes[order[start]]:
            batches.append(order[start:position])
            start = position
    return batches


def predict_probabilities(model, features: Sequence[Any], tokenizer=None, batch_size: int = 32,
                          *, precision: str = "fp32", progress: bool = False) -> list:
    """σ(logit) per pair (a float each), per token (a list per input, one per input id) or per
    sentence (a list per article; [] for an article without sentences), in input order.
    Batches of at most `batch_size` inputs of similar size, longest first
    (`prediction_batches`); the model is left in eval mode."""
    import torch
    from tqdm.auto import tqdm

    if not features:
        return []
    if batch_size < 1:
        raise SumbenchError(f"batch_size must be a positive integer, got {batch_size!r}")
    kind, pad_id = feature_kind(features), pad_token_id(model, tokenizer)
    device = model_device(model)
    dtype = autocast_dtype(precision, device)
    longest, rows = feature_sizes(features)
    order = np.lexsort((np.arange(len(features)), -longest, -(longest * rows)))
    order = order[rows[order] > 0]
    results: list[Any] = [[] for _ in features]
    model.eval()
    with torch.no_grad():
        for piece in tqdm(prediction_batches(order, longest * rows, batch_size),
                          desc="predicting", unit="batch", disable=None if progress else True):
            batch = _to_device(collate(features, piece, pad_id), device)
            with _autocast(device, dtype):
                logits = logits_of(model, batch)
            probabilities = torch.sigmoid(logits.float()).cpu()
            for index, value in zip(piece, _rows_out(kind, features, piece, probabilities)):
                results[int(index)] = value
    return results
