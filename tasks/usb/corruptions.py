"""FactCC-style corruptions of a supported summary sentence (for heuristic FAC / FIX data).

Each transformation changes one span so that the sentence is likely no longer supported by
its evidence, and says what it did:

- entity swap: a capitalised name in the sentence replaced by another capitalised name of
  the article (never a name already in the sentence);
- number swap: a number (not a year) replaced by another number of the article, else shifted;
- date swap: a year replaced by another year of the article, else shifted by 1-9 years; or a
  month name by another month;
- pronoun swap: he/she, his/her, him/her (first occurrence);
- negation: "not" added after the first auxiliary (is, was, has, ...), or removed.

`corrupt(sentence, context, rng)` tries the transformations in a seeded random order and
returns the first that applies: (corrupted sentence, type, (old span, new span)), or None.
Entities are found without a tagger (no model can be downloaded here): runs of capitalised
words that do not start the sentence, and names that also appear capitalised mid-sentence
elsewhere in the article.
"""
from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import NamedTuple

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
PRONOUNS = {"he": "she", "she": "he", "his": "her", "her": "his", "him": "her",
            "He": "She", "She": "He", "His": "Her", "Her": "His"}
AUXILIARIES = ("is", "was", "are", "were", "has", "had", "have", "did", "does", "do", "can",
               "could", "will", "would")
TYPES = ("entity", "number", "date", "pronoun", "negation")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_NAME = re.compile(r"\b[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+)*")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")


class Corruption(NamedTuple):
    text: str
    kind: str
    old: str
    new: str


def names(text: str) -> list[str]:
    """Capitalised word runs that do not start a sentence (a cheap entity finder)."""
    found = []
    for match in _NAME.finditer(text):
        start = match.start()
        before = text[:start].rstrip()
        if not before or before[-1] in ".!?\"'":
            continue
        found.append(match.group(0))
    return found


def _replace_once(text: str, old: str, new: str) -> str:
    return re.sub(r"\b" + re.escape(old) + r"\b", new, text, count=1)


def _swap_from(text: str, candidates: Sequence[str], pool: Sequence[str],
               rng: random.Random, kind: str) -> Corruption | None:
    if not candidates:
        return None
    old = rng.choice(sorted(set(candidates)))
    choices = sorted({value for value in pool if value != old and value not in text})
    if not choices:
        return None
    new = rng.choice(choices)
    return Corruption(_replace_once(text, old, new), kind, old, new)


def entity_swap(text: str, context: str, rng: random.Random) -> Corruption | None:
    return _swap_from(text, names(text), names(context), rng, "entity")


def number_swap(text: str, context: str, rng: random.Random) -> Corruption | None:
    numbers = [n for n in _NUMBER.findall(text) if not _YEAR.fullmatch(n)]
    pool = [n for n in _NUMBER.findall(context) if not _YEAR.fullmatch(n)]
    swapped = _swap_from(text, numbers, pool, rng, "number")
    if swapped or not numbers:
        return swapped
    old = rng.choice(sorted(set(numbers)))
    value = float(old.replace(",", ""))
    new = str(int(value) + rng.randint(1, 9)) if value.is_integer() else f"{value + 1.5:g}"
    return Corruption(_replace_once(text, old, new), "number", old, new)


def date_swap(text: str, context: str, rng: random.Random) -> Corruption | None:
    years = _YEAR.findall(text)
    if years:
        swapped = _swap_from(text, years, _YEAR.findall(context), rng, "date")
        if swapped:
            return swapped
        old = rng.choice(sorted(set(years)))
        new = str(int(old) + rng.choice((-9, -5, -2, 3, 6, 8)))
        return Corruption(_replace_once(text, old, new), "date", old, new)
    months = _MONTH.findall(text)
    return _swap_from(text, months, MONTHS, rng, "date")


def pronoun_swap(text: str, context: str, rng: random.Random) -> Corruption | None:
    for match in re.finditer(r"\b(" + "|".join(PRONOUNS) + r")\b", text):
        old = match.group(0)
        new = PRONOUNS[old]
        return Corruption(text[:match.start()] + new + text[match.end():], "pronoun", old, new)
    return None


def negation(text: str, context: str, rng: random.Random) -> Corruption | None:
    negated = re.search(r"\b(" + "|".join(AUXILIARIES) + r") not\b", text)
    if negated:
        old = negated.group(0)
        return Corruption(text.replace(old, negated.group(1), 1), "negation", old,
                          negated.group(1))
    auxiliary = re.search(r"\b(" + "|".join(AUXILIARIES) + r")\b", text)
    if auxiliary:
        old = auxiliary.group(0)
        return Corruption(text[:auxiliary.end()] + " not" + text[auxiliary.end():],
                          "negation", old, old + " not")
    return None


TRANSFORMS = {"entity": entity_swap, "number": number_swap, "date": date_swap,
              "pronoun": pronoun_swap, "negation": negation}


def corrupt(sentence: str, context: str, rng: random.Random) -> Corruption | None:
    """The first applicable transformation in a seeded random order (None: none applies)."""
    order = list(TYPES)
    rng.shuffle(order)
    for kind in order:
        result = TRANSFORMS[kind](sentence, context, rng)
        if result is not None and result.text != sentence:
            return result
    return None
