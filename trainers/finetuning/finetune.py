"""The task-agnostic fine-tuning runner: any seq2seq checkpoint, full or LoRA, one or many tasks.

A compact PyTorch loop rather than `Seq2SeqTrainer`, because it needs exactly three things
that are awkward there: a length-grouped batch plan derived from (seed, epoch) and shared by
all processes (so `resume=True` replays the data order exactly and every process agrees on the
batch), a loss normalised by the target tokens of the whole optimizer step (so with dropout 0
the split over devices and accumulation steps does not change results; with dropout, masks
depend on the split), and per-step dropout seeds (so resuming needs no RNG state).
Multi-process runs use `torch.distributed` directly (DDP; NCCL on GPUs, gloo on CPUs), so the
same command runs under `torchrun` and `accelerate launch`.

Output folder: `train_config.json` (spec + provenance), `train_log.jsonl`, `checkpoints/`,
`best/` (weights of the best evaluation), `train_result.json`, and the final `model/` (full
fine-tuning) or `adapter/` (LoRA). When `evaluate_fn` is given, the final weights are those of
the best evaluation (higher is better). Process groups live in
`trainers.finetuning.distributed`, the folder's files (checkpoints, config, log, final weights)
in `trainers.finetuning.checkpoints`, the start model and optimizer in
`trainers.finetuning.model_setup`, and the checkpoint of the last completed step that Ctrl-C or
SIGTERM saves in `trainers.finetuning.interrupts`.
"""
from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.plumbing.errors import SumbenchError
from trainers.finetuning import data as train_data
from trainers.finetuning.checkpoints import (
    CHECKPOINTS,
    append_log,
    check_resumable,
    finished_output,
    latest_checkpoint,
    load_checkpoint,
    load_trainable_state,
    read_train_config,
    save_checkpoint,
    save_final,
    save_weights,
    trainable_state,
    truncate_log,
    write_train_config,
)
from trainers.finetuning.distributed import Distributed, deterministic_algorithms, init_distributed
from trainers.finetuning.fast_path import attention_report, to_device
from trainers.finetuning.interrupts import InterruptCheckpoint
from trainers.finetuning.memory_probe import decide_plan, set_checkpointing
from trainers.finetuning.micro_batches import MicroBatchPlan
from trainers.finetuning.model_setup import (
    build_optimizer,
    load_finetuning_start,
    model_commit,
    prepare_for_training,
    resolve_precision,
)
from trainers.finetuning.preflight import check_before_training
from trainers.finetuning.profiles import FinetuneSpec
from trainers.finetuning.step_log import StepLog, throughput
from trainers.finetuning.training_run import EvaluateFn, TrainingRun, TrainState

# re-exports of names that moved to trainers.finetuning.training_run, .distributed,
# .checkpoints and .model_setup
__all__ = ["finetune", "validation_loss_fn", "validation_loss_evaluator", "resolve_precision",
           "load_finetuning_start", "model_commit", "prepare_for_training", "build_optimizer",
           "EvaluateFn",
           "TrainingRun", "Distributed", "init_distributed", "TrainState", "CHECKPOINTS",
           "trainable_state", "load_trainable_state", "save_checkpoint", "latest_checkpoint",
           "load_checkpoint", "throughput"]

logger = logging.getLogger(__name__)


def finetune(spec: FinetuneSpec, tasks: Sequence[Any], *, data_dir: str | Path | None,
             out_dir: str | Path, evaluate_fn: EvaluateFn | None = None, resume: bool = False,
             stop_after_steps: int | None = None, device: str = "auto",
             prediction_budgets: tuple[int, int] | None = None) -> Path:
    """Fine-tune `spec.model` on the train split of `tasks` (names or Task objects).

    Returns the final `model/` or `adapter/` folder. `stop_after_steps` ends this call early
    after that many optimizer steps, with a checkpoint (for time-limited jobs), and returns the
    checkpoint folder; run again with `resume=True` to continue exactly where it stopped.
    `device`: "auto" (the GPU when torch sees one), "cpu", "cuda" or "cuda:N".
    `prediction_budgets` (input, new tokens) of the prediction that follows are checked
    against the model before the first step, with everything else trainers.finetuning.preflight
    checks.
    """
    out_dir = Path(out_dir).resolve()
    finished = finished_output(out_dir, spec, tasks, data_dir, evaluate_fn) if resume else None
    if finished is not None:
        return finished
    dist = init_distributed(device)
    try:
        with deterministic_algorithms(spec.deterministic, dist.device):
            run = _set_up(spec, tasks, data_dir, out_dir, evaluate_fn, resume, dist,
                          prediction_budgets)
            return _train(run, stop_after_steps)
    finally:
        dist.close()


# ---- set-up ------------------------------------------------------------------------------

def _set_up(spec, tasks, data_dir, out_dir, evaluate_fn, resume, dist,
            prediction_budgets=None) -> TrainingRun:
    bf16 = resolve_precision(spec.precision, dist.device) == "bf16"
    if not resume and (out_dir / "train_config.json").exists():
        raise SumbenchError(f"{out_dir} already holds a training run; pass resume=True "
                            f"(--resume) to continue it or choose another output folder")
    dist.barrier()                  # every process checked before process 0 writes anything
    model, tokenizer, model_info = load_finetuning_start(spec)
    examples = train_data.spec_examples(spec, tasks, "train", data_dir, tokenizer)
    if not len(examples):
        raise SumbenchError(f"no training examples for tasks {list(examples.task_names)} "
                            f"(variant {spec.variant}, fraction {spec.train_fraction})")
    check_before_training(model, tokenizer, examples.task_names, spec.max_input_tokens,
                          spec.max_output_tokens, prediction_budgets)
    if examples.truncated_inputs or examples.truncated_targets:
        logger.warning("truncated %d inputs to %d tokens and %d targets to %d tokens",
                       examples.truncated_inputs, spec.max_input_tokens,
                       examples.truncated_targets, spec.max_output_tokens)
    model = prepare_for_training(model, spec, checkpointing=False).to(dist.device)
    epoch_size = len(train_data.epoch_example_indices(
        examples.task_indices(), spec.mixing, spec.mixing_temperature, spec.seed, 0))
    steps_per_epoch = math.ceil(epoch_size / spec.batch_size)
    total_steps = spec.max_steps or spec.num_epochs * steps_per_epoch
    optimizer, scheduler = build_optimizer(model, spec, total_steps, dist.device)
    state = TrainState()
    checkpoint = latest_checkpoint(out_dir) if resume else None
    continuing = resume and (out_dir / "train_config.json").is_file()
    if continuing:                  # with or without a checkpoint
        check_resumable(out_dir, spec, examples.task_names, data_dir, examples.digest,
                        evaluate_fn)
    if checkpoint is not None:
        state = load_checkpoint(checkpoint, model, optimizer, scheduler, dist.device)
    plan = _micro_batch_plan(spec, model, examples, dist, bf16, state, out_dir, checkpoint)
    run = TrainingRun(spec, dist, out_dir, model, dist.wrap(_compiled(model, spec)), tokenizer,
                      optimizer, scheduler, examples, plan, bf16, steps_per_epoch, total_steps,
                      evaluate_fn, state)
    if dist.is_main:
        write_train_config(run, model_info, data_dir, resumed=continuing,
                           fast_path=_fast_path(run))
        truncate_log(out_dir / "train_log.jsonl", state)
    dist.barrier()
    return run


def _micro_batch_plan(spec, model, examples, dist, bf16, state, out_dir,
                      checkpoint) -> MicroBatchPlan:
    """The checkpoint's plan (a resume never probes again; a checkpoint written before plans
    existed cut by count, with the recorded spec's checkpointing), else a new one, process
    0's for all; gradient checkpointing set on the model as it says."""
    if checkpoint is not None and state.micro_batch_plan is not None:
        plan = MicroBatchPlan.from_dict(state.micro_batch_plan, f"{checkpoint}/state.json")
    elif checkpoint is not None:
        recorded = read_train_config(out_dir)["spec"]
        plan = MicroBatchPlan(None, int(recorded.get("per_device_batch_size",
                                                     spec.per_device_batch_size)),
                              recorded.get("gradient_checkpointing") is True,
                              "recorded before micro-batch plans (by count)")
    else:  # probed once, on process 0 (the others wait for its answer)
        mine = decide_plan(spec, model, examples, dist.device, bf16).to_dict() \
            if dist.is_main else None
        plan = MicroBatchPlan.from_dict(dist.broadcast(mine), "process 0's plan")
    if plan.tokens_per_microbatch is None:
        spec.accumulation_steps(dist.world_size)  # the count must divide the step
    set_checkpointing(model, plan.gradient_checkpointing)
    state.micro_batch_plan = plan.to_dict()
    logger.info("micro-batch plan: %s", plan.describe())
    return plan


def _compiled(model, spec: FinetuneSpec):
    """The module the loop calls: torch.compile's (dynamic shapes) when the spec asks."""
    if not spec.compile:
        return model
    import torch

    return torch.compile(model, dynamic=True)


def _fast_path(run: TrainingRun) -> dict:
    """What train_config.json says about the device path: attention and optimizer."""
    fused = bool(run.optimizer.defaults.get("fused"))
    return {"attention": attention_report(run.model, run.dist.device, run.bf16),
            "optimizer": "AdamW (fused)" if fused else "AdamW (foreach)",
            "compile": run.spec.compile, "pinned_transfers": run.dist.device.type == "cuda"}


# ---- the loop ----------------------------------------------------------------------------

def _train(run: TrainingRun, stop_after_steps: int | None) -> Path:
    from tqdm.auto import tqdm

    guard = InterruptCheckpoint(run)
    with guard:  # saving the final model too: its checkpoint spares the steps on resume
        with tqdm(total=run.total_steps, initial=run.state.global_step, desc="fine-tuning",
                  unit="step", disable=None if run.dist.is_main else True) as bar:
            stopped = _steps(run, guard, bar, stop_after_steps)
        return stopped or save_final(run)  # (weights maybe best/'s: it loads them again)


def _steps(run: TrainingRun, guard: InterruptCheckpoint, bar,
           stop_after_steps: int | None) -> Path | None:
    """Optimizer steps until the run is finished (None) or `stop_after_steps` were taken
    (the checkpoint then saved). The host never waits for the device between steps
    (`StepLog` reads the loss at logging steps, checkpoints and evaluations)."""
    state, spec = run.state, run.spec
    start_step = state.global_step
    step_log = StepLog(run)
    guard.unread_loss = step_log.local_loss   # an interrupt never saves diverged weights
    if state.evaluation_due:               # interrupted while this step was being evaluated
        _evaluate(run, guard)
    epoch = state.global_step // run.steps_per_epoch
    while not _finished(run):
        plan = run.epoch_plan(epoch)
        for position in range(state.global_step - epoch * run.steps_per_epoch, len(plan)):
            loss, tokens = _gradients(run, plan[position])
            with guard.committing():
                _apply_step(run)
                state.evaluation_due = run.evaluate_fn is not None and _eval_due(
                    spec, state.global_step, position == len(plan) - 1,
                    state.global_step >= run.total_steps)
                step_log.add(loss, tokens, run.step_tokens(plan[position]),
                             sum(1 for piece in plan[position] if len(piece)))
                step_log.write_if_due(epoch + (position + 1) / len(plan))
            bar.update(1)
            if state.evaluation_due:
                with step_log.paused():
                    _evaluate(run, guard)
            if _finished(run):
                return None
            if stop_after_steps is not None and state.global_step - start_step >= \
                    stop_after_steps:
                step_log.read_loss()
                return guard.save()
            if spec.save_every_steps and state.global_step % spec.save_every_steps == 0:
                with step_log.paused():
                    guard.save()
        epoch += 1
    return None


def _finished(run: TrainingRun) -> bool:
    return run.state.global_step >= run.total_steps or run.state.stopped_early


def _eval_due(spec: FinetuneSpec, step: int, end_of_epoch: bool, final: bool) -> bool:
    if final:
        return True
    if spec.eval_every_steps is None:
        return end_of_epoch
    return step % spec.eval_every_steps == 0


def _gradients(run: TrainingRun, step: list[np.ndarray]):
    """The gradients of one optimizer step (nothing is applied yet); returns (this process's
    summed target-token loss, a device tensor not read here; the step's target tokens)."""
    import torch

    dist, examples = run.dist, run.examples
    step_indices = np.concatenate(step)
    step_tokens = int(examples.target_lengths[step_indices].sum())
    scale = dist.world_size / step_tokens        # DDP averages gradients over processes
    pieces = train_data.micro_batches_for_rank(step, dist.rank, dist.world_size)
    local_loss = torch.zeros((), device=dist.device)
    with torch.random.fork_rng(devices=dist.rng_devices()):
        torch.manual_seed(_step_seed(run.spec.seed, run.state.global_step, dist.rank))
        for number, piece in enumerate(pieces):
            sync = number == len(pieces) - 1
            with contextlib.nullcontext() if sync else dist.no_sync(run.wrapped):
                loss = _micro_batch_loss(run, piece if len(piece) else step_indices[:1],
                                         zero_weight=not len(piece))
                (loss * scale).backward()
            local_loss += loss.detach()
    return local_loss, step_tokens


def _apply_step(run: TrainingRun) -> None:
    """Clip and apply the gradients, advance the schedule and the step count."""
    import torch

    torch.nn.utils.clip_grad_norm_([p for p in run.model.parameters() if p.requires_grad],
                                   run.spec.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.state.global_step += 1


def _micro_batch_loss(run: TrainingRun, indices: np.ndarray, zero_weight: bool):
    """Summed cross-entropy over the target tokens of one micro-batch."""
    import torch
    import torch.nn.functional as F

    with torch.profiler.record_function("sumbench.collate"):  # named in profiles
        batch = train_data.collate(run.examples, indices, run.tokenizer.pad_token_id,
                                   run.model.config.decoder_start_token_id, zero_weight)
        batch = to_device(batch, run.dist.device)
    labels = batch.pop("labels")
    with torch.autocast(run.dist.device.type, dtype=torch.bfloat16, enabled=run.bf16):
        logits = run.wrapped(**batch, use_cache=False).logits
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                           ignore_index=train_data.LABEL_PAD, reduction="sum")


def _step_seed(seed: int, step: int, rank: int) -> int:
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])


def _evaluate(run: TrainingRun, guard: InterruptCheckpoint) -> None:
    """Run evaluate_fn (on every process; process 0's value counts), then record it: best/,
    the log line and the early-stopping counters."""
    import torch

    state, spec = run.state, run.spec
    run.model.eval()
    try:
        with torch.no_grad():
            raw = run.evaluate_fn(run.model, run.tokenizer)
    finally:
        run.model.train()
    value = math.nan if raw is None else float(raw)     # undefined: counts as not improved
    value = run.dist.broadcast(value)
    improved = not math.isnan(value) and (state.best_metric is None or value > state.best_metric)
    with guard.committing():
        if improved:
            state.best_metric, state.best_step, state.bad_evaluations = \
                value, state.global_step, 0
        else:
            state.bad_evaluations += 1
        patience = spec.early_stopping_patience
        state.stopped_early = patience is not None and state.bad_evaluations >= patience
        state.evaluation_due = False
        if improved:
            save_weights(run, run.out_dir / "best")
        if run.dist.is_main:
            append_log(run.out_dir, {"step": state.global_step, "metric": value,
                                      "best_metric": state.best_metric,
                                      "best_step": state.best_step})


def validation_loss_evaluator(examples: train_data.TrainingExamples,
                              batch_size: int = 8) -> EvaluateFn:
    """An evaluate_fn: minus the mean target-token loss on `examples` (higher is better).

    Task-agnostic; for early stopping on the task's main metric pass a prediction-based one.
    """
    order = np.lexsort((examples.target_lengths, examples.source_lengths))
    batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]

    def evaluate(model, tokenizer) -> float:
        import torch.nn.functional as F

        device = next(model.parameters()).device
        total, tokens = 0.0, 0
        for indices in batches:
            batch = train_data.collate(examples, indices, tokenizer.pad_token_id,
                                       model.config.decoder_start_token_id)
            batch = {key: value.to(device) for key, value in batch.items()}
            labels = batch.pop("labels")
            logits = model(**batch, use_cache=False).logits
            total += float(F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(),
                                           ignore_index=train_data.LABEL_PAD, reduction="sum"))
            tokens += int((labels != train_data.LABEL_PAD).sum())
        return -total / max(tokens, 1)

    return evaluate


def validation_loss_fn(spec: FinetuneSpec, tasks: Sequence[Any],
                       data_dir: str | Path | None) -> EvaluateFn:
    """`validation_loss_evaluator` on the tasks' validation split, tokenized on first use."""
    built: list[EvaluateFn] = []

    def evaluate(model, tokenizer) -> float:
        if not built:
            examples = train_data.spec_examples(spec, tasks, "validation", data_dir, tokenizer)
            built.append(validation_loss_evaluator(examples, spec.per_device_batch_size))
        return built[0](model, tokenizer)

    return evaluate
