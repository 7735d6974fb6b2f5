"""BERTScore's greedy matching (bert-score 0.3.13 `greedy_cos_idf`, without idf) of
candidates against references, pair by pair, and the best over several references.

With both sides' piece embeddings L2-normalised, `similarity` is every candidate piece's cosine
with every reference piece, special tokens included in the matrix. Precision is the weighted
mean over candidate pieces of each one's best cosine, recall the same over reference pieces
(CLS and SEP weigh 0, every other piece 1), F = 2PR / (P + R), and 0 where that is undefined.
A side with no weighted piece (an empty text) gets P = R = F = 0, as the official masks do.

Each pair is matched on its own pieces (pairs are batched, padding never matches). The official
code matches pairs in padded batches where a padded position's cosine counts as 0, so there a
piece whose best cosine is negative gets 0 when its pair is not the longest of its batch: its
scores then depend on the batch (rare with trained checkpoints, whose cosines sit far above 0;
never in the tests, where both agree within 1e-6). Several references (`score.py:135-139`):
P, R and F are each the best over the references, and may come from different ones.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: a side's (embeddings, weights) or None for an empty text
Side = tuple[Any, Any] | None
#: pairs matched in one batched product
CHUNK_PAIRS = 128


def match_pairs(candidates: Sequence[Side], references: Sequence[Side]) -> list[tuple]:
    """(P, R, F) of each candidate against its reference (the same position)."""
    scores: list[tuple] = [(0.0, 0.0, 0.0)] * len(candidates)
    live = [index for index, (candidate, reference) in enumerate(zip(candidates, references))
            if candidate is not None and reference is not None
            and float(candidate[1].sum()) > 0 and float(reference[1].sum()) > 0]
    for start in range(0, len(live), CHUNK_PAIRS):
        chosen = live[start:start + CHUNK_PAIRS]
        values = _match_batch([candidates[i] for i in chosen], [references[i] for i in chosen])
        for index, row in zip(chosen, values):
            scores[index] = row
    return scores


def _padded(sides: Sequence[tuple[Any, Any]]):
    """[pairs x longest x hidden] embeddings, [pairs x longest] weights and the real-piece
    mask (padding is never a match)."""
    from torch.nn.utils.rnn import pad_sequence

    vectors = pad_sequence([side[0] for side in sides], batch_first=True)
    weights = pad_sequence([side[1] for side in sides], batch_first=True)
    real = pad_sequence([side[1].new_ones(len(side[1]), dtype=bool) for side in sides],
                        batch_first=True)
    return vectors, weights, real


def _match_batch(candidates, references) -> list[tuple[float, float, float]]:
    import torch

    candidate_vectors, candidate_weights, candidate_real = _padded(candidates)
    reference_vectors, reference_weights, reference_real = _padded(references)
    similarity = torch.bmm(candidate_vectors, reference_vectors.transpose(1, 2))
    similarity.masked_fill_(~(candidate_real.unsqueeze(2) & reference_real.unsqueeze(1)),
                            float("-inf"))
    best_for_candidate = similarity.max(dim=2).values.masked_fill(~candidate_real, 0.0)
    best_for_reference = similarity.max(dim=1).values.masked_fill(~reference_real, 0.0)
    precision = (best_for_candidate * candidate_weights).sum(1) / candidate_weights.sum(1)
    recall = (best_for_reference * reference_weights).sum(1) / reference_weights.sum(1)
    f_score = torch.nan_to_num(2 * precision * recall / (precision + recall), nan=0.0)
    return list(zip(precision.tolist(), recall.tolist(), f_score.tolist()))


def best_over_references(scores: Sequence[tuple[float, float, float]]) -> tuple[float, ...]:
    """(P, R, F), each the best over one candidate's references' (P, R, F)."""
    return tuple(max(values) for values in zip(*scores))
