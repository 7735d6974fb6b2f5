"""QuestEval's arithmetic (Scialom et al., 2021), as pure functions of recorded questions and
answers, under three protocols by name (shared/docs/questeval.md; `M:`/`U:` cite the official
`questeval_metric.py`/`utils.py` at v0.2.4, "(v0.1.1)" the tag the README recommends):

- `v0.2.4` (the current package): per question, the chosen scores (answerability, F1,
  BERTScore) clipped to [0, 1]; a direction's score is the mean of them all (M:634-676; 0
  without questions); with the weighter, the source's questions answered on the summary
  have each score multiplied by their weight, still divided by their number. A pair's score
  is the mean of its two directions (0 when either text is empty, M:625-630), the example's
  the max over the source and each reference (M:264-275).
- `v0.1.1`: the same direction score over F1 and answerability (M:321-362 (v0.1.1)); recall
  is the mean over the compared texts of their questions answered on the summary, precision
  the mean of the summary's questions answered on them, the score (P + R) / 2 (M:385-387
  (v0.1.1)).
- `paper`: precision the mean SQuAD F1 of the summary's questions answered on a compared
  text (eq. 1), recall Σ W·answerability / Σ W over its questions answered on the summary
  (eq. 2; W = 1 without the weighter and for references), the score 2PR / (P + R) (0 when
  P + R = 0); the max over compared texts, as the code takes it.

Each protocol reports the precision and recall of the pair that gives its score.
"""
from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tasks.plumbing.errors import UnknownNameError, did_you_mean, unknown_names

PROTOCOLS = ("v0.2.4", "v0.1.1", "paper")
SCORE_TYPES = ("answerability", "f1", "bertscore")
#: the score types each protocol uses by default (v0.2.4: M:27; v0.1.1: M:33, M:353 (v0.1.1))
DEFAULT_SCORES = {"v0.2.4": ("answerability", "bertscore", "f1"),
                  "v0.1.1": ("f1", "answerability"), "paper": ("f1", "answerability")}
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise UnknownNameError(f"unknown QuestEval protocol {name!r} (choices: "
                               f"{', '.join(PROTOCOLS)}){did_you_mean([name], PROTOCOLS)}")
    return name


def check_score_types(names: Sequence[str]) -> tuple[str, ...]:
    """The question score types, each known, at least one, none twice."""
    unknown = unknown_names(names, SCORE_TYPES)
    if unknown or not names or len(set(names)) != len(names):
        raise UnknownNameError(f"question scores are one or more of {', '.join(SCORE_TYPES)}, "
                               f"each once; got {','.join(names) or 'none'}")
    return tuple(names)


# ---- answers compared ---------------------------------------------------------------------
def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces (U:130)."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_f1(gold: str, prediction: str) -> float:
    """SQuAD token F1; with an empty side, 1 when both are empty (U:123-162)."""
    gold_tokens = normalize_answer(gold).split() if gold else []
    predicted = normalize_answer(prediction).split() if prediction else []
    if not gold_tokens or not predicted:
        return float(gold_tokens == predicted)
    same = sum((collections.Counter(gold_tokens) & collections.Counter(predicted)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def split_on_punct(tokens: Sequence[tuple[str, bool, int]], text: str) -> list[str]:
    """The official sentence splitter (U:22-45) over (token text, is punctuation, character
    offset) tokens of `text`: a sentence ends after a `.`, `!` or `?` token, at the next
    token that is not punctuation."""
    sentences, start, seen_period = [], 0, False
    for token_text, is_punct, offset in tokens:
        if seen_period and not is_punct:
            sentences.append(text[start:offset].rstrip())
            start, seen_period = offset, False
        elif token_text in (".", "!", "?"):
            seen_period = True
    if start < len(text) and tokens:
        sentences.append(text[start:].rstrip())
    return sentences


# ---- one question's record ------------------------------------------------------------------
@dataclass(frozen=True)
class Asked:
    """A question generated from one text (its gold answer) and answered on another."""
    question: str
    gold: str
    answer: str
    answerability: float
    similarity: Mapping[str, float]  # "f1" (and "bertscore") of answer against gold
    weight: float = 1.0


def clip(value: float) -> float:
    """Into [0, 1] (model probabilities come out ~1.000000X, M:640)."""
    return max(min(1.0, float(value)), 0.0)


def question_score(asked: Asked, kind: str) -> float:
    return clip(asked.answerability if kind == "answerability" else asked.similarity[kind])


def direction_score(asked: Sequence[Asked], kinds: Sequence[str], weighted: bool) -> float:
    """The mean of every chosen score of every question, each times the question's weight
    when `weighted` (unnormalised, as the code does); 0 without questions."""
    values = [question_score(item, kind) * (item.weight if weighted else 1.0)
              for kind in kinds for item in asked]
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Compared:
    """One compared text (the source or a reference) against the summary: its questions
    answered on the summary (recall side) and the summary's answered on it (precision)."""
    role: str                     # "source" or "reference"
    empty: bool                   # the compared text is empty
    recall: Sequence[Asked]
    precision: Sequence[Asked]


@dataclass(frozen=True)
class Score:
    score: float
    precision: float
    recall: float


def _best(scores: Sequence[Score]) -> Score:
    best = scores[0]
    for score in scores[1:]:
        if score.score > best.score:  # the first of equal maxima, as `max` keeps it
            best = score
    return best


def _max_over_pairs(summary_empty: bool, compared: Sequence[Compared], pair) -> Score:
    """The best of `pair(compared text)` over the compared texts (0 for a pair with an empty
    text, M:625-626)."""
    return _best([Score(0.0, 0.0, 0.0) if summary_empty or other.empty else pair(other)
                  for other in compared])


def score_v024(summary_empty: bool, compared: Sequence[Compared], kinds: Sequence[str],
               weighter: bool) -> Score:
    def pair(other: Compared) -> Score:
        recall = direction_score(other.recall, kinds, weighter and other.role == "source")
        precision = direction_score(other.precision, kinds, False)
        return Score((recall + precision) / 2, precision, recall)
    return _max_over_pairs(summary_empty, compared, pair)


def score_v011(summary_empty: bool, compared: Sequence[Compared], kinds: Sequence[str],
               weighter: bool) -> Score:
    if summary_empty:
        return Score(0.0, 0.0, 0.0)
    recall = sum(direction_score(other.recall, kinds, weighter and other.role == "source")
                 for other in compared) / len(compared)
    precision = sum(direction_score(other.precision, kinds, False)
                    for other in compared) / len(compared)
    return Score((recall + precision) / 2, precision, recall)


def paper_recall(asked: Sequence[Asked], weighted: bool) -> float:
    weights = [item.weight if weighted else 1.0 for item in asked]
    total = sum(weights)
    return sum(w * clip(item.answerability) for w, item in zip(weights, asked)) / total \
        if total > 0 else 0.0


def score_paper(summary_empty: bool, compared: Sequence[Compared], kinds: Sequence[str],
                weighter: bool) -> Score:
    def pair(other: Compared) -> Score:
        precision = sum(question_score(item, "f1") for item in other.precision) / \
            len(other.precision) if other.precision else 0.0
        recall = paper_recall(other.recall, weighter and other.role == "source")
        harmonic = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return Score(harmonic, precision, recall)
    return _max_over_pairs(summary_empty, compared, pair)


SCORERS = {"v0.2.4": score_v024, "v0.1.1": score_v011, "paper": score_paper}


def protocol_score(protocol: str, summary_empty: bool, compared: Sequence[Compared],
                   kinds: Sequence[str], weighter: bool) -> Score:
    """The summary's score under `protocol` (its `kinds` of question scores; `paper` always
    reads F1 and answerability as its equations do)."""
    return SCORERS[check_protocol(protocol)](summary_empty, compared, kinds, weighter)
