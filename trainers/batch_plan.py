"""Cut length-sorted inputs into batches that weigh padding against the cost of a batch.

An encoder's work per batch grows with its padded length: linearly in the projections and
feed-forward, quadratically in attention (every position attends to every other). Fixed-size
batches of length-sorted inputs waste little in the middle of a length distribution, where
neighbours are almost equally long, and a lot at its long tail: on 800 REALSumm (summary, SCU)
pairs the first batch of 32 held one pair of 400 tokens and 31 of 277-358, and padding made
11% of all attention work. Cutting everywhere the length changes would waste the other way:
each batch has a fixed cost (dispatching its operators), which dominates short inputs.

`planned_batches(lengths, batch_size)` takes lengths sorted longest first and returns the
consecutive batches, each of at most `batch_size` inputs, of least estimated cost: every batch
costs `overhead` padded tokens plus, for each input, its padded length L times (1 + L / span),
where `span` is the length at which a token's attention work equals the rest of its work.
With `key_block` > 1 (a model that pads its keys to a multiple of it, as the first-token
shortcut does for small heads on a CPU: trainers.first_token) the attention term counts the
keys so padded, L times (1 + ceil(L / key_block) x key_block / span; in every layer alike,
an estimate, since a folded last layer's keys are not padded), so the plan prefers cuts whose
longest input fills its last block: on the presence benchmark's 800 pairs that trims the
padded attention work from 6.7% to 5.9% above the inputs' own.
The defaults were measured on the 2-layer test classifier on a 2-core CPU (one batch ~ 400
tokens; attention ~ the rest at 180 tokens). Wider models spend relatively less on attention
and on a batch's fixed cost, so for them the plan splits less than it could: it stays close to
fixed-size batches. The plan depends on the lengths alone, so a run is repeatable. On those 800
pairs: 33 batches instead of 25, 8% less time in the forward passes (bench/presence_speed.py).
Found by dynamic programming over the batch ends: O(len(lengths) x batch_size) steps.
"""
from __future__ import annotations

from collections.abc import Sequence

#: a batch's fixed cost, in padded tokens
BATCH_OVERHEAD_TOKENS = 400
#: the length at which one token's attention work equals the rest of its work
ATTENTION_SPAN = 180


def fixed_batches(count: int, batch_size: int) -> list[range]:
    """Consecutive batches of `batch_size` (the last one shorter)."""
    return [range(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


def planned_batches(lengths: Sequence[int], batch_size: int,
                    overhead: int = BATCH_OVERHEAD_TOKENS,
                    span: int = ATTENTION_SPAN, key_block: int = 1) -> list[range]:
    """Consecutive index ranges covering `lengths` (sorted longest first), each at most
    `batch_size` long, of least total estimated cost (see the module docstring; `key_block`:
    the multiple the model pads its keys to). Costs are integers (scaled by `span`), so ties
    are exact; among plans of equal cost the later batches are the shorter ones, so equal
    lengths give `fixed_batches`."""
    for name, value, least in (("batch_size", batch_size, 1), ("overhead", overhead, 1),
                               ("span", span, 1), ("key_block", key_block, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if any(later > earlier for earlier, later in zip(lengths, lengths[1:])):
        raise ValueError("lengths must be sorted longest first")
    count, batch_cost = len(lengths), overhead * span
    # one input padded to it (keys to a whole block), x span
    slot = [length * (span + -(-length // key_block) * key_block) for length in lengths]
    best, begins = [0] * (count + 1), [0] * (count + 1)
    for end in range(1, count + 1):
        begin_at = end - 1
        cheapest = best[begin_at] + batch_cost + slot[begin_at]
        for begin in range(end - 2, max(0, end - batch_size) - 1, -1):
            cost = best[begin] + batch_cost + (end - begin) * slot[begin]
            if cost < cheapest:
                cheapest, begin_at = cost, begin
        best[end], begins[end] = cheapest, begin_at
    batches, end = [], count
    while end:
        batches.append(range(begins[end], end))
        end = begins[end]
    return batches[::-1]
