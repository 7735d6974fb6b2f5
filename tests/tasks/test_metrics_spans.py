"""UNSUP span metrics: the official fixture numbers, the BIO rules, and a diff oracle."""
from __future__ import annotations

import difflib
import json
import random

import pytest

from tasks.metrics import char_diff, spans
from tasks.metrics.classification import UNDEFINED_REASONS
from tasks.plumbing.io import read_jsonl

SUMMARY = ("The 1911 Tarrow flood was opened in Kent by the council during 1934 after a long "
           "review of its finances.")
ANNOTATED = ("The 1911 Tarrow flood was opened in Kent by the council during 1934 after a long "
             "review[] of its finances[/] .")


def oracle_regions(summary: str, tagged: str) -> list[tuple[int, int]]:
    """The official walk, written independently: a text made of every diff entry (tag char
    dropped), scanned for ' [ ]' and ' [ / ]' at added entries; offsets count summary chars."""
    entries = [e for e in difflib.Differ().compare(summary, tagged) if not e.startswith("?")]
    text = "".join(e[1:] for e in entries)
    regions, start, offset = [], None, 0
    for number, entry in enumerate(entries):
        at = 2 * number
        if entry[0] != "+":
            offset += 1
        elif text[at:at + 4] == " [ ]" and start is None:
            start = offset
        elif text[at:at + 6] == " [ / ]" and start is not None:
            regions.append((start, offset))
            start = None
    if start is not None:
        regions.append((start, len(summary)))
    return regions


def random_tagged(rng: random.Random, words: list[str]) -> str:
    pieces = []
    for word in words:
        roll = rng.random()
        if roll < 0.15:
            pieces.append("[]")
        elif roll < 0.3:
            pieces.append("[/]")
        elif roll < 0.35:
            pieces.append("[][/]")
        if rng.random() < 0.1:
            continue  # the model dropped a word
        pieces.append(word if rng.random() > 0.05 else word.upper())
    return " ".join(pieces)


@pytest.fixture(scope="module")
def expected(usb_fixture_dir) -> dict:
    return json.loads((usb_fixture_dir / "expected_scores.json").read_text())


def test_fixture_scores_match_official(usb_fixture_dir, expected):
    records = read_jsonl(usb_fixture_dir / "predictions" / "unsupported_span_prediction.jsonl")
    scores = spans.span_scores([r["prediction"] for r in records],
                               [r["summary"] for r in records],
                               [r["annotated_summary"] for r in records])
    official = expected["unsupported_span_prediction"]
    assert set(official) == set(spans.SPAN_KEYS)
    for key, value in official.items():
        assert scores[key] == pytest.approx(value, abs=1e-9), key


def test_annotated_example_tags():
    tags = spans.bio_tags(SUMMARY, ANNOTATED)
    words = [SUMMARY[start:end] for start, end in spans.word_spans(SUMMARY)]
    marked = [word for word, tag in zip(words, tags) if tag != "O"]
    assert marked == ["of", "its", "finances"]
    assert tags[-4:] == ["B-UNSUP", "I-UNSUP", "I-UNSUP", "O"]  # the final "." stays outside
    assert spans.bio_tags(SUMMARY, SUMMARY) == ["O"] * len(words)


def test_unclosed_span_runs_to_the_end():
    tags = spans.bio_tags("a b c d", "a [] b c d")
    assert tags == ["O", "B-UNSUP", "I-UNSUP", "I-UNSUP"]


def test_adjacent_regions_form_one_span():
    assert len(spans.marked_regions("a b c d", "[] a [/][] b [/] c d")) == 2
    assert spans.bio_tags("a b c d", "[] a [/][] b [/] c d") == [
        "B-UNSUP", "I-UNSUP", "O", "O"]
    assert spans.bio_tags("a b c d", "[] a [/] b [] c [/] d") == [
        "B-UNSUP", "O", "B-UNSUP", "O"]


def test_word_inside_when_its_start_is_marked():
    # the region opens in the middle of "bcd": its start offset is outside, so it is O
    assert spans.bio_tags("a bcd e", "a b[]cd e[/]") == ["O", "O", "B-UNSUP"]


def test_prediction_without_open_mark_is_the_summary():
    gold, predicted = spans.span_example("a b c[/]", "a b c", "[] a [/] b c")
    assert gold == ["B-UNSUP", "O", "O"] and predicted == ["O", "O", "O"]
    gold, predicted = spans.span_example("[] a b c", "a b c", "[] a [/] b c")
    assert predicted == ["B-UNSUP", "I-UNSUP", "I-UNSUP"]


def test_seqeval_counts():
    # gold spans: {a}, {c d}; predicted: {a}, {c}: 1 of 2 correct each way
    scores = spans.span_scores(["[] a [/] b [] c [/] d"], ["a b c d"], ["[] a [/] b [] c d [/]"])
    assert scores == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    scores = spans.span_scores(["a b c d"], ["a b c d"], ["[] a [/] b c d"])
    assert scores == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_no_spans_anywhere_makes_all_three_null():
    # the official evaluation fails here (its seqeval report has no entry for the span type)
    scores = spans.span_scores(["a b", "c"], ["a b", "c"], ["a b", "c"])
    reason = "no spans in either the gold or the predicted summaries"
    assert scores == {"precision": None, "recall": None, "f1": None, UNDEFINED_REASONS: {
        "precision": reason, "recall": reason, "f1": reason}}
    assert spans.aggregate_spans([]) == scores
    # spans on one side only: the missing ratio is 0, as seqeval (and the official code) give
    assert spans.span_scores(["[] a [/] b"], ["a b"], ["a b"]) == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(ValueError):
        spans.span_scores(["a"], ["a", "b"], ["a"])


def test_regions_equal_the_official_walk_on_random_edits():
    rng = random.Random(11)
    vocabulary = ["Port", "Alden", "was", "closed", "in", "Tucson", ",", "1990", "review", ".",
                  "[", "]", "a", "the"]
    for _ in range(150):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 14))]
        summary = " ".join(words)
        tagged = random_tagged(rng, words)
        assert spans.marked_regions(summary, tagged) == oracle_regions(summary, tagged), (
            summary, tagged)


def random_tags(rng: random.Random, length: int) -> list[str]:
    """Any B/I/O sequence, ill-formed ones included (I after O)."""
    return [rng.choice(("O", "O", "B-UNSUP", "I-UNSUP")) for _ in range(length)]


def test_span_counts_and_formulas_equal_seqeval_on_random_tags():
    from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

    rng = random.Random(5)
    for _ in range(300):
        lengths = [rng.randint(0, 9) for _ in range(rng.randint(1, 6))]
        examples = [(random_tags(rng, n), random_tags(rng, n)) for n in lengths]
        ours = spans.aggregate_spans(examples)
        if all(tag == "O" for pair in examples for tags in pair for tag in tags):
            assert ours["f1"] is None
            continue
        precision, recall, f1, _ = precision_recall_fscore_support(
            [g for g, _ in examples], [p for _, p in examples], average=None, zero_division=0)
        assert ours == {"precision": float(precision[0]), "recall": float(recall[0]),
                        "f1": float(f1[0])}, examples  # bit for bit
        assert spans.aggregate_spans([spans.span_counts(*pair) for pair in examples]) == ours


def test_tag_chunks_follow_the_lenient_rules():
    assert spans.tag_chunks(["B-UNSUP", "I-UNSUP", "O", "I-UNSUP", "B-UNSUP", "B-UNSUP"]) == {
        (0, 2), (3, 4), (4, 5), (5, 6)}
    assert spans.span_counts(["B-UNSUP", "I-UNSUP", "O"], ["B-UNSUP", "O", "O"]) == (0, 1, 1)


def random_edit_pairs(seed: int, count: int):
    """(summary, tagged) pairs over a small alphabet: marks, insertions, replacements and
    deletions, so that replaced blocks with and without identical pairs occur."""
    rng = random.Random(seed)
    alphabet = "abcdefgh []/xyz.,"
    for _ in range(count):
        summary = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        tagged = list(summary)
        for _ in range(rng.randint(0, 12)):
            at, roll = rng.randint(0, len(tagged)), rng.random()
            if roll < 0.5:
                tagged.insert(at, rng.choice(["[]", "[/]", "q", "  "]))
            elif tagged:
                tagged[min(at, len(tagged) - 1)] = rng.choice(alphabet) if roll < 0.8 else ""
        yield summary, "".join(tagged)


def difflib_kinds_and_chars(summary: str, tagged: str) -> tuple[str, str]:
    entries = [e for e in difflib.Differ().compare(summary, tagged) if not e.startswith("?")]
    return "".join(e[0] for e in entries), "".join(e[2] for e in entries)


@pytest.mark.parametrize("matcher", ["installed", "difflib"])
def test_character_diff_equals_difflibs_differ(monkeypatch, matcher):
    """`character_diff` (cydifflib's matcher when installed, difflib's otherwise) gives the
    entries of difflib's `Differ.compare`, replaced blocks included."""
    if matcher == "difflib":
        monkeypatch.setattr(char_diff, "_matcher_class", lambda: difflib.SequenceMatcher)
    replaced = 0
    for summary, tagged in random_edit_pairs(2, 300):
        assert char_diff.character_diff(summary, tagged) == \
            difflib_kinds_and_chars(summary, tagged), (summary, tagged)
        opcodes = difflib.SequenceMatcher(None, summary, tagged).get_opcodes()
        replaced += any(tag == "replace" for tag, *_ in opcodes)
    assert replaced > 100


def test_character_diff_edge_cases():
    for summary, tagged in [("", ""), ("", "[]x[/]"), ("abc", ""), ("ab", "ba"),
                            ("aaaa", "bbbbbb"), ("abcabc", "cbacba"), ("é[]", "e[]é")]:
        assert char_diff.character_diff(summary, tagged) == \
            difflib_kinds_and_chars(summary, tagged)


def test_record_counts_equal_the_counts_of_the_tags_on_random_records():
    rng = random.Random(8)
    words = ["Port", "Alden", "was", "closed", "in", "Tucson", ",", "1990", "review", "."]
    seen = set()
    for _ in range(200):
        summary = " ".join(rng.choice(words) for _ in range(rng.randint(1, 10)))
        annotated = random_tagged(rng, summary.split()) if rng.random() < 0.5 else summary
        prediction = random_tagged(rng, summary.split()) if rng.random() < 0.5 else summary
        counts = spans.span_example_counts(prediction, summary, annotated)
        assert counts == spans.span_counts(*spans.span_example(prediction, summary, annotated))
        seen.add(counts == (0, 0, 0))
    assert seen == {True, False}
