"""Word tokenization pinned to NLTK 3.8.1, the version the official USB derivation and
evaluation ran with (tasks.plumbing.treebank), against outputs recorded once from NLTK 3.8.1
(tests/fixtures/nltk381/: texts.json, tokens.json, and record.py, which made them): texts with
leading and trailing single quotes, elisions ('90s, 'Tis), en, em and figure dashes, curly and
straight quotes, decimals, abbreviations, contractions, brackets and several sentences.

What was checked for version drift on the official paths, and where it stands:
- `nltk.word_tokenize` (UNSUP derivation's showdiff): drifted (3.9.3 dashes, 3.10.1 opening
  single quotes, space runs): pinned (tasks.plumbing.treebank.word_tokenize), tested here.
- `TreebankWordTokenizer.span_tokenize` (UNSUP scoring): the same rules in 3.8.1 and today,
  pinned anyway (tasks.plumbing.treebank.treebank_spans), tested here.
- Punkt sentence splitting (inside word_tokenize): the parameters are the shipped English
  model (tasks.plumbing.punkt); the algorithm is the installed NLTK's, checked here against 3.8.1's
  splits of every text.
- difflib's Differ (showdiff): the standard library's, unchanged in behaviour across the
  supported Pythons; cydifflib is its compiled copy, checked against it on random edits
  (tests/tasks/test_metrics_spans.py).
- ROUGE's tokenizer: rouge-score's own (lower-case, non-alphanumerics to spaces), pinned by
  `rouge-score>=0.1.2` and checked by the fixture's official scores
  (tests/tasks/test_metrics_rouge.py).
- Span F1 (seqeval) and AUC/P/R/F1 (scikit-learn): checked by the fixture's official scores
  (tests/tasks/test_metrics_spans.py, tests/tasks/test_metrics_classification.py).
- Sentences of STU extraction, QASem and the Lite²·⁵ mix (`nltk.sent_tokenize`): Punkt on the
  shipped parameters, the algorithm checked here; words of the Lite²·⁵ alignment and of
  QAPyramid's length penalty: the pinned word_tokenize; SRL words: spaCy's rule-based
  tokenizer (tests/leaderboard/test_srl_frames.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.plumbing import treebank

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "nltk381" /
                       "tokens.json").read_text(encoding="utf-8"))
CASES = list(range(len(RECORDED["texts"])))


def test_the_recording_is_of_nltk_381():
    assert RECORDED["nltk"] == "3.8.1" and len(RECORDED["texts"]) >= 40


@pytest.mark.parametrize("case", CASES)
def test_word_tokenize_is_nltk_381s(case):
    text = RECORDED["texts"][case]
    assert treebank.word_tokenize(text) == RECORDED["word_tokenize"][case]
    assert treebank.sentence_words(text) == RECORDED["preserve_line"][case]


@pytest.mark.parametrize("case", CASES)
def test_treebank_spans_are_nltk_381s(case):
    spans = treebank.treebank_spans(RECORDED["texts"][case])
    assert [list(span) for span in spans] == RECORDED["treebank_spans"][case]


@pytest.mark.parametrize("case", CASES)
def test_punkt_splits_sentences_as_381_did(case):
    from tasks.plumbing.punkt import english_sentences

    assert english_sentences(RECORDED["texts"][case]) == RECORDED["sent_tokenize"][case]


def test_the_installed_nltk_differs_where_the_pin_matters():
    """The reason for the pin: today's `nltk.word_tokenize` splits some of these texts
    otherwise (skipped on an NLTK that still agrees with 3.8.1 on every text)."""
    import nltk

    drifted = [case for case in CASES
               if nltk.word_tokenize(RECORDED["texts"][case]) != RECORDED["word_tokenize"][case]]
    if not drifted:
        pytest.skip(f"NLTK {nltk.__version__} tokenizes these texts as 3.8.1 did")
    assert any("'" in RECORDED["texts"][case] or "–" in RECORDED["texts"][case]
               for case in drifted)
