"""Copies of a public gold, judged as each metric sees an answer: for an AUC part the gold's
*order* (any monotone transform of the labels scores AUC 100, whatever its decisions), for
F1 parts the decisions or spans, for ROUGE the tokens, for exact match the string
(`task.reproduces_gold`); and, pooled over every part an entry answers, a near-copy: headlines
no model reaches on text parts, each a little short of a copy."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb

import numpy as np

#: an AUC part whose headline (x100) reaches this copies the gold's order
ORDER_COPY_AUC = 99.9
#: ... when chance alone would order its labels perfectly at most once in this many tries:
#: C(positives + negatives, positives) orderings, one of them perfect (7 positives and 7
#: negatives: 3,432)
ORDER_COPY_CHANCE = 1000
#: an entry that answers a text part and whose part headlines (x100) average this or more is
#: a near-copy of the public gold: fine-tuned models stay far below on text parts (ROUGE
#: 20-50, exact match 30-40 in the USB paper)
NEAR_COPY_MEAN = 90.0


def class_counts(task, joined: Sequence[dict]) -> tuple[int, int]:
    """(positives, negatives) of an AUC part's gold labels, as its metric reads them."""
    labels = [np.atleast_1d(np.asarray(example_labels, dtype=float))
              for _, example_labels, _ in task.score_examples(list(joined))]
    pooled = np.concatenate(labels) if labels else np.zeros(0)
    positives = int((pooled > 0.5).sum())
    return positives, len(pooled) - positives


def copies_order(task, joined: Sequence[dict], headline: float | None) -> bool:
    """Whether an AUC part's answers put the gold's positives above its negatives (AUC at
    ORDER_COPY_AUC or more) on labels that chance would rarely order so."""
    if task.main_metric != "auc" or headline is None or headline < ORDER_COPY_AUC:
        return False
    positives, negatives = class_counts(task, joined)
    return comb(positives + negatives, positives) >= ORDER_COPY_CHANCE


def near_copy(headlines: Mapping[str, float | None], text_parts: Sequence[str]) -> bool:
    """Whether an entry that answers a text part has part headlines averaging NEAR_COPY_MEAN
    or more (ABS 99.28, EVEXT 98.18, EXT 100, FAC 100, FIX 71.43, COMP 96.95, TOPIC 97.5 and
    UNSUP 88.89: a mean of 94.0, each part short of a copy)."""
    values = [value for value in headlines.values() if value is not None]
    return bool(text_parts) and bool(values) and sum(values) / len(values) >= NEAR_COPY_MEAN
