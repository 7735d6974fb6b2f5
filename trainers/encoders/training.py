"""Fine-tuning of the encoder baselines (docs/usb-baselines.md §3.0).

`train_encoder` runs `spec.num_epochs` epochs over a task's encoder inputs (`spec.max_steps`
may end the last one early): AdamW with the spec's betas, epsilon and weight decay (none on
biases and norms), transformers' linear schedule (`spec.warmup_ratio`, 0: no warmup),
gradients clipped at `spec.max_grad_norm`. A step's loss is
the sum over its micro-batches of their per-position BCE sums divided by the positions the
whole step counts (`batches.counted_positions`), so the micro-batch cut does not change it.
After each epoch `evaluate(model)` (the task's Table 2 metric on validation, higher is better)
decides whether the epoch is the best so far; the best epoch's model is saved to `best/`
(`model_files.save_model`, written atomically). `train_log.jsonl` gets a line per epoch and
`train_result.json` the spec, the best epoch and metric, and provenance. Each epoch's loss is
read before anything is saved: a non-finite loss stops the run with a one-line error.

Randomness: the example order from `numpy.random.default_rng([spec.seed, epoch])`, dropout
from torch's generator seeded with `spec.seed` inside `torch.random.fork_rng` (the caller's
random state is left as it was).

Interrupts and `--resume`: `trainers.encoders.resume`. Prediction:
`trainers.encoders.prediction`.
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
    steps_per_epoch,
    trainable_indices,
)
from trainers.encoders.heads import TASK_MODELS
from trainers.encoders.inputs import IGNORED
from trainers.encoders.model_files import save_model
from trainers.encoders.resume import (
    RESUME_FOLDER,
    InterruptSave,
    Position,
    position_of,
    random_state,
    read_resume_state,
    remove_resume_state,
    restore,
    run_identity,
    save_resume_state,
)
from trainers.encoders.spec import EncoderSpec
from trainers.finetuning.model_setup import decay_groups

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


def autocast_context(device, dtype):
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


def to_device(batch: dict, device) -> dict:
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
        batch = to_device(collate(features, piece, pad_id), device)
        with autocast_context(device, dtype):
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
    position: Position
    total_steps: int = 0            # the schedule's steps (`spec.max_steps` caps them)
    epochs: int = 0                 # the epochs they take (the last may be cut short)
    resumed: bool = False
    guard: InterruptSave | None = None
    random: dict | None = None      # torch's random state after the last whole step

    @property
    def identity(self) -> dict:
        return run_identity(self.spec.to_dict(), self.budget, len(self.features))

    def save_state(self) -> Path:
        return save_resume_state(self.out_dir, self.model, self.optimizer, self.scheduler,
                                 self.identity, self.position, self.random or random_state())


def _apply_step(run: _Run) -> None:
    """Clip, step the optimizer and the schedule, and count the step."""
    import torch

    torch.nn.utils.clip_grad_norm_(
        [p for p in run.model.parameters() if p.requires_grad], run.spec.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.position.steps_done += 1
    run.position.global_step += 1


def _epoch(run: _Run, epoch: int, bar) -> list[float]:
    """The epoch's optimizer steps not done yet (a resumed epoch skips those done); every
    step's loss of the epoch, read once at its end."""
    import torch

    run.model.train()
    position, guard = run.position, run.guard
    plan = epoch_plan(run.features, run.spec.batch_size, run.spec.seed, epoch, run.budget)
    for step in plan[position.steps_done:][:run.total_steps - position.global_step]:
        loss = accumulate_step(run.model, run.features, step, run.pad_id, run.dtype)
        with guard.applying():
            _apply_step(run)
            guard.unread.append(loss)
            run.random = random_state()
        bar.update(1)
    values = position.epoch_losses + (torch.stack(guard.unread).float().cpu().tolist()
                                      if guard.unread else [])
    position.epoch_losses, guard.unread = values, []
    if not all(math.isfinite(value) for value in values):
        raise SumbenchError(f"training diverged in epoch {epoch + 1} (by step "
                            f"{position.global_step}): the loss is "
                            f"{next(v for v in values if not math.isfinite(v))} "
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
    last = epoch + 1 == run.epochs
    position = run.position
    best = _is_better(metric, position.best_metric) or last and position.best_epoch is None
    if best:
        position.best_epoch, position.best_metric = epoch + 1, metric
        _save_best(run)
    return {"epoch": epoch + 1, "step": position.global_step,
            "loss": sum(losses) / len(losses) if losses else None,
            "lr": run.scheduler.get_last_lr()[0], run.spec.selection_metric: metric,
            "best": best, "seconds": round(seconds, 3)}


def _result(run: _Run, epochs: int) -> dict:
    config = {"spec": run.spec.to_dict(), "model": run.model.kind,
              "model_options": run.model.options(), "examples": len(run.features),
              "tokens_per_microbatch": run.budget,
              "precision": "bf16" if run.dtype is not None else "fp32"}
    position = run.position
    return {"spec": run.spec.to_dict(), "selection_metric": run.spec.selection_metric,
            "best_epoch": position.best_epoch, "best_metric": position.best_metric,
            "epochs": epochs, "steps": position.global_step, "best_model": BEST_FOLDER,
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


def check_inputs(spec: EncoderSpec, features: Sequence[Any], model) -> None:
    """Inputs and a model of the spec's task, and something to train on."""
    if not features or not trainable_indices(features).size:
        raise SumbenchError(f"no training examples with a label for {spec.task}")
    kind = feature_kind(features)
    if kind != TASK_INPUTS[spec.task] or model.kind != TASK_MODELS[spec.task]:
        raise SumbenchError(f"{spec.task} trains a {TASK_MODELS[spec.task]} on "
                            f"{TASK_INPUTS[spec.task]} inputs, got a {model.kind} and {kind} "
                            f"inputs")


def check_fresh_folder(out_dir: Path) -> None:
    """An `out_dir` holding no earlier run's results (its best/ could outlive a run that
    improves nothing)."""
    done = [name for name in (BEST_FOLDER, RESULT_FILE, RESUME_FOLDER)
            if (out_dir / name).exists()]
    if done:
        raise SumbenchError(f"{out_dir} already holds a training run ({done[0]}); give an "
                            f"empty or new folder, or resume it")


def _start(spec: EncoderSpec, features: Sequence[Any], model, out_dir: Path,
           budget: int | None, tokenizer, resume: bool) -> _Run:
    """The run's optimizer, schedule and position: from `out_dir/resume/` when resuming a run
    that saved one (its weights and random state loaded), else fresh."""
    check_inputs(spec, features, model)
    per_epoch = steps_per_epoch(features, spec.batch_size)
    total = min(per_epoch * spec.num_epochs, spec.max_steps or per_epoch * spec.num_epochs)
    optimizer, scheduler = build_optimizer(spec, model, total)
    device = model_device(model)
    run = _Run(spec, features, model, out_dir, optimizer, scheduler,
               pad_token_id(model, tokenizer), autocast_dtype(spec.precision, device),
               budget, tokenizer, Position(), total, -(-total // per_epoch))
    state = read_resume_state(out_dir, run.identity) if resume else None
    if state is None:
        check_fresh_folder(out_dir)
        return run
    run.position, run.resumed = position_of(state), True
    return run


def train_encoder(spec: EncoderSpec, features_train: Sequence[Any], model, out_dir: str | Path,
                  *, evaluate: Callable[[Any], float] | None = None,
                  tokens_per_microbatch: int | None = DEFAULT_TOKENS_PER_MICROBATCH,
                  progress: bool = True, tokenizer=None, resume: bool = False) -> Path:
    """Fine-tune `model` (on its device) on `features_train`; returns `out_dir / "best"`, the
    best epoch's model (the last epoch's without `evaluate`). `model` ends with the last
    epoch's weights. `tokenizer`, when given, must pad as the encoder does and is saved with
    the model. With `resume`, a run that saved its state in `out_dir` (`resume.py`) goes on
    from it; an interrupt saves the state after the last completed step."""
    from tqdm.auto import tqdm

    out_dir = Path(out_dir)
    run = _start(spec, features_train, model, out_dir, tokens_per_microbatch, tokenizer,
                 resume)
    out_dir.mkdir(parents=True, exist_ok=True)
    position = run.position
    with _seeded(spec.seed, model_device(model)), \
            InterruptSave(run.save_state, position) as run.guard, \
            tqdm(total=run.total_steps, initial=position.global_step, unit="step",
                 desc=f"fine-tuning {spec.task}", disable=None if progress else True) as bar:
        if run.resumed:
            restore(out_dir, model, run.optimizer, run.scheduler)
        run.random = random_state()
        for epoch in range(position.epoch, run.epochs):
            started = time.perf_counter()
            losses = _epoch(run, epoch, bar)
            position.log.append(_after_epoch(run, epoch, losses, evaluate,
                                             time.perf_counter() - started))
            position.epoch, position.steps_done, position.epoch_losses = epoch + 1, 0, []
            write_jsonl(out_dir / LOG_FILE, position.log)
            if epoch + 1 < run.epochs:
                run.save_state()
                run.guard.mark_saved()
    write_json(out_dir / RESULT_FILE, _result(run, run.epochs))
    remove_resume_state(out_dir)
    return out_dir / BEST_FOLDER
