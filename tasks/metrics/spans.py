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
- Span-level precision/recall/F1 of the single entity type, seqeval default (lenient) mode,
  counted here (`span_counts`: seqeval's counts and formulas, tested equal to seqeval). When
  neither the gold nor the predicted tags contain any span, precision, recall and F1 are
  undefined (the official evaluation fails there: its seqeval report has no entry for the
  type): all three are None, with the reason under `UNDEFINED_REASONS`. With spans on one side
  only, the missing ratio is 0 (seqeval's zero division, as officially).
"""
from __future__ import annotations

from collections.abc import Sequence

from tasks.metrics.char_diff import character_diff
from tasks.metrics.classification import with_undefined
from tasks.plumbing.treebank import treebank_spans

SPAN_KEYS = ("precision", "recall", "f1")
NO_SPANS = "no spans in either the gold or the predicted summaries"
ENTITY = "UNSUP"
OPEN_MARK, CLOSE_MARK = "[]", "[/]"


def word_spans(summary: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the summary's Treebank words, as the official
    evaluation's `TreebankWordTokenizer().span_tokenize` gave them with NLTK 3.8.1."""

    return treebank_spans(summary)


def marked_regions(summary: str, tagged: str) -> list[tuple[int, int]]:
    """[start, end) summary offsets of the regions that `tagged` marks with "[]" ... "[/]".

    The diff entries (without Differ's "?" hints) as two strings, their kinds and their
    characters (`character_diff`, equal to difflib's `Differ`); only an added "[" can open or
    close a region, and the summary offset at an entry is the number of entries before it
    that are not additions."""
    kinds, chars = character_diff(summary, tagged)
    opens: list[int] = []
    closes: list[int] = []
    position, offset, counted = chars.find("["), 0, 0
    while position >= 0:
        if kinds[position] == "+":
            offset += (position - counted) - kinds.count("+", counted, position)
            counted = position
            following = chars[position:position + 3]
            if following.startswith(OPEN_MARK) and len(opens) == len(closes):
                opens.append(offset)
            elif following == CLOSE_MARK and len(opens) == len(closes) + 1:
                closes.append(offset)
        position = chars.find("[", position + 1)
    if len(opens) == len(closes) + 1:
        closes.append(len(kinds) - kinds.count("+"))
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


def span_example_counts(prediction: str, summary: str, annotated: str) -> tuple[int, int, int]:
    """`span_counts` of one record's `span_example`; without marks on either side (no "[" in
    the annotated summary, no "[]" in the prediction) both tag lists are all O, so the
    summary is not even tokenized."""
    if "[" not in annotated and OPEN_MARK not in prediction:
        return 0, 0, 0
    return span_counts(*span_example(prediction, summary, annotated))


def span_examples(predictions: Sequence[str], summaries: Sequence[str],
                  annotated: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    if not len(predictions) == len(summaries) == len(annotated):
        raise ValueError(f"{len(predictions)} predictions, {len(summaries)} summaries and "
                         f"{len(annotated)} annotated summaries")
    return [span_example(*triple) for triple in zip(predictions, summaries, annotated)]


def tag_chunks(tags: Sequence[str]) -> set[tuple[int, int]]:
    """[start, end) of the spans in one tag list as seqeval's lenient `get_entities` finds
    them for a single type: maximal runs of non-O tags, cut before every B."""
    chunks, start = set(), None
    for position, tag in enumerate(tags):
        if tag == "O" or tag.startswith("B-"):
            if start is not None:
                chunks.add((start, position))
            start = None if tag == "O" else position
        elif start is None:  # an I- after O starts a span (lenient mode)
            start = position
    if start is not None:
        chunks.add((start, len(tags)))
    return chunks


def span_counts(gold: Sequence[str], predicted: Sequence[str]) -> tuple[int, int, int]:
    """(correct, predicted, gold) span counts of one example."""
    gold_chunks, predicted_chunks = tag_chunks(gold), tag_chunks(predicted)
    return len(gold_chunks & predicted_chunks), len(predicted_chunks), len(gold_chunks)


def aggregate_spans(examples: Sequence) -> dict:
    """seqeval precision/recall/F1 of the single span type over (gold, predicted) tag lists
    or their `span_counts` (what aggregation and resampling need); all None (with the reason)
    when no example has a span. The formulas and zero divisions are seqeval's (`average=None`,
    `zero_division=0`)."""
    counts = [example if isinstance(example[0], int) else span_counts(*example)
              for example in examples]
    correct, predicted, gold = (sum(column) for column in zip(*counts)) if counts else (0, 0, 0)
    if not predicted and not gold:
        return with_undefined({}, {key: NO_SPANS for key in SPAN_KEYS})
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    denominator = precision + recall
    f1 = 2.0 * precision * recall / (denominator if denominator else 1.0)
    return {"precision": precision, "recall": recall, "f1": f1}


def span_scores(predictions: Sequence[str], summaries: Sequence[str],
                annotated: Sequence[str]) -> dict:
    """UNSUP precision, recall and F1 (fractions in 0..1)."""
    return aggregate_spans(span_examples(predictions, summaries, annotated))
