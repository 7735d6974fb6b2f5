"""A3CU's computation, as `autoacu==0.1.0:autoacu/a3cu.py` does it (line numbers below are that
file's): each side at most `max_len` tokens (254) without special tokens; recall reads
`[CLS] summary [SEP] reference [SEP]`, precision `[CLS] reference [SEP] summary [SEP]`, token
types 0 for the first part with its `[CLS]` and `[SEP]` and 1 after (70-83), the attention mask
`ids != pad` (54); the score is the model's raw output (no sigmoid, 10-20), F1 computed in
float32 as the official code does on its numpy arrays (128).

Pairs go through the model in batches sorted by length, each distinct (summary, reference)
pair once (kept in `cache`); the official code runs them in the given order, one per batch by
default."""
from __future__ import annotations

from collections.abc import Sequence

from leaderboard.evaluators.acu.a2cu import BoundedCache, chunks, pair_batch, pair_row

#: each side's most tokens (a3cu.py:26)
MAX_TOKENS = 254


def float32_f1(recall: float, precision: float) -> float:
    """AutoACU's F1 in float32 (a3cu.py:128 divides float32 arrays)."""
    import numpy as np

    r, p = np.float32(recall), np.float32(precision)
    return float(np.float32(2) * p * r / (p + r + np.float32(1e-10)))


class A3CU:
    """A3CU's (recall, precision) of (summary, reference) pairs."""

    def __init__(self, model, tokenizer, batch_size: int = 16, max_tokens: int = MAX_TOKENS):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.cache = BoundedCache()

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, float]]:
        todo = [pair for pair in dict.fromkeys(pairs) if pair not in self.cache]
        ids = {text: self.ids(text) for pair in todo for text in pair}
        todo.sort(key=lambda pair: len(ids[pair[0]]) + len(ids[pair[1]]), reverse=True)
        found = {}
        for batch in chunks(todo, self.batch_size):
            recall = self.outputs([self.pair_input(ids[s], ids[r]) for s, r in batch])
            precision = self.outputs([self.pair_input(ids[r], ids[s]) for s, r in batch])
            found.update(zip(batch, zip(recall, precision)))
        self.cache.store(found.items())
        return [found[pair] if pair in found else self.cache[pair] for pair in pairs]

    def ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, truncation=True,
                              max_length=self.max_tokens)["input_ids"]

    def pair_input(self, first: list[int], second: list[int]) -> tuple[list[int], list[int]]:
        return pair_row(self.tokenizer, first, second)

    def outputs(self, rows: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        import torch

        batch = pair_batch(rows, self.tokenizer.pad_token_id, self.model.device)
        with torch.inference_mode():
            return self.model(*batch).float().cpu().tolist()
