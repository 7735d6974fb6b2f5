"""Robust parsers for few-shot model outputs; each returns (prediction, ok) and never raises.

`ok` is False when the output could not be read as an answer of the expected form; the
prediction is then a neutral fallback (empty text, 0.5, all-zero labels) and the runner counts
it as unparseable instead of failing.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tasks.base import FewShotParts

#: FAC fallback when neither yes nor no can be read: no information
UNDECIDED = 0.5

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
    text = text or ""
    for pattern in (_LEADING_ANSWER, _NEGATIVE, _ANY_ANSWER, _POSITIVE):
        match = pattern.search(text)
        if match is None:
            continue
        if pattern is _NEGATIVE:
            return False, True
        if pattern is _POSITIVE:
            return True, True
        return match.group(1).lower() in ("yes", "true"), True
    return None, False


def parse_yes_probability(text: str) -> tuple[list[float], bool]:
    """FAC: [1.0] for yes, [0.0] for no, [UNDECIDED] when unreadable."""
    answer, ok = parse_yes_no(text)
    return ([UNDECIDED] if answer is None else [1.0 if answer else 0.0]), ok


# ---- per-sentence labels ----------------------------------------------------------------
def parse_yes_no_sequence(text: str, n_lines: int) -> tuple[list[float], bool]:
    """`SENT0 Yes SENT1 No ...` (any case, punctuation between, first label per line wins);
    without SENT markers, exactly `n_lines` bare yes/no words in order. Unlabelled lines get
    0.0; ok = every line labelled."""
    values: list[float | None] = [None] * n_lines
    for match in _SENT_YES_NO.finditer(text or ""):
        k = int(match.group(1))
        if k < n_lines and values[k] is None:
            values[k] = 1.0 if match.group(2).lower() == "yes" else 0.0
    if all(value is None for value in values) and not _SENT_ID.search(text or ""):
        words = _BARE_YES_NO.findall(text or "")
        if len(words) == n_lines:
            values = [1.0 if word.lower() == "yes" else 0.0 for word in words]
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
                         stops: Sequence[str], line_output: str) -> tuple[Any, bool]:
    """The prediction for one prompt (one window of a line task) and whether it parsed.

    Line tasks are recognised by `item.extra["line_labels"]`; other tasks by output kind:
    probabilities -> yes/no, spans -> [] [/] text, text -> the cleaned text.
    """
    text, has_text = clean_text_output(raw, cue, stops)
    labels = item.extra.get("line_labels")
    if labels is not None:
        if line_output == "id_list":
            return parse_id_list(text, len(labels))
        return parse_yes_no_sequence(text, len(labels))
    kind = getattr(task, "output_kind", "text")
    if kind == "probabilities":
        return parse_yes_probability(text)
    if kind == "spans":
        return parse_spans(text)
    return text, has_text
