"""nQAPyramid = p_r * p_l * QAPyramid: repetition and length penalties.

Words. |s| and |r| are word counts of the system summary and the reference: the text is split
into sentences with pysbd (English, clean=False) and each sentence tokenized with NLTK's
`word_tokenize(sentence, preserve_line=True)` (punctuation marks are words). This reproduces the
p_l values released with QAPyramid exactly (see tests); it equals `nltk.word_tokenize` with
Punkt sentence splitting without needing the Punkt model.

Repetition. A span of n >= 1 words "repeated consecutively more than 3 times" is one that occurs
at least 4 times in a row (words compared lower-cased). Scanning left to right, at each position
the n whose run covers the most words is taken (ties: the shortest n); the words of every
occurrence after the first count as repeated and the scan resumes after the run.
rp = repeated words / |s| and p_r = 1 - rp. Example: "a b a b a b a b c" has "a b" 4 times in a
row, so 6 of 9 words are repeated: rp = 2/3, p_r = 1/3.

Length. p_l = exp(min(0, (1 - |s| * p_r / |r|) / alpha)), alpha = 6 by default; |s| * p_r is the
effective length. Summaries no longer than the reference are not penalized.

Calibration. `calibrate_alpha` picks, among candidate alphas (1..10 by default), the one whose
p_l * QAPyramid has the lowest absolute Pearson correlation with the effective length (ties:
the smallest alpha).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from tasks.metrics.correlation import correlation
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.text import pysbd_sentence_words

DEFAULT_ALPHA = 6.0
MIN_OCCURRENCES = 4  # "more than 3 times"

Tokenize = Callable[[str], list[str]]


@functools.lru_cache(maxsize=1)
def sentence_words(text: str) -> list[str]:
    """Words of `text`: pysbd sentences, each tokenized by NLTK word_tokenize (this reproduces
    the released length penalties exactly)."""
    return pysbd_sentence_words(text)


def repeated_word_mask(words: Sequence[str], min_occurrences: int = MIN_OCCURRENCES
                       ) -> list[bool]:
    """True for each word that belongs to a repeat (after the first) of a run of a span that
    occurs at least `min_occurrences` times in a row."""
    lowered = [word.lower() for word in words]
    mask = [False] * len(lowered)
    start = 0
    while start < len(lowered):
        covered, size = 0, 0
        for n in range(1, (len(lowered) - start) // min_occurrences + 1):
            span, runs = lowered[start:start + n], 1
            while lowered[start + runs * n:start + (runs + 1) * n] == span:
                runs += 1
            if runs >= min_occurrences and (runs - 1) * n > covered:
                covered, size = (runs - 1) * n, n
        if covered:
            mask[start + size:start + size + covered] = [True] * covered
            start += size + covered
        else:
            start += 1
    return mask


def repetition_ratio(words: Sequence[str]) -> float:
    """rp: the share of words that are repeats (0 for an empty summary)."""
    return sum(repeated_word_mask(words)) / len(words) if words else 0.0


def repetition_penalty(words: Sequence[str]) -> float:
    """p_r = 1 - rp."""
    return 1.0 - repetition_ratio(words)


def length_penalty(summary_length: float, reference_length: float,
                   alpha: float = DEFAULT_ALPHA, p_r: float = 1.0) -> float:
    """p_l = exp(min(0, (1 - summary_length * p_r / reference_length) / alpha))."""
    if reference_length <= 0:
        raise SumbenchError("the reference has no words; the length penalty is undefined")
    if alpha <= 0:
        raise SumbenchError(f"alpha must be positive, got {alpha}")
    return math.exp(min(0.0, (1.0 - summary_length * p_r / reference_length) / alpha))


@dataclass(frozen=True)
class Penalties:
    """The penalties of one summary and the word counts they come from."""
    summary_words: int
    reference_words: int
    p_r: float
    p_l: float

    @property
    def effective_length(self) -> float:
        return self.summary_words * self.p_r

    def apply(self, qapyramid: float) -> float:
        """nQAPyramid = p_r * p_l * QAPyramid."""
        return self.p_r * self.p_l * qapyramid


def penalties(summary: str, reference: str, alpha: float = DEFAULT_ALPHA,
              tokenize: Tokenize = sentence_words) -> Penalties:
    """Repetition and length penalties of `summary` against `reference`."""
    words, reference_words = tokenize(summary), tokenize(reference)
    p_r = repetition_penalty(words)
    p_l = length_penalty(len(words), len(reference_words), alpha, p_r)
    return Penalties(len(words), len(reference_words), p_r, p_l)


@dataclass(frozen=True)
class AlphaCalibration:
    """The chosen alpha and the Pearson r of p_l * QAPyramid with effective length per alpha."""
    alpha: float
    correlations: dict[float, float]


def calibrate_alpha(qapyramid_scores: Sequence[float], effective_lengths: Sequence[float],
                    reference_lengths: Sequence[float],
                    alphas: Iterable[float] = range(1, 11)) -> AlphaCalibration:
    """The alpha whose p_l * QAPyramid has the lowest |Pearson r| with effective length."""
    if not len(qapyramid_scores) == len(effective_lengths) == len(reference_lengths):
        raise SumbenchError("calibrate_alpha needs equally long score and length sequences")
    correlations = {}
    for alpha in alphas:
        adjusted = [length_penalty(length, reference, alpha) * score for score, length, reference
                    in zip(qapyramid_scores, effective_lengths, reference_lengths)]
        correlations[alpha] = correlation(adjusted, list(effective_lengths), "pearson")
    defined = {a: r for a, r in correlations.items() if not math.isnan(r)}
    if not defined:
        raise SumbenchError("no candidate alpha gives a defined correlation (need varied "
                            "scores and lengths)")
    best = min(defined, key=lambda a: (abs(defined[a]), a))
    return AlphaCalibration(alpha=best, correlations=correlations)


def normalize(scores: Mapping[str, Mapping[str, float]],
              summaries: Mapping[tuple[str, str], str], references: Mapping[str, str],
              alpha: float = DEFAULT_ALPHA, tokenize: Tokenize = sentence_words
              ) -> dict[str, dict[str, dict[str, float]]]:
    """{system: {example: {QAPyramid, nQAPyramid, p_r, p_l, words, reference_words}}}.

    `scores` are QAPyramid scores by system and example; `summaries` maps (system, example) to
    the summary text and `references` each example to its reference.
    """
    missing = [(s, e) for s, examples in scores.items() for e in examples
               if (s, e) not in summaries or e not in references]
    if missing:
        raise SumbenchError(f"no summary or reference for (system, example) "
                            f"{', '.join(map(str, missing[:5]))}")
    needed = {example for examples in scores.values() for example in examples}
    reference_words = {ex: len(tokenize(references[ex])) for ex in sorted(needed)}
    table: dict[str, dict[str, dict[str, float]]] = {}
    for system, examples in scores.items():
        for example, score in examples.items():
            words = tokenize(summaries[(system, example)])
            p_r = repetition_penalty(words)
            p_l = length_penalty(len(words), reference_words[example], alpha, p_r)
            table.setdefault(system, {})[example] = {
                "QAPyramid": score, "nQAPyramid": p_r * p_l * score, "p_r": p_r, "p_l": p_l,
                "words": len(words), "reference_words": reference_words[example]}
    return table


def with_alpha(table: Mapping[str, Mapping[str, Mapping[str, float]]], alpha: float
               ) -> dict[str, dict[str, dict[str, float]]]:
    """A `normalize` table recomputed for another alpha (no re-tokenization)."""
    rescaled: dict[str, dict[str, dict[str, float]]] = {}
    for system, examples in table.items():
        for example, row in examples.items():
            p_l = length_penalty(row["words"], row["reference_words"], alpha, row["p_r"])
            rescaled.setdefault(system, {})[example] = {
                **row, "p_l": p_l, "nQAPyramid": row["p_r"] * p_l * row["QAPyramid"]}
    return rescaled
