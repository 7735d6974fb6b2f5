"""How an optimizer step is cut into micro-batches: the plan a run records and keeps.

An optimizer step always holds the same examples (`data.plan_epoch`: `batch_size` examples of
neighbouring lengths, the release's effective batch), and its loss is normalised by the
step's target tokens, so with dropout 0 the cut changes nothing but floating-point summation
order. Two cuts:

- by count (`tokens_per_microbatch` None): `per_device_batch_size` examples a micro-batch, a
  fixed accumulation (`FinetuneSpec.accumulation_steps`), as before token plans existed;
- by tokens (`tokens_per_microbatch` N): the step's examples, longest first, filled into
  micro-batches while their padded size (examples x (longest source + longest target)) stays
  within N; a single example longer than N is a micro-batch of its own. The accumulation then
  varies by step; with several processes the micro-batches are dealt out in turn and padded
  with empty (zero-weight) ones so every process runs as many.

`MicroBatchPlan` is what the run decided (with `auto`, after a probe of the device's memory,
`trainers.finetuning.memory_probe`): it goes into train_config.json, the log and every
checkpoint, so a resumed run cuts its steps as the first did and never probes again.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from tasks.plumbing.errors import SumbenchError


@dataclass(frozen=True)
class MicroBatchPlan:
    """The cut of every optimizer step and the memory settings that go with it."""

    tokens_per_microbatch: int | None     # None: by count (per_device_batch_size)
    per_device_batch_size: int
    gradient_checkpointing: bool
    source: str                           # how it was decided (configured, probed, fell back)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: object, where: str) -> MicroBatchPlan:
        fields = ("tokens_per_microbatch", "per_device_batch_size", "gradient_checkpointing",
                  "source")
        if not isinstance(value, dict) or set(value) != set(fields):
            raise SumbenchError(f"{where}: the micro-batch plan must hold exactly "
                                f"{', '.join(fields)}")
        tokens, count = value["tokens_per_microbatch"], value["per_device_batch_size"]
        if tokens is not None and (not isinstance(tokens, int) or tokens < 1) or \
                not isinstance(count, int) or count < 1 or \
                not isinstance(value["gradient_checkpointing"], bool):
            raise SumbenchError(f"{where}: the micro-batch plan holds a bad value: {value}")
        return cls(tokens, count, value["gradient_checkpointing"], str(value["source"]))

    def describe(self) -> str:
        cut = (f"{self.tokens_per_microbatch} padded tokens" if self.tokens_per_microbatch
               else f"{self.per_device_batch_size} examples")
        return (f"micro-batches of at most {cut}, gradient checkpointing "
                f"{'on' if self.gradient_checkpointing else 'off'} ({self.source})")


def cut_step(step: np.ndarray, plan: MicroBatchPlan, source_lengths: np.ndarray,
             target_lengths: np.ndarray, batch_size: int, world_size: int) -> list[np.ndarray]:
    """The micro-batches of one optimizer step's examples, for all processes (a multiple of
    `world_size`; `data.micro_batches_for_rank` deals them out). By count, every step (a
    short last one too) has batch_size / per_device_batch_size pieces, as it always had."""
    step = np.asarray(step, dtype=np.int64)
    if plan.tokens_per_microbatch is None:
        return np.array_split(step, batch_size // plan.per_device_batch_size)
    pieces = token_pieces(step, source_lengths, target_lengths, plan.tokens_per_microbatch)
    empty = np.zeros(0, dtype=np.int64)
    return pieces + [empty] * (-len(pieces) % world_size)


def token_pieces(step: np.ndarray, source_lengths: np.ndarray, target_lengths: np.ndarray,
                 budget: int) -> list[np.ndarray]:
    """The step's examples, longest first (source, then target; ties by index), cut into
    micro-batches of at most `budget` padded tokens each (at least one example each)."""
    step = np.asarray(step, dtype=np.int64)
    if not len(step):
        return [step]
    order = step[np.lexsort((step, -target_lengths[step], -source_lengths[step]))]
    pieces: list[np.ndarray] = []
    start, longest_source, longest_target = 0, 0, 0
    for position, index in enumerate(order):
        source = max(longest_source, int(source_lengths[index]))
        target = max(longest_target, int(target_lengths[index]))
        if position > start and (position - start + 1) * (source + target) > budget:
            pieces.append(order[start:position])
            start, source, target = position, int(source_lengths[index]), \
                int(target_lengths[index])
        longest_source, longest_target = source, target
    pieces.append(order[start:])
    return pieces


def padded_tokens(pieces: list[np.ndarray], source_lengths: np.ndarray,
                  target_lengths: np.ndarray) -> tuple[int, int]:
    """(real tokens, padded tokens) of micro-batches, sources and targets together."""
    real = padded = 0
    for piece in pieces:
        if len(piece):
            real += int(source_lengths[piece].sum() + target_lengths[piece].sum())
            padded += len(piece) * int(source_lengths[piece].max() + target_lengths[piece].max())
    return real, padded


def largest_fitting(fits: Callable[[int], bool], smallest: int, largest: int) -> int | None:
    """The largest n in [smallest, largest] with fits(n), for a `fits` true up to some n and
    false above it: doubling from `smallest`, then bisection (about 2 log2(largest/smallest)
    calls). None when even `smallest` does not fit."""
    if not fits(smallest):
        return None
    good, bad = smallest, None
    while bad is None:
        trial = min(good * 2, largest)
        if trial == good:
            return good
        if fits(trial):
            good = trial
        else:
            bad = trial
    while bad - good > max(1, good // 64):   # within 1.6%: the margin is coarser
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good
