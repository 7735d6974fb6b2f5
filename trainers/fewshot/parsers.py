"""Robust parsers for few-shot model outputs; each returns (prediction, ok) and never raises.

`ok` is False when the output could not be read as an answer of the expected form; the
prediction is then a neutral fallback (empty text, 0.5, all-zero labels) and the runner counts
it as unparseable instead of failing.

Label probabilities: when the backend knows p(yes) / (p(yes) + p(no)) at the yes/no words of
its output (`yes_probabilities`, from token log-probabilities: {character offset in the raw
output: probability}), a label decided by a yes or no word takes that probability instead of
1.0 / 0.0; labels decided otherwise (true/false, "not supported", ...) keep 1.0 / 0.0.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tasks.base import FewShotParts

#: FAC fallback when neither yes nor no can be read: no information
UNDECIDED = 0.5

#: p(yes) at a character offset of the parsed text, when the backend knows it
ProbabilityAt = Callable[[int], "float | None"]


def _no_probability(offset: int) -> None:
    return None


_SENT_YES_NO = re.compile(r"\bSENT\s*(\d+)\W{0,5}(yes|no)\b", re.IGNORECASE)
_BARE_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_SENT_ID = re.compile(r"\bSENT\s*(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\d.])(\d{1,6})(?![\d.]*\d)")
_EMPTY_LIST = re.compile(r"^\W*(none|nothing|no sentences?|empty|n/?a)?\W*$", re.IGNORECASE)
_LEADING_ANSWER = re.compile(r"^\W*(yes|no|true|false)\b", re.IGNORECASE)
_NEGATIVE = re.compile(r"\b(not (fully |entirely )?(supported|consistent|present|accurate)|"
                       r"unsupported|inconsistent|insufficient|no evidence|not present)\b",
                       re.IGNORECASE)
_POSITIVE = re.compile(r"\b(supported|consistent|present|accurate)\b", re.IGNORECASE)
_ANY_ANSWER = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)
_OPEN = re.compile(r"\[\s*\]")
_CLOSE = re.compile(r"\[\s*[/\\]\s*\]")


# ---- text -------------------------------------------------------------------------------
def clean_text_output(text: str, cue: str = "", stops: Sequence[str] = ()) -> tuple[str, bool]:
    """The answer in a raw continuation: cut at the first stop string (where a next
    demonstration starts; searched in the raw text, as the backends stop), stripped, without
    a repeated leading cue word. ok = something is left."""
    text = text or ""
    cut = len(text)
    for stop in stops:
        position = text.find(stop)
        if position >= 0:
            cut = min(cut, position)
    answer = text[:cut].strip()
    if cue and answer.upper().startswith(cue.upper()):
        answer = answer[len(cue):].strip()
    return answer, bool(answer)


# ---- yes / no ---------------------------------------------------------------------------
def parse_yes_no(text: str) -> tuple[bool | None, bool]:
    """True for yes / supported / present, False for no / not supported / not present.

    A leading yes/no/true/false decides; else a negative phrase ("not supported",
    "insufficient", ...); else the first yes/no/true/false word; else a positive word.
    """
    answer, ok, _ = _decide_yes_no(text)
    return answer, ok


def _decide_yes_no(text: str) -> tuple[bool | None, bool, int | None]:
    """`parse_yes_no`, and the offset of the yes/no word that decided (None otherwise)."""
    text = text or ""
    for pattern in (_LEADING_ANSWER, _NEGATIVE, _ANY_ANSWER, _POSITIVE):
        match = pattern.search(text)
        if match is None:
            continue
        if pattern is _NEGATIVE:
            return False, True, None
        if pattern is _POSITIVE:
            return True, True, None
        word = match.group(1).lower()
        return word in ("yes", "true"), True, match.start(1) if word in ("yes", "no") else None
    return None, False, None


def _label_value(yes: bool, offset: int | None, probability_at: ProbabilityAt) -> float:
    known = probability_at(offset) if offset is not None else None
    return float(known) if known is not None else (1.0 if yes else 0.0)


def parse_yes_probability(text: str, probability_at: ProbabilityAt = _no_probability
                          ) -> tuple[list[float], bool]:
    """FAC: [1.0] for yes, [0.0] for no (or p(yes) at the deciding word when known),
    [UNDECIDED] when unreadable."""
    answer, ok, offset = _decide_yes_no(text)
    if answer is None:
        return [UNDECIDED], ok
    return [_label_value(answer, offset, probability_at)], ok


# ---- per-sentence labels ----------------------------------------------------------------
def parse_yes_no_sequence(text: str, n_lines: int,
                          probability_at: ProbabilityAt = _no_probability
                          ) -> tuple[list[float], bool]:
    """`SENT0 Yes SENT1 No ...` (any case, punctuation between, first label per line wins);
    without SENT markers, exactly `n_lines` bare yes/no words in order. Unlabelled lines get
    0.0; ok = every line labelled. A label is p(yes) at its word when known."""
    values: list[float | None] = [None] * n_lines
    for match in _SENT_YES_NO.finditer(text or ""):
        k = int(match.group(1))
        if k < n_lines and values[k] is None:
            values[k] = _label_value(match.group(2).lower() == "yes", match.start(2),
                                     probability_at)
    if all(value is None for value in values) and not _SENT_ID.search(text or ""):
        words = list(_BARE_YES_NO.finditer(text or ""))
        if len(words) == n_lines:
            values = [_label_value(word.group(1).lower() == "yes", word.start(1),
                                   probability_at) for word in words]
    ok = all(value is not None for value in values)
    return [0.0 if value is None else value for value in values], ok


def parse_id_list(text: str, n_lines: int) -> tuple[list[float], bool]:
    """Positive sentence ids: `SENT2 SENT5`, `SENT2, SENT 5`, `[2, 5]`, `Sentences 2 and 5`;
    `NONE` / `[]` / nothing = no positive line. ok = at least one id in range, or an explicit
    empty answer."""
    text = text or ""
    ids = [int(k) for k in _SENT_ID.findall(text)] or [int(k) for k in _NUMBER.findall(text)]
    values = [0.0] * n_lines
    for k in ids:
        if k < n_lines:
            values[k] = 1.0
    ok = any(values) or (not ids and _EMPTY_LIST.match(text) is not None)
    return values, ok


# ---- unsupported spans ------------------------------------------------------------------
def parse_spans(text: str) -> tuple[str, bool]:
    """Normalise `[ ]` / `[ /]` marker spellings and repair unbalanced markers: a closer with
    no open span and a second opener inside a span are dropped; an unclosed span is left
    open (it runs to the end, as the official scorer reads it). ok = text is left."""
    text = _CLOSE.sub("[/]", _OPEN.sub("[]", text or ""))
    pieces, inside = [], False
    for piece in re.split(r"(\[\]|\[/\])", text):
        if piece == "[]":
            if not inside:
                pieces.append(piece)
            inside = True
        elif piece == "[/]":
            if inside:
                pieces.append(piece)
            inside = False
        else:
            pieces.append(piece)
    repaired = "".join(pieces).strip()
    plain = repaired.replace("[]", "").replace("[/]", "").strip()
    return repaired, bool(plain)


# ---- dispatch ---------------------------------------------------------------------------
def parse_fewshot_output(task: Any, raw: str, item: FewShotParts, *, cue: str,
                         stops: Sequence[str], line_output: str,
                         yes_probabilities: Mapping[str, float] | None = None
                         ) -> tuple[Any, bool]:
    """The prediction for one prompt (one window of a line task) and whether it parsed.

    Line tasks are recognised by `item.extra["line_labels"]`; other tasks by output kind:
    probabilities -> yes/no, spans -> [] [/] text, text -> the cleaned text.
    `yes_probabilities`: {offset in `raw` (as text): p(yes)} at the output's yes/no words.
    """
    text, has_text = clean_text_output(raw, cue, stops)
    probability_at = _probabilities_in(raw, text, yes_probabilities)
    labels = item.extra.get("line_labels")
    if labels is not None:
        if line_output == "id_list":
            return parse_id_list(text, len(labels))
        return parse_yes_no_sequence(text, len(labels), probability_at)
    kind = getattr(task, "output_kind", "text")
    if kind == "probabilities":
        return parse_yes_probability(text, probability_at)
    if kind == "spans":
        return parse_spans(text)
    return text, has_text


def _probabilities_in(raw: str, text: str, known: Mapping[str, float] | None) -> ProbabilityAt:
    """p(yes) at an offset of the cleaned `text`, which sits in `raw` where it first occurs."""
    base = (raw or "").find(text) if known and text else -1
    if base < 0:
        return _no_probability
    return lambda offset: known.get(str(base + offset))
