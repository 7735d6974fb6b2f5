"""ROUGE recall of summaries against references, as used for meta-evaluation.

Per example: `rouge_scorer.RougeScorer([type], use_stemmer=True).score(target=reference,
prediction=summary)[type].recall` (rouge-score's default tokenizer: lower-cased, non-alphanumerics
removed, Porter stemming of tokens longer than 3 characters; ROUGE-L is sentence-level LCS).
The only change is speed: each distinct text is tokenized once (`CachingTokenizer`), which gives
identical tokens, hence identical scores.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError, check_choices

#: metric name -> rouge-score type
RECALL_METRICS = {"rouge1_recall": "rouge1", "rouge2_recall": "rouge2",
                  "rougeL_recall": "rougeL"}


class CachingTokenizer:
    """rouge-score's DefaultTokenizer with a per-text cache and a per-word stem cache (same
    tokens, computed once: `rouge_score.tokenize.tokenize` step by step, with the Porter stem
    of each distinct word memoised). A `tokenize(text)` object is all `RougeScorer` asks of a
    tokenizer; rouge-score (which imports NLTK: 1.5 s) is imported when one is made, so that
    processes that never score ROUGE (a leaderboard server, its workers) start without it."""

    def __init__(self, use_stemmer: bool = True):
        from rouge_score import tokenize as rouge_tokenize
        from rouge_score import tokenizers

        self._rules = rouge_tokenize
        self._stemmer = tokenizers.DefaultTokenizer(use_stemmer=use_stemmer)._stemmer
        self._cache: dict[str, tuple[str, ...]] = {}
        self._stems: dict[str, str] = {}

    def _stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stems[word] = self._stemmer.stem(word)
        return stem

    def _tokenize(self, text: str) -> tuple[str, ...]:
        rules = self._rules
        tokens = rules.SPACES_RE.split(rules.NON_ALPHANUM_RE.sub(" ", text.lower()))
        if self._stemmer:
            tokens = [self._stem(token) if len(token) > 3 else token for token in tokens]
        return tuple(token for token in tokens if rules.VALID_TOKEN_RE.match(token))

    def tokenize(self, text: str) -> list[str]:
        tokens = self._cache.get(text)
        if tokens is None:
            tokens = self._cache[text] = self._tokenize(text)
        return list(tokens)


def recall_scorer(types: Sequence[str], use_stemmer: bool):
    """rouge-score's `RougeScorer` of these types on a `CachingTokenizer`."""
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(types), tokenizer=CachingTokenizer(use_stemmer))


def rouge_types_of(metrics: Sequence[str]) -> list[str]:
    check_choices(metrics, RECALL_METRICS, "ROUGE recall metric")
    return list(dict.fromkeys(RECALL_METRICS[m] for m in metrics))


def rouge_recall(summaries: Sequence[str], references: Sequence[str],
                 metrics: Sequence[str] = ("rouge2_recall",), use_stemmer: bool = True,
                 scorer: Any = None) -> dict[str, list[float]]:
    """{metric: [recall per example]} of each summary against the reference at its index."""
    if len(summaries) != len(references):
        raise SumbenchError(f"{len(summaries)} summaries but {len(references)} references")
    types = rouge_types_of(metrics)
    scorer = scorer or recall_scorer(types, use_stemmer)
    per_type: dict[str, list[float]] = {t: [] for t in types}
    for summary, reference in zip(summaries, references):
        scores = scorer.score(target=reference, prediction=summary)
        for rouge_type in types:
            per_type[rouge_type].append(scores[rouge_type].recall)
    return {metric: per_type[RECALL_METRICS[metric]] for metric in metrics}


def rouge_recall_by_system(summaries: Mapping[str, Sequence[str]], references: Sequence[str],
                           metrics: Sequence[str] = ("rouge2_recall",),
                           use_stemmer: bool = True) -> dict[str, dict[str, list[float]]]:
    """{metric: {system: [recall per example]}}; references are tokenized once for all."""
    from tqdm import tqdm

    scorer = recall_scorer(rouge_types_of(metrics), use_stemmer)
    table: dict[str, dict[str, list[float]]] = {metric: {} for metric in metrics}
    for system in tqdm(list(summaries), desc="ROUGE recall", unit="system", disable=None):
        scores = rouge_recall(summaries[system], references, metrics, scorer=scorer)
        for metric in metrics:
            table[metric][system] = scores[metric]
    return table
