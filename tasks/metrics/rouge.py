"""ROUGE-1/2/L F-measure and exact match as the USB evaluation computes them.

Official rules (docs/usb-format.md §4): prediction and reference are lower-cased, tokenized with
rouge-score's default tokenizer without stemming; ROUGE-L is the sentence-level LCS score (not
Lsum); each metric is the plain mean of per-example F-measures. `exactmatch` compares the
lower-cased strings.

The per-example numbers are bit-for-bit those of `rouge_scorer.RougeScorer(["rouge1", "rouge2",
"rougeL"], use_stemmer=False).score(reference.lower(), prediction.lower())`: the same tokens
and the same float formulas, with exact integer n-gram overlaps (counted for a block of pairs
at once over sorted (pair, n-gram) keys) and an exact bit-parallel LCS length (rapidfuzz, over
dense token ids) in place of rouge-score's Counters and O(n·m) Python table. Long inputs can be
spread over worker processes; chunks are contiguous and merged in order, so results never
depend on the number of workers or the block size.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import itertools
import math
import multiprocessing
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
from rapidfuzz.distance import LCSseq

from tasks.plumbing.errors import check_choice

ROUGE_KEYS = ("rouge1", "rouge2", "rougel", "exactmatch")
#: below this many examples a process pool costs more than it saves
PARALLEL_MIN_EXAMPLES = 2000
#: pairs whose n-grams are counted together (bounds the memory of one NumPy pass)
BLOCK_PAIRS = 2048

_WORKERS: contextvars.ContextVar[int] = contextvars.ContextVar("sumbench_rouge_workers",
                                                               default=1)


@contextlib.contextmanager
def using_workers(workers: int) -> Iterator[None]:
    """Within the block, `rouge_per_example` uses up to `workers` processes by default."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    token = _WORKERS.set(workers)
    try:
        yield
    finally:
        _WORKERS.reset(token)


#: bytes -> the byte itself for [a-z0-9], else a space (every byte of a non-ASCII character is
#: >= 0x80, so a non-ASCII character becomes spaces, as rouge-score's regex makes it one)
_TOKEN_BYTES = bytes(byte if chr(byte) in "abcdefghijklmnopqrstuvwxyz0123456789" else 0x20
                     for byte in range(256))


def rouge_tokens(text: str) -> list[str]:
    """Lower-case, then rouge-score's default tokenization without stemming.

    Same tokens as `rouge_score.tokenize.tokenize(text.lower(), None)`: that replaces every
    run of characters outside [a-z0-9] by a space and keeps the valid tokens left, which are
    the whitespace-separated runs of [a-z0-9]; here the lower-cased text's UTF-8 bytes are
    mapped to themselves or a space in one table lookup (tested equal on random Unicode).
    """
    encoded = text.lower().encode("utf-8", "surrogatepass")
    return encoded.translate(_TOKEN_BYTES).decode("ascii").split()


class _Vocabulary(dict):
    """token -> dense id, a new id for each unseen token."""

    def __missing__(self, token: str) -> int:
        self[token] = identifier = len(self)
        return identifier


def lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """Length of the longest common subsequence (exact: rapidfuzz's bit-parallel LCS over
    dense token ids, which are their own hashes, so no two different tokens can meet)."""
    vocabulary = _Vocabulary()
    return LCSseq.similarity(list(map(vocabulary.__getitem__, first)),
                             list(map(vocabulary.__getitem__, second)))


class _Side(NamedTuple):
    """The tokens of one side (predictions or references) of a block of pairs: their ids in
    one array, the pair each belongs to, and the number per pair."""
    ids: np.ndarray
    pair: np.ndarray
    lengths: np.ndarray


def _side(token_lists: list[list[str]], vocabulary: _Vocabulary) -> _Side:
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    ids = np.fromiter(map(vocabulary.__getitem__, itertools.chain.from_iterable(token_lists)),
                      dtype=np.int64, count=int(lengths.sum()))
    return _Side(ids, np.repeat(np.arange(len(token_lists)), lengths), lengths)


def _bigrams(side: _Side, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(bigram keys, their pairs): consecutive tokens of the same text."""
    same_text = side.pair[:-1] == side.pair[1:]
    keys = side.ids[:-1][same_text] * n_tokens + side.ids[1:][same_text]
    return keys, side.pair[:-1][same_text]


def _overlaps(predicted: tuple[np.ndarray, np.ndarray], target: tuple[np.ndarray, np.ndarray],
              n_pairs: int) -> np.ndarray:
    """Per pair, the size of the multiset intersection of its predicted and target keys (the
    sum over shared n-grams of the smaller count, as rouge-score counts its overlap)."""
    keys, inverse = np.unique(np.concatenate([predicted[0], target[0]]), return_inverse=True)
    dense_p, dense_t = inverse[:len(predicted[0])], inverse[len(predicted[0]):]
    width = len(keys) + 1
    unique_p, counts_p = np.unique(predicted[1] * width + dense_p, return_counts=True)
    unique_t, counts_t = np.unique(target[1] * width + dense_t, return_counts=True)
    common, at_p, at_t = np.intersect1d(unique_p, unique_t, assume_unique=True,
                                        return_indices=True)
    shared = np.minimum(counts_p[at_p], counts_t[at_t])
    return np.bincount(common // width, weights=shared, minlength=n_pairs)


def _fmeasure(overlap: np.ndarray, n_predicted: np.ndarray, n_target: np.ndarray) -> np.ndarray:
    """rouge-score's F-measure, element-wise with the same float operations: precision
    overlap / max(n_predicted, 1), recall likewise, 2·p·r / (p + r), or 0 when p + r = 0."""
    precision = overlap / np.maximum(n_predicted, 1)
    recall = overlap / np.maximum(n_target, 1)
    total = precision + recall
    return np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)


def _score_block(pairs: Sequence[tuple[str, str]]) -> list[tuple[float, ...]]:
    """rouge_values of a block of pairs: the n-gram overlaps of all pairs counted at once
    with NumPy over (pair, n-gram) keys, the LCS per pair."""
    predicted_tokens = [rouge_tokens(prediction) for prediction, _ in pairs]
    target_tokens = [rouge_tokens(reference) for _, reference in pairs]
    vocabulary = _Vocabulary()
    predicted, target = _side(predicted_tokens, vocabulary), _side(target_tokens, vocabulary)
    n_pairs, n_tokens = len(pairs), len(vocabulary) + 1
    rouge1 = _fmeasure(_overlaps((predicted.ids, predicted.pair), (target.ids, target.pair),
                                 n_pairs), predicted.lengths, target.lengths)
    rouge2 = _fmeasure(_overlaps(_bigrams(predicted, n_tokens), _bigrams(target, n_tokens),
                                 n_pairs), predicted.lengths - 1, target.lengths - 1)
    ends_p, ends_t = np.cumsum(predicted.lengths).tolist(), np.cumsum(target.lengths).tolist()
    ids_p, ids_t = predicted.ids.tolist(), target.ids.tolist()
    lcs = np.array([LCSseq.similarity(ids_p[end_p - n_p:end_p], ids_t[end_t - n_t:end_t])
                    for end_p, n_p, end_t, n_t in zip(ends_p, predicted.lengths.tolist(),
                                                      ends_t, target.lengths.tolist())],
                   dtype=np.float64)
    both = (predicted.lengths > 0) & (target.lengths > 0)
    rougel = np.where(both, _fmeasure(lcs, predicted.lengths, target.lengths), 0.0)
    exact = [float(prediction.lower() == reference.lower()) for prediction, reference in pairs]
    return list(zip(rouge1.tolist(), rouge2.tolist(), rougel.tolist(), exact))


def rouge_values(prediction: str, reference: str) -> tuple[float, float, float, float]:
    """(rouge1, rouge2, rougel, exactmatch) of one prediction against its reference."""
    return _score_block([(prediction, reference)])[0]


def rouge_example(prediction: str, reference: str) -> dict:
    """ROUGE-1/2/L F-measure and exact match of one prediction against its reference."""
    return dict(zip(ROUGE_KEYS, rouge_values(prediction, reference)))


def _score_chunk(pairs: Sequence[tuple[str, str]]) -> list[tuple[float, ...]]:
    return [row for start in range(0, len(pairs), BLOCK_PAIRS)
            for row in _score_block(pairs[start:start + BLOCK_PAIRS])]


def _chunks(items: list, parts: int) -> list[list]:
    """`items` cut into `parts` contiguous, nearly equal pieces (deterministic)."""
    size = math.ceil(len(items) / parts)
    return [items[start:start + size] for start in range(0, len(items), size)]


def _pool_context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def rouge_per_example(predictions: Sequence[str], references: Sequence[str], *,
                      workers: int | None = None) -> list[dict]:
    """Per-example {rouge1, rouge2, rougel, exactmatch}, in input order.

    `workers` (default: the `using_workers` setting, else 1) only changes the speed: inputs
    of at least PARALLEL_MIN_EXAMPLES are cut into contiguous chunks scored by a process pool
    and merged back in order.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    pairs = list(zip(predictions, references))
    workers = _WORKERS.get() if workers is None else workers
    if workers <= 1 or len(pairs) < PARALLEL_MIN_EXAMPLES:
        values = _score_chunk(pairs)
    else:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=_pool_context()) as pool:
            values = [row for chunk in pool.map(_score_chunk, _chunks(pairs, workers * 4))
                      for row in chunk]
    return [dict(zip(ROUGE_KEYS, row)) for row in values]


#: how per-example ROUGE becomes one number: the plain mean (the deterministic default, as
#: shared/fixtures/usb/expected_scores.json), or the median of bootstrap means that the USB
#: evaluation script reports (rouge-score's BootstrapAggregator `mid.fmeasure`)
ROUGE_AGGREGATES = ("mean", "bootstrap-mid")
BOOTSTRAP_SAMPLES = 1000


def bootstrap_mid(values: Sequence[float], rng: np.random.RandomState,
                  n_samples: int = BOOTSTRAP_SAMPLES) -> float:
    """rouge-score's BootstrapAggregator mid value for one score type, with an explicit
    generator: `n_samples` times `rng.choice(n, size=n)`, the mean of each resample (summed
    row by row as over the aggregator's (n, 3) score matrix), then the 50th percentile."""
    matrix = np.zeros((len(values), 3))
    matrix[:, 2] = values
    indices = np.arange(len(values))
    means = np.zeros((n_samples, 3))
    for row in range(n_samples):
        means[row, :] = np.mean(matrix[rng.choice(indices, size=len(values)), :], axis=0)
    return float(np.percentile(means, 50, axis=0)[2])


def aggregate_rouge(examples: Sequence[dict], aggregate: str = "mean", seed: int = 0) -> dict:
    """ROUGE_KEYS over examples: exact match is always the plain mean; ROUGE-1/2/L the plain
    mean, or with `aggregate="bootstrap-mid"` the official scripts' bootstrap median, drawn
    from `np.random.RandomState(seed)` for rouge1, rouge2, rougeL in turn (the scripts draw
    from NumPy's unseeded global generator in the same order: seeding it with `seed` gives
    these numbers exactly)."""
    if not examples:
        raise ValueError("ROUGE needs at least one example")
    check_choice(aggregate, ROUGE_AGGREGATES, "ROUGE aggregate")
    scores = {key: float(np.mean([example[key] for example in examples])) for key in ROUGE_KEYS}
    if aggregate == "bootstrap-mid":
        rng = np.random.RandomState(seed)
        for key in ("rouge1", "rouge2", "rougel"):
            scores[key] = bootstrap_mid([example[key] for example in examples], rng)
    return scores


def rouge_scores(predictions: Sequence[str], references: Sequence[str]) -> dict:
    """Mean ROUGE-1/2/L F-measure and exact match over examples (fractions in 0..1)."""
    return aggregate_rouge(rouge_per_example(predictions, references))


def geometric_mean(values: Sequence[float]) -> float:
    """Geometric mean of non-negative values (0 if any is 0)."""
    if not values:
        raise ValueError("geometric mean of no values")
    if any(value < 0 or math.isnan(value) for value in values):
        raise ValueError(f"geometric mean needs non-negative numbers, got {list(values)}")
    return math.prod(values) ** (1 / len(values))
