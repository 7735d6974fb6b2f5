"""How an encoder run feeds its examples (trainers.encoders.inputs) to the model: optimizer
steps, micro-batches and tensors (plain NumPy here; torch only inside `collate`).

- An epoch is every trainable example (one with a position that counts) in an order drawn by
  `numpy.random.default_rng([seed, epoch])`, cut into optimizer steps of `batch_size` examples
  (pairs for FAC/EVEXT, summaries for UNSUP, articles for EXT; the last step may be short).
- A step is cut into micro-batches by a token budget: its examples sorted by padded size
  (longest first, ties by index) and filled in while the micro-batch's padded size stays
  within the budget (a single example larger than the budget is a micro-batch of its own).
  Padded size = examples x longest row (EXT: articles x most sentences x longest sentence).
- `collate` pads to the longest row of the micro-batch: `input_ids` (with the tokenizer's
  padding id), `attention_mask`, `labels` (`IGNORED` on padding); EXT adds a sentence axis
  (articles, sentences, tokens) and a `sentence_mask` (articles, sentences).

The loss of a step is normalised by the positions the whole step counts (`counted_positions`),
so with dropout 0 where the step is cut changes nothing but floating-point summation order
(with dropout, the masks are drawn micro-batch by micro-batch).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.plumbing.errors import SumbenchError
from trainers.encoders.inputs import IGNORED, ArticleInput, PairInput, TokenInput
from trainers.models.padding import right_padded, row_mask

#: a task's feature kind: a probability per pair, per token or per sentence
KINDS = {PairInput: "pair", TokenInput: "token", ArticleInput: "article"}


def feature_kind(features: Sequence[Any]) -> str:
    """"pair" (FAC, EVEXT), "token" (UNSUP) or "article" (EXT); every feature of one kind."""
    kinds = {kind for feature in features for cls, kind in KINDS.items()
             if isinstance(feature, cls)}
    if len(kinds) != 1 or not all(isinstance(feature, (PairInput, TokenInput, ArticleInput))
                                  for feature in features):
        raise SumbenchError(f"expected encoder inputs of one kind (PairInput, TokenInput or "
                            f"ArticleInput), got {sorted(kinds) or 'none'}")
    return kinds.pop()


def feature_sizes(features: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(longest row, rows) per example: (tokens, 1) for pairs and token inputs, (longest
    sentence, sentences) for articles."""
    if feature_kind(features) == "article":
        rows = np.array([len(f.sentence_ids) for f in features], dtype=np.int64)
        longest = np.array([max((len(s) for s in f.sentence_ids), default=0)
                            for f in features], dtype=np.int64)
        return longest, rows
    longest = np.array([len(f.input_ids) for f in features], dtype=np.int64)
    return longest, np.ones(len(features), dtype=np.int64)


def example_positions(feature: Any) -> int:
    """The loss positions an example counts: 1 per pair, its labelled tokens, its sentences."""
    if isinstance(feature, TokenInput):
        return sum(label != IGNORED for label in feature.labels)
    if isinstance(feature, ArticleInput):
        return len(feature.labels)
    return 1


def counted_positions(features: Sequence[Any], indices: Sequence[int]) -> int:
    """The loss positions of the examples at `indices` (a step's normaliser)."""
    return sum(example_positions(features[int(index)]) for index in indices)


def trainable_indices(features: Sequence[Any]) -> np.ndarray:
    """Indices of the examples with at least one position that counts (an EXT article
    without sentences has none)."""
    return np.array([index for index, feature in enumerate(features)
                     if example_positions(feature) > 0], dtype=np.int64)


def epoch_steps(indices: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The epoch's optimizer steps: `indices` shuffled by (seed, epoch), `batch_size` each."""
    if batch_size < 1:
        raise SumbenchError(f"batch_size must be a positive integer, got {batch_size!r}")
    order = np.random.default_rng([seed, epoch]).permutation(np.asarray(indices, np.int64))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def cut_step(step: np.ndarray, longest: np.ndarray, rows: np.ndarray,
             budget: int | None) -> list[np.ndarray]:
    """A step's micro-batches: largest padded size first (ties by index), each holding at
    most `budget` padded tokens (at least one example); `budget` None: the step whole."""
    step = np.asarray(step, dtype=np.int64)
    if budget is not None and budget < 1:
        raise SumbenchError(f"tokens_per_microbatch must be a positive integer, got {budget!r}")
    order = step[np.lexsort((step, -longest[step], -(longest[step] * rows[step])))]
    if budget is None or not len(order):
        return [order]
    pieces: list[np.ndarray] = []
    start, widest, most_rows = 0, 0, 0
    for position, index in enumerate(order):
        width, count = max(widest, int(longest[index])), max(most_rows, int(rows[index]))
        if position > start and (position - start + 1) * width * count > budget:
            pieces.append(order[start:position])
            start, width, count = position, int(longest[index]), int(rows[index])
        widest, most_rows = width, count
    pieces.append(order[start:])
    return pieces


def epoch_plan(features: Sequence[Any], batch_size: int, seed: int, epoch: int,
               budget: int | None) -> list[list[np.ndarray]]:
    """The epoch's optimizer steps over the trainable examples, each cut into micro-batches."""
    longest, rows = feature_sizes(features)
    return [cut_step(step, longest, rows, budget)
            for step in epoch_steps(trainable_indices(features), batch_size, seed, epoch)]


def steps_per_epoch(features: Sequence[Any], batch_size: int) -> int:
    return -(-len(trainable_indices(features)) // batch_size)


def padded_size(features: Sequence[Any], indices: Sequence[int]) -> int:
    """Token positions of the micro-batch's padded `input_ids`."""
    longest, rows = feature_sizes([features[int(index)] for index in indices])
    return len(longest) * int(longest.max(initial=0)) * int(rows.max(initial=0))


# ---- tensors ------------------------------------------------------------------------------
def _sequence_arrays(chosen: Sequence[Any], pad_id: int) -> dict[str, np.ndarray]:
    ids = [feature.input_ids for feature in chosen]
    if isinstance(chosen[0], TokenInput):
        labels = right_padded([feature.labels for feature in chosen], IGNORED)
    else:
        labels = np.array([feature.label for feature in chosen], dtype=np.int64)
    return {"input_ids": right_padded(ids, pad_id), "attention_mask": row_mask(ids),
            "labels": labels}


def _article_arrays(chosen: Sequence[ArticleInput], pad_id: int) -> dict[str, np.ndarray]:
    sentences = max(len(article.sentence_ids) for article in chosen)
    width = max((len(s) for article in chosen for s in article.sentence_ids), default=0)
    if sentences == 0:
        raise SumbenchError("an EXT batch needs an article with at least one sentence")
    ids = np.full((len(chosen), sentences, width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    sentence_mask = np.zeros((len(chosen), sentences), dtype=bool)
    labels = np.full((len(chosen), sentences), IGNORED, dtype=np.int64)
    for row, article in enumerate(chosen):
        count = len(article.sentence_ids)
        if count == 0:
            raise SumbenchError(f"article {row} of the batch has no sentences: leave it out")
        ids[row, :count] = right_padded(article.sentence_ids, pad_id, width)
        mask[row, :count] = row_mask(article.sentence_ids, width)
        sentence_mask[row, :count] = True
        labels[row, :count] = article.labels
    return {"input_ids": ids, "attention_mask": mask, "sentence_mask": sentence_mask,
            "labels": labels}


def collate(features: Sequence[Any], indices: Sequence[int], pad_id: int) -> dict[str, Any]:
    """int64 tensors of the examples at `indices`, padded to the micro-batch's longest row
    (`sentence_mask` bool); labels are int64 with `IGNORED` where nothing counts."""
    import torch

    chosen = [features[int(index)] for index in indices]
    if not chosen:
        raise SumbenchError("cannot collate an empty micro-batch")
    arrays = _article_arrays(chosen, pad_id) if isinstance(chosen[0], ArticleInput) \
        else _sequence_arrays(chosen, pad_id)
    return {name: torch.from_numpy(values) for name, values in arrays.items()}
