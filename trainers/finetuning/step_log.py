"""The training log's step lines (train_log.jsonl), read from the device only when written.

The loop never waits for the GPU between optimizer steps: each step's loss stays a device
tensor and is added up there; the sum is read (one host synchronisation) only at a logging
step, and before a checkpoint or an evaluation (so a diverged run never saves its weights).
Times are wall-clock between those reads, less the time spent evaluating and saving.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.finetuning.checkpoints import append_log


class StepLog:
    """Mean loss (per target token), learning rate, throughput, the micro-batch plan and
    its padding, every `log_every_steps` steps and at the last one."""

    def __init__(self, run: Any):
        self.run = run
        self.reset()

    def reset(self) -> None:
        self.loss: Any = 0.0
        self.first_step = self.run.state.global_step + 1
        self.target_tokens = self.real = self.padded = self.micro_batches = self.steps = 0
        self.started, self.excluded = time.perf_counter(), 0.0

    def add(self, loss: Any, target_tokens: int, tokens: tuple[int, int],
            micro_batches: int) -> None:
        """One optimizer step: its summed loss (a device tensor, not read here), its target
        tokens, (real, padded) tokens of its micro-batches, and how many it ran."""
        self.loss = self.loss + loss
        self.target_tokens += target_tokens
        self.real, self.padded = self.real + tokens[0], self.padded + tokens[1]
        self.micro_batches += micro_batches
        self.steps += 1

    def read_loss(self) -> float:
        """The summed loss since the last line, over all processes; a non-finite one stops
        the run (every process reads at the same steps)."""
        value = self.run.dist.sum(float(self.loss))
        if not math.isfinite(value):
            run = self.run
            raise SumbenchError(
                f"training diverged by step {run.state.global_step} (steps {self.first_step}"
                f"-{run.state.global_step}): the loss is {value} (learning_rate "
                f"{run.spec.learning_rate:g}); lower the learning rate or check the data")
        return value

    def local_loss(self) -> float:
        """This process's summed loss since the last read (no other process is asked: an
        interrupt may have stopped them anywhere)."""
        return float(self.loss)

    def write_if_due(self, epoch: float) -> None:
        run = self.run
        step = run.state.global_step
        if step % run.spec.log_every_steps and step != run.total_steps:
            return
        loss = self.read_loss()
        seconds = time.perf_counter() - self.started - self.excluded
        if run.dist.is_main:
            plan = run.plan
            append_log(run.out_dir, {
                "step": step, "epoch": round(epoch, 4),
                "loss": loss / max(1, self.target_tokens), "lr": run.scheduler.get_last_lr()[0],
                "target_tokens_per_s": throughput(self.target_tokens, seconds),
                "tokens_per_s": throughput(self.real, seconds),
                "seconds_per_step": throughput(seconds, self.steps),
                "micro_batches": self.micro_batches,
                "tokens_per_microbatch": plan.tokens_per_microbatch,
                "gradient_checkpointing": plan.gradient_checkpointing,
                "padding_fraction": round(1 - self.real / self.padded, 4) if self.padded
                else 0.0})
        self.reset()

    @contextlib.contextmanager
    def paused(self):
        """Evaluation or a checkpoint: read the loss first (never save diverged weights) and
        leave its time out of the throughput."""
        self.read_loss()
        started = time.perf_counter()
        try:
            yield
        finally:
            self.excluded += time.perf_counter() - started


def throughput(amount: float, seconds: float) -> float:
    """amount / seconds to 4 significant digits, so a slow run (0.0237 tokens/s) and a fast
    one (12,340 tokens/s) both read right (0.0 when nothing was timed)."""
    if seconds <= 0:
        return 0.0
    return float(f"{amount / seconds:.4g}")
