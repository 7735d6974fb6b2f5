"""Batches of length-sorted inputs that weigh padding against a batch's fixed cost."""
from __future__ import annotations

import itertools
import math
import random

import pytest

from trainers.batch_plan import (
    ATTENTION_SPAN,
    BATCH_OVERHEAD_TOKENS,
    fixed_batches,
    planned_batches,
)


def sizes(plan) -> list[int]:
    return [len(span) for span in plan]


def plan_cost(lengths, plan, overhead=BATCH_OVERHEAD_TOKENS, span=ATTENTION_SPAN,
              key_block=1) -> int:
    """The module's cost model, written out: each batch's overhead plus every input padded
    to the batch's longest (its first) length, its keys to a whole number of key blocks."""
    def keys(length):
        return math.ceil(length / key_block) * key_block

    return sum(overhead * span + len(batch) * lengths[batch.start] *
               (span + keys(lengths[batch.start])) for batch in plan)


def every_plan(count: int, batch_size: int):
    """All ways to cut `count` inputs into consecutive batches of at most `batch_size`."""
    for cuts in itertools.product((False, True), repeat=max(0, count - 1)):
        ends = [i + 1 for i, cut in enumerate(cuts) if cut] + [count]
        plan = [range(begin, end) for begin, end in zip([0] + ends[:-1], ends)]
        if all(len(batch) <= batch_size for batch in plan):
            yield plan


def test_equal_lengths_give_fixed_size_batches():
    assert planned_batches([100] * 70, 32) == fixed_batches(70, 32) == \
        [range(0, 32), range(32, 64), range(64, 70)]
    assert planned_batches([], 32) == fixed_batches(0, 32) == []


def test_a_long_outlier_runs_alone_and_the_rest_fill_batches():
    # padding 31 inputs of 300 to 400 tokens costs far more than one batch's overhead
    assert planned_batches([400] + [300] * 40, 32) == [range(0, 1), range(1, 33), range(33, 41)]


def test_short_inputs_of_varied_length_stay_together():
    # splitting 40..20 tokens would save less padding than a second batch costs
    assert sizes(planned_batches(list(range(40, 19, -1)), 32)) == [21]
    # the same spread at ten times the length is worth splitting
    assert len(planned_batches(list(range(400, 199, -10)), 32)) > 1


def test_the_plan_is_the_cheapest_of_all_plans():
    generator = random.Random(7)
    for _ in range(30):
        count, batch_size = generator.randint(1, 9), generator.randint(1, 5)
        lengths = sorted((generator.choice((5, 60, 200, 210, 390, 400))
                          for _ in range(count)), reverse=True)
        cheapest = min(plan_cost(lengths, plan) for plan in every_plan(count, batch_size))
        assert plan_cost(lengths, planned_batches(lengths, batch_size)) == cheapest


@pytest.mark.parametrize("key_block", [1, 16])
def test_the_plan_is_the_cheapest_with_keys_padded_to_blocks(key_block):
    generator = random.Random(11)
    for _ in range(30):
        count, batch_size = generator.randint(1, 9), generator.randint(1, 5)
        lengths = sorted((generator.choice((5, 16, 17, 33, 161, 176, 177, 400))
                          for _ in range(count)), reverse=True)
        cheapest = min(plan_cost(lengths, plan, key_block=key_block)
                       for plan in every_plan(count, batch_size))
        plan = planned_batches(lengths, batch_size, key_block=key_block)
        assert plan_cost(lengths, plan, key_block=key_block) == cheapest
    assert planned_batches(lengths, 4, key_block=1) == planned_batches(lengths, 4)


def test_blocked_keys_move_a_cut_to_where_the_longest_input_fills_its_block():
    # 161 tokens pad their keys to 176, so with blocks of 16 the one pair of 161 runs alone
    # rather than raise the keys of 31 pairs of 160 (a whole block) by 16
    lengths = [161] + [160] * 31
    assert planned_batches(lengths, 32) == [range(0, 32)]
    assert planned_batches(lengths, 32, key_block=16) == [range(0, 1), range(1, 32)]


def test_plans_cover_every_input_in_order_within_the_batch_size():
    generator = random.Random(3)
    for batch_size in (1, 2, 7, 32):
        lengths = sorted((generator.randint(1, 512) for _ in range(300)), reverse=True)
        plan = planned_batches(lengths, batch_size)
        assert [i for batch in plan for i in batch] == list(range(300))
        assert max(sizes(plan)) <= batch_size and min(sizes(plan)) >= 1
        assert planned_batches(lengths, batch_size) == plan  # the lengths alone decide


@pytest.mark.parametrize("lengths, batch_size, options, message", [
    ([3, 5], 4, {}, "sorted longest first"),
    ([5, 3], 0, {}, "batch_size must be an integer >= 1"),
    ([5, 3], True, {}, "batch_size must be an integer >= 1"),
    ([5, 3], 4, {"overhead": 0}, "overhead must be an integer >= 1"),
    ([5, 3], 4, {"span": 0}, "span must be an integer >= 1"),
    ([5, 3], 4, {"span": 1.5}, "span must be an integer >= 1"),
    ([5, 3], 4, {"key_block": 0}, "key_block must be an integer >= 1"),
])
def test_bad_arguments_are_refused(lengths, batch_size, options, message):
    with pytest.raises(ValueError, match=message):
        planned_batches(lengths, batch_size, **options)
