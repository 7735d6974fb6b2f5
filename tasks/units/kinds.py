"""The one vocabulary of unit kinds: `UnitKind`, spelled as unit files, Pyramid
folders and boards spell it, and the older spellings some places keep, read as aliases.

Each place takes a subset of the kinds and may keep its own spelling of some (it has stored
it): a presence instance's `unit_kind` field is singular (`scu`, `qa`, ...; `SINGULAR`), and a
Pyramid gold keeps the sentence units given in a file as `ssus` (`GOLD`: stored golds, their
digests and the summaries track's `ssus` columns read that key). `spellings` makes a place's
tuple from the enum; `check_unit_kind` reads any spelling into the place's own, and an unknown
one is tasks.plumbing.errors.check_choice's UnknownNameError.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from tasks.plumbing.errors import check_choice


class UnitKind(str, Enum):
    """A kind of content unit; its value is the canonical spelling."""
    SCUS = "scus"              # human Summary Content Units
    STUS = "stus"              # semantic triplet units (Lite³Pyramid)
    SMUS = "smus"              # AMR-subgraph units (the SCU-approximation study)
    SGUS = "sgus"              # units an LLM generates (the same study)
    SENTENCES = "sentences"    # the reference's sentences (SSUs)
    NGRAMS = "ngrams"          # the n-gram baseline
    QAS = "qas"                # QA-SRL pairs (QAPyramid)
    STATEMENTS = "statements"  # QA pairs rewritten as statements

    def __str__(self) -> str:  # "scus" in messages and f-strings, not "UnitKind.SCUS"
        return self.value


#: a presence instance's `unit_kind` (and `--unit-kind`): the singular spellings
SINGULAR = {UnitKind.QAS: "qa", UnitKind.STATEMENTS: "statement", UnitKind.SCUS: "scu",
            UnitKind.STUS: "stu"}
#: a Pyramid gold's key for the sentence units given in a file (`--pyramid-units NAME:ssus=F`)
GOLD = {UnitKind.SENTENCES: "ssus"}
#: every other spelling in use -> its kind
ALIASES = {alias: kind for table in (SINGULAR, GOLD) for kind, alias in table.items()}


def spellings(*kinds: UnitKind, spelling: Mapping[UnitKind, str] | None = None) \
        -> tuple[str, ...]:
    """The kinds as plain strings: each its canonical spelling, or `spelling`'s for it."""
    return tuple((spelling or {}).get(kind, kind.value) for kind in kinds)


def unit_kind_or_none(text) -> UnitKind | None:
    """The kind a spelling (canonical or alias) names; None for any other value."""
    if isinstance(text, UnitKind):
        return text
    if not isinstance(text, str):
        return None
    return ALIASES.get(text) or next((kind for kind in UnitKind if kind.value == text), None)


def check_unit_kind(text, known: Iterable[str], what: str = "unit kind") -> str:
    """The spelling in `known` (a place's spellings) of the kind `text` names: `text` itself
    when `known` holds it, else the first of `known` naming the same kind; otherwise
    check_choice's UnknownNameError "unknown WHAT 'x' (known: <known>)"."""
    known = list(known)
    if text in known:
        return str(known[known.index(text)])
    kind = unit_kind_or_none(text)
    found = next((str(spelled) for spelled in known
                  if kind is not None and unit_kind_or_none(spelled) is kind), None)
    # a kind the place does not take gets no "did you mean" (a close spelling is another kind)
    return found if found is not None else check_choice(text, known, what,
                                                        cutoff=0.6 if kind is None else 1.0)


def read_unit_kind(text, known: Iterable[str] | None = None, what: str = "unit kind") \
        -> UnitKind:
    """The kind `text` names (any spelling), when it is one of `known`'s (default: every
    kind); otherwise `check_unit_kind`'s error."""
    spelled = check_unit_kind(text, spellings(*UnitKind) if known is None else known, what)
    kind = unit_kind_or_none(spelled)
    if kind is None:  # `known` holds a spelling that is no unit kind
        raise ValueError(f"{spelled!r} is not a unit kind")
    return kind
