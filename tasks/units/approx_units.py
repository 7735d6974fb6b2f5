"""Two of the SCU-approximation study's baselines (Nawrath et al., NAACL 2024;
shared/docs/scu-units.md §3-4), as pure functions of a reference's sentences:

- SSUs: the sentences of the (coreference-resolved) reference, each a unit;
- n-grams: every contiguous 3-, 4- and 5-gram of whitespace tokens within a sentence (the
  pool, duplicates kept: sentence by sentence, n = 3, 4, 5, left to right); k =
  floor(0.05 · T) of them, T the pool's size, drawn without replacement in random order
  with a seeded generator. The paper's generation code was never released and its seed is
  unknown, so its own sample cannot be recreated; the rule is the one its outputs show.

Sentences: the reference's `<t> ... </t>` marks when it has them (REALSumm's), else a
sentence splitter's (`sentences_of`).
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

NGRAM_SIZES = (3, 4, 5)
NGRAM_SHARE = 0.05
_TAGGED = re.compile(r"<t>(.*?)</t>", re.DOTALL)


def untagged(reference: str) -> str:
    """The reference without its `<t>`/`</t>` marks (as the paper's coreference input)."""
    return " ".join(reference.replace("<t>", " ").replace("</t>", " ").split())


def tagged_sentences(reference: str) -> list[str] | None:
    """The sentences between `<t>` and `</t>` (spaces collapsed), or None without marks."""
    found = [" ".join(part.split()) for part in _TAGGED.findall(reference)]
    return [sentence for sentence in found if sentence] if found else None


def sentences_of(text: str, split: Callable[[str], Sequence[str]]) -> list[str]:
    """`<t>`-marked sentences, else `split`'s, each stripped, empty ones left out."""
    tagged = tagged_sentences(text)
    if tagged is not None:
        return tagged
    return [sentence.strip() for sentence in split(text) if sentence.strip()]


def ngram_pool(sentences: Sequence[str], sizes: Sequence[int] = NGRAM_SIZES) -> list[str]:
    """Every n-gram of whitespace tokens within each sentence (see the module)."""
    pool = []
    for sentence in sentences:
        tokens = sentence.split()
        for n in sizes:
            pool.extend(" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return pool


def sample_ngrams(sentences: Sequence[str], rng: random.Random,
                  share: float = NGRAM_SHARE) -> list[str]:
    """floor(share · T) n-grams of the pool, without replacement, in random order."""
    pool = ngram_pool(sentences)
    return rng.sample(pool, int(share * len(pool)))
