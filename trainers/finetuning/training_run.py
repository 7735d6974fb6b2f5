"""The state one fine-tuning call works with: the loop's counters (`TrainState`) and the run
(`TrainingRun`), shared by the loop (trainers.finetuning.finetune) and its folder
(trainers.finetuning.checkpoints)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainers.finetuning import data as train_data
from trainers.finetuning.distributed import Distributed
from trainers.finetuning.micro_batches import MicroBatchPlan, cut_step, padded_tokens
from trainers.finetuning.profiles import FinetuneSpec


@dataclass
class TrainState:
    """The loop's counters after `global_step` completed optimizer steps (saved in every
    checkpoint; train_result.json holds the final one)."""

    global_step: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    bad_evaluations: int = 0
    stopped_early: bool = False
    #: step global_step is to be evaluated and has not been yet (a checkpoint saved when an
    #: interrupt stopped its evaluation: resuming evaluates it first)
    evaluation_due: bool = False
    #: how the run cuts its steps (micro_batches.MicroBatchPlan as a dict); None in
    #: checkpoints written before plans existed
    micro_batch_plan: dict | None = None


#: evaluate_fn(model, tokenizer) -> the task's main validation metric, higher is better;
#: None or NaN (an undefined metric) counts as an evaluation without improvement
EvaluateFn = Callable[[Any, Any], float]


@dataclass
class TrainingRun:
    """Everything one training call works with (shared by the loop and
    trainers.finetuning.checkpoints)."""

    spec: FinetuneSpec
    dist: Distributed
    out_dir: Path
    model: Any                 # the unwrapped (possibly peft) model
    wrapped: Any               # DDP wrapper or the model itself
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    examples: train_data.TrainingExamples
    plan: MicroBatchPlan
    bf16: bool
    steps_per_epoch: int
    total_steps: int
    evaluate_fn: EvaluateFn | None
    state: TrainState

    @property
    def accumulation(self) -> int | None:
        """Micro-batches a process runs per step when they are cut by count (None: by
        tokens, so it varies by step)."""
        if self.plan.tokens_per_microbatch is not None:
            return None
        return self.spec.batch_size // (self.plan.per_device_batch_size * self.dist.world_size)

    def epoch_plan(self, epoch: int) -> list[list[np.ndarray]]:
        """The epoch's optimizer steps, each cut into micro-batches by the run's plan."""
        spec, examples = self.spec, self.examples
        indices = train_data.epoch_example_indices(
            examples.task_indices(), spec.mixing, spec.mixing_temperature, spec.seed, epoch)
        steps = train_data.epoch_steps(indices, examples.source_lengths,
                                       examples.target_lengths, spec.batch_size, spec.seed,
                                       epoch, spec.megabatch_steps)
        return [cut_step(step, self.plan, examples.source_lengths, examples.target_lengths,
                         spec.batch_size, self.dist.world_size) for step in steps]

    def step_tokens(self, step: list[np.ndarray]) -> tuple[int, int]:
        """(real, padded) tokens of one step's micro-batches, sources and targets."""
        return padded_tokens(step, self.examples.source_lengths, self.examples.target_lengths)
