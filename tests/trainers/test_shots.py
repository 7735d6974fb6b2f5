"""Few-shot selection: budgets, no replacement, no shot from the item's document, seeding."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from trainers.fewshot.shots import (
    ShotBudget,
    ShotCandidate,
    item_rng,
    select_for_item,
    select_shots,
    shot_budget,
)


def make_pool(lengths, groups=None):
    groups = groups or [f"doc{i}" for i in range(len(lengths))]
    return [ShotCandidate(index, group, length)
            for index, (group, length) in enumerate(zip(groups, lengths))]


def test_budgets_follow_the_paper():
    for name in ("abstractive_summarization", "extractive_summarization",
                 "evidence_extraction", "topicbased_summarization"):
        assert shot_budget(name) == ShotBudget(4, 512, 2048)
    for name in ("multisentence_compression", "factuality_classification",
                 "fixing_factuality", "unsupported_span_prediction"):
        assert shot_budget(name) == ShotBudget(16, 128, 2048)
    assert shot_budget("fixing_factuality", n_shots=3) == ShotBudget(3, 128, 2048)
    assert shot_budget("fixing_factuality", n_shots=0).n_shots == 0
    with pytest.raises(ValueError):
        shot_budget("fixing_factuality", n_shots=-1)


def test_selection_is_the_seeded_permutation_order():
    pool = make_pool([10] * 10)
    expected = [int(i) for i in np.random.default_rng([7, 3]).permutation(10)[:4]]
    assert select_shots(pool, 4, item_rng(7, 3)) == expected
    assert select_for_item(pool, ShotBudget(4, None, None), 7, 3, None) == expected
    # another item or seed gives another draw; the same one is reproducible
    assert select_for_item(pool, ShotBudget(4, None, None), 7, 4, None) != expected
    assert select_for_item(pool, ShotBudget(4, None, None), 8, 3, None) != expected
    assert select_for_item(pool, ShotBudget(4, None, None), 7, 3, None) == expected


def test_no_replacement_and_small_pools():
    pool = make_pool([5] * 6)
    chosen = select_shots(pool, 6, item_rng(0, 0))
    assert sorted(chosen) == list(range(6))
    assert sorted(select_shots(pool, 50, item_rng(0, 1))) == list(range(6))
    assert select_shots(pool, 0, item_rng(0, 1)) == []
    assert select_shots([], 4, item_rng(0, 1)) == []


def test_never_from_the_items_own_document():
    groups = ["a", "a", "b", "b", "c", "c"]
    pool = make_pool([5] * 6, groups)
    for item in range(50):
        chosen = select_shots(pool, 6, item_rng(1, item), exclude_group="b")
        assert sorted(chosen) == [0, 1, 4, 5]


def test_per_shot_and_total_token_budgets():
    lengths = [100, 600, 300, 50, 513, 400, 200]
    pool = make_pool(lengths)
    for item in range(40):
        chosen = select_shots(pool, 4, item_rng(2, item), max_shot_tokens=512,
                              max_total_tokens=700)
        assert 1 not in chosen and 4 not in chosen  # longer than one shot may be
        assert sum(lengths[i] for i in chosen) <= 700
        assert len(set(chosen)) == len(chosen)
    # candidates that would overflow the total are passed over, not the end of the draw
    order = [int(i) for i in item_rng(2, 0).permutation(len(pool))]
    expected, total = [], 0
    for index in order:
        if lengths[index] <= 512 and total + lengths[index] <= 700 and len(expected) < 4:
            expected.append(index)
            total += lengths[index]
    assert select_shots(pool, 4, item_rng(2, 0), max_shot_tokens=512,
                        max_total_tokens=700) == expected


def test_each_candidate_is_drawn_about_equally_often():
    pool = make_pool([1] * 5)
    counts = Counter(select_shots(pool, 1, item_rng(11, item))[0] for item in range(5000))
    assert set(counts) == set(range(5))
    assert all(900 <= count <= 1100 for count in counts.values()), counts
