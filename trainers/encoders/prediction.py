"""Prediction with a fine-tuned encoder: `predict_probabilities` gives σ(logit) per pair (FAC,
EVEXT), per token (UNSUP: one per input id) or per sentence (EXT: one per kept sentence), in
input order whatever the batch size (batches of inputs of similar size, longest first)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.plumbing.errors import SumbenchError
from trainers.encoders.batches import collate, feature_kind, feature_sizes
from trainers.encoders.training import (
    autocast_context,
    autocast_dtype,
    logits_of,
    model_device,
    pad_token_id,
    to_device,
)


def _rows_out(kind: str, features: Sequence[Any], piece: np.ndarray, probabilities) -> list:
    if kind == "pair":
        return [float(value) for value in probabilities.tolist()]
    widths = [len(features[int(index)].input_ids) if kind == "token"
              else len(features[int(index)].sentence_ids) for index in piece]
    return [row[:width] for row, width in zip(probabilities.tolist(), widths)]


#: a prediction batch closes where the next input is this many times smaller than its first
PREDICTION_GROWTH = 1.25


def prediction_batches(order: np.ndarray, sizes: np.ndarray, batch_size: int,
                       growth: float = PREDICTION_GROWTH) -> list[np.ndarray]:
    """`order` (largest first) in batches of at most `batch_size` inputs of similar size: a
    batch closes before an input `growth` times smaller than its first, so padding stays
    small however the lengths spread (one input at a time pads nothing)."""
    batches, start = [], 0
    for position in range(1, len(order) + 1):
        if position == len(order) or position - start == batch_size or \
                sizes[order[position]] * growth < sizes[order[start]]:
            batches.append(order[start:position])
            start = position
    return batches


def predict_probabilities(model, features: Sequence[Any], tokenizer=None, batch_size: int = 32,
                          *, precision: str = "fp32", progress: bool = False) -> list:
    """σ(logit) per pair (a float each), per token (a list per input, one per input id) or per
    sentence (a list per article; [] for an article without sentences), in input order.
    Batches of at most `batch_size` inputs of similar size, longest first
    (`prediction_batches`); the model is left in eval mode."""
    import torch
    from tqdm.auto import tqdm

    if not features:
        return []
    if batch_size < 1:
        raise SumbenchError(f"batch_size must be a positive integer, got {batch_size!r}")
    kind, pad_id = feature_kind(features), pad_token_id(model, tokenizer)
    device = model_device(model)
    dtype = autocast_dtype(precision, device)
    longest, rows = feature_sizes(features)
    order = np.lexsort((np.arange(len(features)), -longest, -(longest * rows)))
    order = order[rows[order] > 0]
    results: list[Any] = [[] for _ in features]
    model.eval()
    with torch.no_grad():
        for piece in tqdm(prediction_batches(order, longest * rows, batch_size),
                          desc="predicting", unit="batch", disable=None if progress else True):
            batch = to_device(collate(features, piece, pad_id), device)
            with autocast_context(device, dtype):
                logits = logits_of(model, batch)
            probabilities = torch.sigmoid(logits.float()).cpu()
            for index, value in zip(piece, _rows_out(kind, features, piece, probabilities)):
                results[int(index)] = value
    return results
