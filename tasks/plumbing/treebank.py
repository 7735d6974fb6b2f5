"""Word tokenization as NLTK 3.8.1 did it, whatever NLTK is installed.

The official USB code ran with NLTK 3.8.1 in 2023: its derivation of the unsupported-span
task diffs `nltk.word_tokenize` tokens, and its evaluation places span tags on
`TreebankWordTokenizer().span_tokenize` words. NLTK has changed `word_tokenize` since (3.9.3
splits off en and em dashes, 3.10.1 splits off a single quote that opens a word, and both
normalise runs of spaces), so the rules are pinned here: the regular expressions, their
substitutions and their order, for the two tokenizers of 3.8.1.

Both tokenizers run the same steps, each a list of (pattern, substitution) applied in order:
starting quotes; punctuation; brackets padded; double dashes padded; the text padded with a
space at each end; ending quotes; two lists of contractions split (MacIntyre's); then the text
is split on whitespace. `word_tokenize` first splits sentences with Punkt (English
parameters, tasks.plumbing.punkt), as `nltk.word_tokenize` does. tests/tasks/test_treebank.py checks
both against outputs recorded once from NLTK 3.8.1.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.plumbing.punkt import english_sentences

Rule = tuple[re.Pattern, str]


def _rules(pairs: Sequence[tuple[str, str]], flags: int = 0) -> tuple[Rule, ...]:
    return tuple((re.compile(pattern, flags), substitution) for pattern, substitution in pairs)


#: MacIntyre's contractions split by both tokenizers (the third list was never used)
CONTRACTIONS = _rules([(pattern, r" \1 \2 ") for pattern in (
    r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b",
    r"(?i)\b(gon)(?#X)(na)\b", r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b",
    r"(?i)\b(more)(?#X)('n)\b", r"(?i)\b(wan)(?#X)(na)(?=\s)",
    r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b")])
BRACKETS = _rules([(r"[\]\[\(\)\{\}\<\>]", r" \g<0> ")])
DOUBLE_DASHES = _rules([(r"--", r" -- ")])
FINAL_PERIOD = (r'([^\.])(\.)([\]\)}>"\']*)\s*$', r"\1 \2\3 ")
CLITICS = (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 ")
LONG_CLITICS = (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 ")
OPENING_DOUBLE_QUOTES = [(r"^\"", r"``"), (r"(``)", r" \1 "), (r"([ \(\[{<])(\"|\'{2})", r"\1 `` ")]
COMMAS_AND_COLONS = [(r"([:,])([^\d])", r" \1 \2"), (r"([:,])$", r" \1 ")]


@dataclass(frozen=True)
class TokenizerRules:
    """One tokenizer's rule lists, applied in the order of the fields."""
    starting_quotes: tuple[Rule, ...]
    punctuation: tuple[Rule, ...]
    ending_quotes: tuple[Rule, ...]

    def tokenize(self, text: str) -> list[str]:
        for rules in (self.starting_quotes, self.punctuation, BRACKETS, DOUBLE_DASHES):
            text = _apply(rules, text)
        text = _apply(self.ending_quotes, " " + text + " ")
        return _apply(CONTRACTIONS, text).split()


def _apply(rules: Sequence[Rule], text: str) -> str:
    for pattern, substitution in rules:
        text = pattern.sub(substitution, text)
    return text


#: `nltk.tokenize.NLTKWordTokenizer` of NLTK 3.8.1: what `nltk.word_tokenize` runs on each
#: sentence
NLTK_381 = TokenizerRules(
    starting_quotes=_rules([("([«“‘„]|[`]+)", r" \1 "), *OPENING_DOUBLE_QUOTES,
                            (r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b", r"\1 \2")]),
    punctuation=_rules([(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*)\s*$", r"\1 \2 \3 "),
                        *COMMAS_AND_COLONS, (r"\.{2,}", r" \g<0> "),
                        (r"[;@#$%&]", r" \g<0> "), FINAL_PERIOD, (r"[?!]", r" \g<0> "),
                        (r"([^'])' ", r"\1 ' "), (r"[*]", r" \g<0> ")]),
    ending_quotes=_rules([("([»”’])", r" \1 "), (r"''", " '' "), (r'"', " '' "), CLITICS,
                          LONG_CLITICS]))

#: `nltk.tokenize.TreebankWordTokenizer` of NLTK 3.8.1: the official UNSUP evaluation's words
TREEBANK_381 = TokenizerRules(
    starting_quotes=_rules(OPENING_DOUBLE_QUOTES),
    punctuation=_rules([*COMMAS_AND_COLONS, (r"\.\.\.", r" ... "), (r"[;@#$%&]", r" \g<0> "),
                        FINAL_PERIOD, (r"[?!]", r" \g<0> "), (r"([^'])' ", r"\1 ' ")]),
    ending_quotes=_rules([(r"''", " '' "), (r'"', " '' "), CLITICS, LONG_CLITICS]))


def word_tokenize(text: str) -> list[str]:
    """`nltk.word_tokenize(text)` as of NLTK 3.8.1: Punkt sentences, then NLTK_381 words."""
    return [word for sentence in english_sentences(text) for word in NLTK_381.tokenize(sentence)]


def sentence_words(sentence: str) -> list[str]:
    """`nltk.word_tokenize(sentence, preserve_line=True)` as of NLTK 3.8.1 (no sentence
    split)."""
    return NLTK_381.tokenize(sentence)


def treebank_spans(text: str) -> list[tuple[int, int]]:
    """`TreebankWordTokenizer().span_tokenize(text)` as of NLTK 3.8.1: each word's (start,
    end) offsets, the tokenizer's `` and '' put back to the quotes they stand for."""
    tokens = TREEBANK_381.tokenize(text)
    if '"' in text or "''" in text:
        quotes = iter(match.group() for match in re.finditer(r"``|'{2}|\"", text))
        tokens = [next(quotes) if token in ('"', "``", "''") else token for token in tokens]
    spans, point = [], 0
    for token in tokens:
        start = text.find(token, point)
        if start < 0:
            raise ValueError(f"substring {token!r} not found in {text!r}")
        point = start + len(token)
        spans.append((start, point))
    return spans
