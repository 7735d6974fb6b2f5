"""QuestEval's BERTScore question score: the F1 BERTScore of each QA answer against the answer
its question was generated from, through the `bert-score` package (an optional extra).

The official code calls datasets' `bertscore` metric with
`model_type='bert-base-multilingual-cased'` (U:165-184), that is bert-score's `BERTScorer`
with its defaults for that model: layer 9, no idf weighting, no baseline rescaling. Here the
scorer is built once, and pairs go to it in chunks, each chunk one progress step.

bert-score scores a pair 0 when either side has no word piece (its `greedy_cos_idf` masks).
A side that is empty once stripped never reaches it: its `sent_encode` then calls the
tokenizer's `build_inputs_with_special_tokens`, which transformers 5 tokenizers no longer
have, so such pairs get that 0 here directly.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leaderboard.evaluators.bertscore.encoder import default_layer
from tasks.plumbing.errors import SumbenchError
from trainers.inference.generation import resolve_device
from trainers.models.disk_cache import model_revision

#: the official BERTScore model (U:175) and the layer bert-score reads for it
BERTSCORE_MODEL = "bert-base-multilingual-cased"
CHUNK_PAIRS = 512
NO_BERT_SCORE = ("the bertscore question score needs bert-score: pip install "
                 "'sumbench[questeval]' (or choose --question-scores answerability,f1)")


class BertScore:
    """F1 BERTScores of (prediction, gold) pairs from one built `BERTScorer`."""

    def __init__(self, scorer: Any, batch_size: int = 64):
        self.scorer, self.batch_size = scorer, batch_size

    def predict(self, pairs: Sequence[tuple[str, str]], progress=None) -> list[float]:
        scores = [0.0] * len(pairs)
        live = [i for i, (prediction, gold) in enumerate(pairs)
                if prediction.strip() and gold.strip()]
        for start in range(0, len(live), CHUNK_PAIRS):
            chosen = live[start:start + CHUNK_PAIRS]
            _, _, f1 = self.scorer.score([pairs[i][0] for i in chosen],
                                         [pairs[i][1] for i in chosen],
                                         batch_size=self.batch_size)
            for index, value in zip(chosen, f1.tolist()):
                scores[index] = float(value)
            if progress is not None:
                progress.update(len(chosen))
        if progress is not None:
            progress.update(len(pairs) - len(live))
        return scores


def load_bertscore(name: str, layer: int | None = None, *, batch_size: int = 64,
                   device: str = "auto") -> tuple[BertScore, str]:
    """bert-score's scorer for a hub id or folder at `layer` (default: bert-score's for the
    model), and its revision (the model's and the layer) for cache keys."""
    try:
        from bert_score import BERTScorer
    except ImportError:
        raise SumbenchError(NO_BERT_SCORE) from None
    layers = layer if layer is not None else default_layer(name)
    if layers is None:
        raise SumbenchError(f"bert-score has no default layer for the BERTScore model "
                            f"{name!r}: give --bertscore-layer N")
    try:
        scorer = BERTScorer(model_type=name, num_layers=layers, idf=False,
                            rescale_with_baseline=False, device=resolve_device(device))
    except (OSError, ValueError, AssertionError) as error:
        message = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        raise SumbenchError(f"the BERTScore model {name!r} cannot be loaded at layer "
                            f"{layers}: {message}") from None
    return BertScore(scorer, batch_size), f"{model_revision(name, scorer._model)}@layer{layers}"
