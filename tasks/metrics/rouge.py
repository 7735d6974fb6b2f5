"""ROUGE-1/2/L F-measure and exact match as the USB evaluation computes them.

Official rules (docs/usb-format.md §4): prediction and reference are lower-cased, tokenized with
rouge-score's default tokenizer without stemming; ROUGE-L is the sentence-level LCS score (not
Lsum); each metric is the plain mean of per-example F-measures. `exactmatch` compares the
lower-cased strings.

The per-example numbers are bit-for-bit those of `rouge_scorer.RougeScorer(["rouge1", "rouge2",
"rougeL"], use_stemmer=False).score(reference.lower(), prediction.lower())`: the same tokenizer
and the same float formulas, with exact integer n-gram overlaps and an exact bit-parallel LCS
length (Hyyrö 2004) in place of rouge-score's O(n·m) Python table. Long inputs can be spread over
worker processes; chunks are contiguous and merged in order, so results never depend on the
number of workers.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import contextvars
import math
import multiprocessing
from typing import Iterator, Sequence

import numpy as np
from rouge_score import scoring, tokenize

ROUGE_KEYS = ("rouge1", "rouge2", "rougel", "exactmatch")
#: below this many examples a process pool costs more than it saves
PARALLEL_MIN_EXAMPLES = 2000

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


def rouge_tokens(text: str) -> list[str]:
    """Lower-case, then rouge-score's default tokenization without stemming.

    Same tokens as `rouge_score.tokenize.tokenize(text.lower(), None)`: after replacing every
    run of characters outside [a-z0-9] by a space only valid tokens remain, so a plain
    whitespace split replaces its regex split and per-token validity check.
    """
    return tokenize.NON_ALPHANUM_RE.sub(" ", text.lower()).split()


def ngram_counts(tokens: Sequence[str], n: int) -> collections.Counter:
    """Multiset of the n-grams of `tokens` (tokens themselves for n = 1, else tuples)."""
    if n == 1:
        return collections.Counter(tokens)
    return collections.Counter(zip(*(tokens[i:] for i in range(n))))


def ngram_fmeasure(target: collections.Counter, prediction: collections.Counter) -> float:
    """rouge-score's n-gram F-measure from the two n-gram multisets."""
    smaller, larger = (target, prediction) if len(target) <= len(prediction) else (
        prediction, target)
    overlap = sum(min(count, larger[gram]) for gram, count in smaller.items() if gram in larger)
    precision = overlap / max(sum(prediction.values()), 1)
    recall = overlap / max(sum(target.values()), 1)
    return scoring.fmeasure(precision, recall)


def lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """Length of the longest common subsequence (bit-parallel, exact)."""
    if not first or not second:
        return 0
    if len(second) > len(first):  # LCS is symmetric: loop over the shorter sequence
        first, second = second, first
    masks: dict[str, int] = {}
    for position, token in enumerate(first):
        masks[token] = masks.get(token, 0) | (1 << position)
    all_ones = (1 << len(first)) - 1
    row = all_ones
    for token in second:
        matches = row & masks.get(token, 0)
        row = ((row + matches) | (row - matches)) & all_ones
    return len(first) - row.bit_count()


def lcs_fmeasure(target: Sequence[str], prediction: Sequence[str]) -> float:
    """rouge-score's ROUGE-L F-measure (0 when either side has no tokens)."""
    if not target or not prediction:
        return 0.0
    lcs = lcs_length(target, prediction)
    return scoring.fmeasure(lcs / len(prediction), lcs / len(target))


def rouge_values(prediction: str, reference: str) -> tuple[float, float, float, float]:
    """(rouge1, rouge2, rougel, exactmatch) of one prediction against its reference."""
    predicted, target = rouge_tokens(prediction), rouge_tokens(reference)
    return (ngram_fmeasure(ngram_counts(target, 1), ngram_counts(predicted, 1)),
            ngram_fmeasure(ngram_counts(target, 2), ngram_counts(predicted, 2)),
            lcs_fmeasure(target, predicted),
            float(prediction.lower() == reference.lower()))


def rouge_example(prediction: str, reference: str) -> dict:
    """ROUGE-1/2/L F-measure and exact match of one prediction against its reference."""
    return dict(zip(ROUGE_KEYS, rouge_values(prediction, reference)))


def _score_chunk(pairs: Sequence[tuple[str, str]]) -> list[tuple[float, ...]]:
    return [rouge_values(prediction, reference) for prediction, reference in pairs]


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
    if aggregate not in ROUGE_AGGREGATES:
        raise ValueError(f"unknown ROUGE aggregate {aggregate!r} (known: "
                         f"{', '.join(ROUGE_AGGREGATES)})")
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
