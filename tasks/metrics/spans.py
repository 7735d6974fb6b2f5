"""Unsupported-span (UNSUP) metrics of the USB evaluation: word BIO tags scored by seqeval.

Official rules (docs/usb-format.md §3-§4):
- A tagged string is the summary with "[]" ... "[/]" inserted around unsupported parts (a model
  may also change other characters). It is aligned to the summary by difflib's character-level
  `Differ` (SequenceMatcher with Differ's refinement of replaced blocks). Walking the diff, an
  added "[" whose next diff character is "]" opens a region at the current summary offset
  (unless one is open); an added "[" followed by "/", "]" closes the open one. Summary
  characters (unchanged or deleted) advance the offset. An unclosed region runs to the end.
- Words are the Treebank span tokens of the summary; a word is inside when its start offset lies
  in a region. Inside words are I, except B for the first word or one after an O word (so
  adjacent regions form one span).
- A prediction without "[]" is scored as the plain summary (no spans).
- Span-level precision/recall/F1 of the single entity type, seqeval default (lenient) mode.
  When neither the gold nor the predicted tags contain any span, precision, recall and F1 are
  undefined (the official evaluation fails there: its seqeval report has no entry for the
  type): all three are None, with the reason under `UNDEFINED_REASONS`. With spans on one side
  only, the missing ratio is 0 (seqeval's zero division, as officially).
"""
from __future__ import annotations

import difflib
import functools
from typing import Sequence

from tasks.metrics.classification import with_undefined

SPAN_KEYS = ("precision", "recall", "f1")
NO_SPANS = "no spans in either the gold or the predicted summaries"
ENTITY = "UNSUP"
OPEN_MARK, CLOSE_MARK = "[]", "[/]"


@functools.lru_cache(maxsize=1)
def _word_tokenizer():
    from nltk.tokenize import TreebankWordTokenizer  # no punkt data needed

    return TreebankWordTokenizer()


def word_spans(summary: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the summary's Treebank words."""
    return list(_word_tokenizer().span_tokenize(summary))


def marked_regions(summary: str, tagged: str) -> list[tuple[int, int]]:
    """[start, end) summary offsets of the regions that `tagged` marks with "[]" ... "[/]"."""
    diff = [(entry[0], entry[2]) for entry in difflib.Differ().compare(summary, tagged)
            if entry[0] != "?"]
    opens: list[int] = []
    closes: list[int] = []
    offset = 0
    for position, (kind, char) in enumerate(diff):
        if kind != "+":
            offset += 1
            continue
        following = "".join(c for _, c in diff[position:position + 3])
        if following.startswith(OPEN_MARK) and len(opens) == len(closes):
            opens.append(offset)
        elif following == "[/]" and len(opens) == len(closes) + 1:
            closes.append(offset)
    if len(opens) == len(closes) + 1:
        closes.append(offset)
    return list(zip(opens, closes))


def bio_tags(summary: str, tagged: str,
             words: Sequence[tuple[int, int]] | None = None) -> list[str]:
    """B-/I-UNSUP or O for each Treebank word of `summary` (`words`, its `word_spans`, when
    already known), from the marks in `tagged`. Fast path, exact: a `tagged` string without
    "[" has no marked region (the diff could add no "["), so no diff is computed."""
    regions = marked_regions(summary, tagged) if "[" in tagged else []
    words = word_spans(summary) if words is None else words
    inside = [any(start <= word_start < end for start, end in regions)
              for word_start, _ in words]
    return [("B-" if not previous else "I-") + ENTITY if current else "O"
            for previous, current in zip([False] + inside[:-1], inside)]


def span_example(prediction: str, summary: str, annotated: str) -> tuple[list[str], list[str]]:
    """(gold tags, predicted tags) for one record; a prediction without "[]" means no spans.
    The summary is tokenized once; a prediction identical to the annotated summary has its
    tags (the same diff would give the same regions)."""
    words = word_spans(summary)
    gold = bio_tags(summary, annotated, words)
    if OPEN_MARK not in prediction:
        return gold, ["O"] * len(words)
    if prediction == annotated:
        return gold, list(gold)
    return gold, bio_tags(summary, prediction, words)


def span_examples(predictions: Sequence[str], summaries: Sequence[str],
                  annotated: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    if not len(predictions) == len(summaries) == len(annotated):
        raise ValueError(f"{len(predictions)} predictions, {len(summaries)} summaries and "
                         f"{len(annotated)} annotated summaries")
    return [span_example(*triple) for triple in zip(predictions, summaries, annotated)]


def aggregate_spans(examples: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict:
    """seqeval precision/recall/F1 of the single span type over (gold, predicted) tag lists;
    all None (with the reason) when no tag list has a span."""
    from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

    gold = [list(tags) for tags, _ in examples]
    predicted = [list(tags) for _, tags in examples]
    if all(tag == "O" for tags in gold + predicted for tag in tags):
        return with_undefined({}, {key: NO_SPANS for key in SPAN_KEYS})
    precision, recall, f1, _ = precision_recall_fscore_support(
        gold, predicted, average=None, zero_division=0)
    return {"precision": float(precision[0]), "recall": float(recall[0]), "f1": float(f1[0])}


def span_scores(predictions: Sequence[str], summaries: Sequence[str],
                annotated: Sequence[str]) -> dict:
    """UNSUP precision, recall and F1 (fractions in 0..1)."""
    return aggregate_spans(span_examples(predictions, summaries, annotated))
