"""Micro-batch plans: token cuts keep every optimizer step's examples (the release's plan),
count cuts are the old ones, `auto` decisions from a probe, CPU fall-back, spec fields and
bad recorded plans. The training runs of item 4 are in test_microbatch_training.py."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from tasks.plumbing.errors import SumbenchError
from trainers.finetuning import data as train_data
from trainers.finetuning.memory_probe import decide_plan, probed_tokens
from trainers.finetuning.micro_batches import (
    MicroBatchPlan,
    cut_step,
    largest_fitting,
    padded_tokens,
    token_pieces,
)
from trainers.finetuning.profiles import SpecError, get_profile


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(3)
    sources = np.minimum(rng.pareto(1.5, 1003) * 60 + 8, 2048).astype(np.int64)
    targets = np.minimum(rng.pareto(2.0, 1003) * 20 + 2, 512).astype(np.int64)
    return sources, targets


def steps_of(lengths, batch_size=32):
    sources, targets = lengths
    return train_data.epoch_steps(np.arange(len(sources)), sources, targets, batch_size,
                                  seed=0, epoch=0)


def by_tokens(budget):
    return MicroBatchPlan(budget, 2, False, "test")


@pytest.mark.parametrize("budget", [1, 100, 700, 3000, 20_000, 10**9])
def test_token_cuts_keep_each_steps_examples_and_fit_the_budget(lengths, budget):
    sources, targets = lengths
    for step in steps_of(lengths):
        pieces = cut_step(step, by_tokens(budget), sources, targets, 32, world_size=1)
        assert sorted(np.concatenate(pieces).tolist()) == sorted(step.tolist())
        for piece in pieces:
            size = len(piece) * int(sources[piece].max() + targets[piece].max())
            assert len(piece) == 1 or size <= budget, (budget, piece)
        if budget >= 10**9:
            assert len(pieces) == 1


def test_token_cuts_are_greedy_longest_first():
    sources = np.array([10, 50, 30, 50, 20])
    targets = np.array([5, 5, 5, 9, 5])
    pieces = token_pieces(np.array([0, 1, 2, 3, 4]), sources, targets, budget=120)
    # longest first: 3 (59), 1 (55) -> 2 x 59 = 118; then 2 (35), 4 (25), 0 (15): 3 x 35 = 105
    assert [piece.tolist() for piece in pieces] == [[3, 1], [2, 4, 0]]
    assert padded_tokens(pieces, sources, targets) == (59 + 55 + 35 + 25 + 15, 118 + 105)


def test_count_cuts_are_the_plan_before_token_cuts(lengths):
    sources, targets = lengths
    old = train_data.plan_epoch(np.arange(1003), sources, targets, 32, 16, 0, 0)
    plan = MicroBatchPlan(None, 2, False, "configured")
    new = [cut_step(step, plan, sources, targets, 32, 1) for step in steps_of(lengths)]
    assert [[p.tolist() for p in step] for step in new] == \
        [[p.tolist() for p in step] for step in old]
    assert len(new[-1]) == 16 or all(len(step) == 16 for step in new)


def test_token_cuts_give_every_process_as_many_micro_batches(lengths):
    sources, targets = lengths
    for step in steps_of(lengths)[:20]:
        pieces = cut_step(step, by_tokens(900), sources, targets, 32, world_size=3)
        assert len(pieces) % 3 == 0
        ranks = [train_data.micro_batches_for_rank(pieces, rank, 3) for rank in range(3)]
        assert len({len(mine) for mine in ranks}) == 1
        assert sorted(np.concatenate([p for mine in ranks for p in mine]).tolist()) == \
            sorted(step.tolist())


@pytest.mark.parametrize("limit", [1, 2, 7, 32, 100, 1000, 4096])
def test_largest_fitting_finds_the_limit_within_its_margin(limit):
    calls = []

    def fits(n):
        calls.append(n)
        return n <= limit
    found = largest_fitting(fits, 1, 4096)
    assert found <= limit and limit - found <= max(0, limit // 64)
    assert len(calls) <= 2 * 13 + 2
    assert largest_fitting(lambda n: False, 1, 10) is None


def memory(limit_plain, limit_checkpointed):
    """A probe: padded tokens fit up to these limits without / with checkpointing."""
    def probe(tokens, checkpointing):
        return tokens <= (limit_checkpointed if checkpointing else limit_plain)
    return probe


class Examples:
    source_lengths = np.array([100, 400, 250])
    target_lengths = np.array([20, 100, 60])      # longest example: 400 + 100 = 500 tokens


@pytest.mark.parametrize("tokens, checkpointing, probe, expected", [
    # a whole step of longest examples fits: one micro-batch of the step
    ("auto", "auto", memory(10**9, 10**9), (32 * 500, False)),
    # 10 longest examples fit without checkpointing: 85% of them
    ("auto", "auto", memory(5000, 50_000), (4250, False)),
    # not one longest example without checkpointing: on, and 20 fit with it
    ("auto", "auto", memory(400, 10_000), (8500, True)),
    # checkpointing set: probed with it as set
    ("auto", True, memory(10**9, 3000), (2550, True)),
    # a number: checkpointing only when that number needs it
    (2000, "auto", memory(2500, 10**9), (2000, False)),
    (2000, "auto", memory(1500, 10**9), (2000, True)),
    # by count (2 longest examples = 1000 tokens)
    (None, "auto", memory(900, 10**9), (None, True)),
])
def test_auto_decisions_from_the_probe(tokens, checkpointing, probe, expected):
    spec = get_profile("tiny", batch_size=32, per_device_batch_size=2,
                       tokens_per_microbatch=tokens, gradient_checkpointing=checkpointing)
    plan = decide_plan(spec, None, Examples(), "cuda", bf16=True, probe=probe)
    assert (plan.tokens_per_microbatch, plan.gradient_checkpointing) == expected
    assert plan.per_device_batch_size == 2 and plan.source


def test_what_does_not_fit_at_all_is_a_clear_error():
    spec = get_profile("tiny", batch_size=32, tokens_per_microbatch="auto",
                       gradient_checkpointing="auto")
    with pytest.raises(SumbenchError, match="one longest example .500 padded tokens. does "
                                            "not fit"):
        probed_tokens(spec, memory(10, 10), 500)
    spec = get_profile("tiny", tokens_per_microbatch=4000, gradient_checkpointing="auto")
    with pytest.raises(SumbenchError, match="even with gradient checkpointing: lower "
                                            "tokens_per_microbatch"):
        decide_plan(spec, None, Examples(), "cuda", True, probe=memory(10, 10))


def test_auto_on_a_cpu_falls_back_to_the_configured_size_and_says_so(caplog):
    spec = get_profile("flan-t5-large")
    assert (spec.tokens_per_microbatch, spec.gradient_checkpointing) == ("auto", "auto")
    with caplog.at_level(logging.WARNING):
        plan = decide_plan(spec, None, Examples(), "cpu", bf16=False)
    assert (plan.tokens_per_microbatch, plan.per_device_batch_size,
            plan.gradient_checkpointing) == (None, 2, False)
    assert "auto needs a CUDA device to probe; on cpu: per_device_batch_size 2" in plan.source
    assert plan.source in caplog.text
    fixed = decide_plan(spec.override({"tokens_per_microbatch": "3000"}), None, Examples(),
                        "cpu", False)
    assert (fixed.tokens_per_microbatch, fixed.gradient_checkpointing) == (3000, False)


def test_spec_fields_parse_and_per_device_batch_size_overrides_a_token_plan():
    spec = get_profile("flan-t5-large")
    assert spec.override({"tokens_per_microbatch": "12000"}).tokens_per_microbatch == 12000
    assert spec.override({"tokens_per_microbatch": "none"}).tokens_per_microbatch is None
    assert spec.override({"gradient_checkpointing": "true"}).gradient_checkpointing is True
    explicit = spec.override({"per_device_batch_size": "4"})
    assert (explicit.per_device_batch_size, explicit.tokens_per_microbatch) == (4, None)
    both = spec.override({"per_device_batch_size": "4", "tokens_per_microbatch": "auto"})
    assert both.tokens_per_microbatch == "auto"
    for field, value, message in [("tokens_per_microbatch", 0, "must be a number >= 1"),
                                  ("tokens_per_microbatch", "lots", "must be a number >= 1"),
                                  ("tokens_per_microbatch", True, "must be a number >= 1"),
                                  ("gradient_checkpointing", "maybe", "true, false or 'auto'")]:
        with pytest.raises(SpecError, match=message):
            dataclasses.replace(get_profile("tiny"), **{field: value})
    with pytest.raises(SpecError, match="expects a number"):
        spec.override({"tokens_per_microbatch": "many"})


@pytest.mark.parametrize("value, message", [
    ([1, 2], "must hold exactly"),
    ({"tokens_per_microbatch": 0, "per_device_batch_size": 2,
      "gradient_checkpointing": False, "source": "x"}, "bad value"),
    ({"tokens_per_microbatch": None, "per_device_batch_size": 2,
      "gradient_checkpointing": "yes", "source": "x"}, "bad value"),
    ({"tokens_per_microbatch": None, "per_device_batch_size": 2, "source": "x"},
     "must hold exactly"),
])
def test_a_bad_recorded_plan_names_its_file(value, message):
    with pytest.raises(SumbenchError, match=f"state.json: the micro-batch plan.*{message}"):
        MicroBatchPlan.from_dict(value, "run/checkpoints/step-1/state.json")
    good = MicroBatchPlan(500, 2, True, "probed")
    assert MicroBatchPlan.from_dict(good.to_dict(), "x") == good


def test_the_probe_is_never_asked_the_same_question_twice():
    asked = []

    def probe(tokens, checkpointing):
        asked.append((tokens, checkpointing))
        return tokens <= 5000
    spec = get_profile("tiny", batch_size=32, tokens_per_microbatch="auto",
                       gradient_checkpointing="auto")
    plan = decide_plan(spec, None, Examples(), "cuda", bf16=True, probe=probe)
    assert plan.tokens_per_microbatch == 4250 and not plan.gradient_checkpointing
    assert asked[0] == (500, False) and len(asked) == len(set(asked))
