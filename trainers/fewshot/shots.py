"""Few-shot demonstration selection (selection only; formatting lives in trainers.fewshot.prompts).

Protocol (USB paper and release): for every test item, shots are drawn from the training
pool without replacement, in a random order seeded by (seed, item index) so that the choice
does not depend on the order or batching of other items; a shot never comes from the item's
own source document. Full-document tasks (ABS, EXT, EVEXT, TOPIC) take 4 shots of at most 512
tokens each, the others 16 shots of at most 128 tokens; at most 2048 tokens of shots in all.

Budgets are applied by skipping, never truncating (as the release did): a candidate whose
rendered demonstration is longer than the per-shot budget is never chosen, and a candidate
that would push the total over the total budget is passed over in favour of the next one in
the permuted order. An item can therefore get fewer shots than asked when the pool is small.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FULL_DOCUMENT_TASKS = frozenset({"abstractive_summarization", "extractive_summarization",
                                 "evidence_extraction", "topicbased_summarization"})
MAX_TOTAL_SHOT_TOKENS = 2048


@dataclass(frozen=True)
class ShotBudget:
    n_shots: int
    max_shot_tokens: int | None
    max_total_tokens: int | None = MAX_TOTAL_SHOT_TOKENS

    def as_dict(self) -> dict:
        return {"n_shots": self.n_shots, "max_shot_tokens": self.max_shot_tokens,
                "max_total_tokens": self.max_total_tokens}


@dataclass(frozen=True)
class ShotCandidate:
    """A training instance as a possible shot: its position in the training list, its source
    document and the token length of its rendered demonstration."""
    index: int
    group: str
    n_tokens: int


def shot_budget(task_name: str, n_shots: int | None = None) -> ShotBudget:
    """The paper's budget for the task's family; `n_shots` overrides the number of shots."""
    if task_name in FULL_DOCUMENT_TASKS:
        budget = ShotBudget(4, 512)
    else:
        budget = ShotBudget(16, 128)
    if n_shots is not None:
        if n_shots < 0:
            raise ValueError(f"n_shots must be >= 0, got {n_shots}")
        budget = ShotBudget(n_shots, budget.max_shot_tokens, budget.max_total_tokens)
    return budget


def item_rng(seed: int, item_index: int) -> np.random.Generator:
    """The generator for one test item, independent of every other item."""
    return np.random.default_rng([int(seed), int(item_index)])


def select_shots(pool: Sequence[ShotCandidate], k: int, rng: np.random.Generator, *,
                 exclude_group: str | None = None, max_shot_tokens: int | None = None,
                 max_total_tokens: int | None = None) -> list[int]:
    """Up to `k` distinct candidates' `index`es, in the order drawn (see module docstring)."""
    chosen: list[int] = []
    total = 0
    if k <= 0:
        return chosen
    for position in rng.permutation(len(pool)):
        candidate = pool[int(position)]
        if exclude_group is not None and candidate.group == exclude_group:
            continue
        if max_shot_tokens is not None and candidate.n_tokens > max_shot_tokens:
            continue
        if max_total_tokens is not None and total + candidate.n_tokens > max_total_tokens:
            continue
        chosen.append(candidate.index)
        total += candidate.n_tokens
        if len(chosen) == k:
            break
    return chosen


def select_for_item(pool: Sequence[ShotCandidate], budget: ShotBudget, seed: int,
                    item_index: int, exclude_group: str | None) -> list[int]:
    """`select_shots` for one test item under `budget`, seeded by (seed, item_index)."""
    return select_shots(pool, budget.n_shots, item_rng(seed, item_index),
                        exclude_group=exclude_group, max_shot_tokens=budget.max_shot_tokens,
                        max_total_tokens=budget.max_total_tokens)
