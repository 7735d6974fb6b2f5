"""Encoder probabilities into the official prediction records (docs/usb-baselines.md §3,
docs/usb-format.md §3); each record is built by its task's `prediction_record`, so it carries
the dataset fields in the official order, `task` and `prediction`.

- FAC: `prediction` = [1 - P(unsupported)] (the scorer reads P(supported)).
- EVEXT: one record per (article, summary line i), `prediction` = [p_ij for every line j].
- EXT: `prediction` = [p per kept line] (the scorer pads dropped lines with 0); windows of an
  article stitched in line order.
- UNSUP: a token is positive iff p > 0.5, a word iff its first token is; each maximal run of
  positive words is a span; `prediction` = the summary with "[]" inserted at the span's first
  word's start and "[/]" at its last word's end (the summary unchanged without spans).
"""
from __future__ import annotations

from collections.abc import Sequence

from tasks.metrics.spans import CLOSE_MARK, OPEN_MARK, word_spans
from tasks.plumbing.errors import DataError
from tasks.usb.evidence import EvidenceExtraction
from tasks.usb.extractive import ExtractiveSummarization
from tasks.usb.factuality import FactualityClassification
from tasks.usb.unsupported import UnsupportedSpanPrediction
from trainers.encoders.inputs import ArticleInput, EvidencePairInput, TokenInput

#: a token (and a word) is positive above this probability
THRESHOLD = 0.5


def _same_length(what: str, items: Sequence, probabilities: Sequence) -> None:
    if len(items) != len(probabilities):
        raise ValueError(f"{len(probabilities)} probabilities for {len(items)} {what}")


def fac_records(records: Sequence[dict], unsupported: Sequence[float]) -> list[dict]:
    """One record per FAC record from P(unsupported) (σ of the `<s>` logit)."""
    _same_length("FAC records", records, unsupported)
    task = FactualityClassification()
    return [task.prediction_record(record, [1.0 - float(p)])
            for record, p in zip(records, unsupported)]


def evext_records(records: Sequence[dict], pairs: Sequence[EvidencePairInput],
                  probabilities: Sequence[float]) -> list[dict]:
    """One record per (article, summary line), in record then line order, from the
    probability of each pair (`inputs.evext_inputs` order or any other)."""
    _same_length("EVEXT pairs", pairs, probabilities)
    by_place = {(pair.record_index, pair.summary_index, pair.line_index): float(p)
                for pair, p in zip(pairs, probabilities)}
    task, out = EvidenceExtraction(), []
    for index, record in enumerate(records):
        for instance in task.instances([record]):
            i, n_lines = instance["summ_idx"], len(instance["input_lines"])
            missing = [j for j in range(n_lines) if (index, i, j) not in by_place]
            if missing:
                raise DataError(f"record {index}: no probability for summary line {i}, "
                                f"input line {missing[0]}", field="input_lines")
            out.append(task.prediction_record(
                instance, [by_place[index, i, j] for j in range(n_lines)]))
    return out


def ext_records(records: Sequence[dict], probabilities: Sequence[Sequence[float]],
                articles: Sequence[ArticleInput] | None = None) -> list[dict]:
    """One record per article from the probabilities of its kept lines; with `articles` (the
    inputs, one per window of an article), each article's windows stitched in order."""
    if articles is not None:
        _same_length("EXT windows", articles, probabilities)
        stitched: list[list[float]] = [[] for _ in records]
        for article, line_probabilities in zip(articles, probabilities):
            stitched[article.record_index].extend(line_probabilities)
        probabilities = stitched
    _same_length("EXT articles", records, probabilities)
    task = ExtractiveSummarization()
    return [task.prediction_record(record, [float(p) for p in line_probabilities])
            for record, line_probabilities in zip(records, probabilities)]


# ---- UNSUP: token probabilities into a bracketed summary ----------------------------------
def positive_words(token_words: Sequence[int | None], probabilities: Sequence[float],
                   n_words: int) -> list[bool]:
    """Per word, whether its first token's probability exceeds `THRESHOLD`. A word holding
    no token's first character takes the token that covers its start: the last token of an
    earlier word."""
    _same_length("tokens", token_words, probabilities)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for token, word in enumerate(token_words):
        if word is not None:
            first.setdefault(word, token)
            last[word] = token
    decided, covering = [], None
    for word in range(n_words):
        token = first.get(word, covering)
        decided.append(token is not None and float(probabilities[token]) > THRESHOLD)
        covering = last.get(word, covering)
    return decided


def word_runs(positive: Sequence[bool]) -> list[tuple[int, int]]:
    """(first, last) word index of each maximal run of positive words."""
    runs: list[tuple[int, int]] = []
    for word, inside in enumerate(positive):
        if inside and runs and runs[-1][1] == word - 1:
            runs[-1] = (runs[-1][0], word)
        elif inside:
            runs.append((word, word))
    return runs


def bracketed_summary(summary: str, runs: Sequence[tuple[int, int]],
                      words: Sequence[tuple[int, int]] | None = None) -> str:
    """`summary` with "[]" at the start of each run's first word and "[/]" at the end of its
    last word (insertions only, so the scorer's character diff keeps every summary
    character)."""
    words = word_spans(summary) if words is None else words
    text = summary
    for first, last in sorted(runs, reverse=True):
        start, end = words[first][0], words[last][1]
        text = text[:start] + OPEN_MARK + text[start:end] + CLOSE_MARK + text[end:]
    return text


def span_prediction(summary: str, token_input: TokenInput,
                    probabilities: Sequence[float]) -> str:
    """The bracketed summary predicted by per-token probabilities (one per input id)."""
    words = word_spans(summary)
    positive = positive_words(token_input.token_words, probabilities, len(words))
    return bracketed_summary(summary, word_runs(positive), words)


def unsup_records(records: Sequence[dict], token_inputs: Sequence[TokenInput],
                  probabilities: Sequence[Sequence[float]]) -> list[dict]:
    """One record per UNSUP record from its input's token probabilities."""
    _same_length("UNSUP records", records, token_inputs)
    _same_length("UNSUP inputs", token_inputs, probabilities)
    task = UnsupportedSpanPrediction()
    return [task.prediction_record(record, span_prediction(record["summary"], token_input,
                                                           token_probabilities))
            for record, token_input, token_probabilities
            in zip(records, token_inputs, probabilities)]
