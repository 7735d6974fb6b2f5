"""G-Eval's scores from a chat response's choices.

- `mode=sample` (the official code's): each choice's text is parsed as nlpyang/geval
  `meta_eval_summeval.py:29-37` parses it, `re.search(r"^ ?([\\d\\.]+)", text)` then `float`;
  no match, or a match `float` refuses ("4.5.1", "."), counts 0. A null content counts 0 too
  (the official parser would stop on it). The score is the mean over all choices, the zeros
  included (`meta_eval_summeval.py:59`).
- `mode=logprobs` (the paper's probability-weighted sum, which the released code could not
  compute: GPT-4's API gave no log-probabilities then): for each choice, its first generated
  token whose text is not blank; among that token's alternatives (`top_logprobs`, the token
  itself included), those whose text stripped of white space is exactly one of the scale's
  integers s ("4", " 4" and "4 " all count for 4; "4." does not) give p(s) = the sum of
  exp(log-probability) over them, and the choice's score is
  sum_s s * p(s) / sum_s p(s). A choice with no score token there counts 0, as an unparsable
  sample does. The score is the mean over the choices.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.chat_client import token_alternatives

#: the official parser's pattern (meta_eval_summeval.py:30)
SCORE_PATTERN = re.compile(r"^ ?([\d\.]+)")


def parse_sample(text: str | None) -> float:
    """One sample's score, as the official `parse_output` gives it (0 when unparsable)."""
    matched = SCORE_PATTERN.search(text or "")
    if not matched:
        return 0.0
    try:
        return float(matched.group(1))
    except ValueError:
        return 0.0


def choice_texts(response: Any) -> list[str | None]:
    """Each choice's message content (or completion text), in order."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices:
        raise SumbenchError("G-Eval: the server's response has no choices")
    return [_choice_text(choice) for choice in choices]


def _choice_text(choice: Any) -> str | None:
    if not isinstance(choice, dict):
        return None
    message = choice.get("message")
    return message.get("content") if isinstance(message, dict) else choice.get("text")


def sample_score(response: Any) -> float:
    """The mean of the choices' parsed scores (unparsable ones counted 0)."""
    scores = [parse_sample(text) for text in choice_texts(response)]
    return sum(scores) / len(scores)


def parse_scale(text: str) -> tuple[int, ...]:
    """"1-5" -> (1, 2, 3, 4, 5): the integers that count as score tokens."""
    low, dash, high = str(text).strip().partition("-")
    try:
        first, last = int(low), int(high)
    except ValueError:
        raise ValueError("expected two integers LOW-HIGH, e.g. 1-5") from None
    if not dash or first < 0 or last <= first:
        raise ValueError("expected two integers LOW-HIGH with 0 <= LOW < HIGH, e.g. 1-5")
    return tuple(range(first, last + 1))


def expected_choice_score(tokens: Sequence[tuple[str, dict[str, float]]],
                          scale: Sequence[int]) -> float:
    """sum_s s * p(s) / sum_s p(s) at the first non-blank token (0 without score tokens)."""
    first = next((alternatives for token, alternatives in tokens if token.strip()), None)
    if not first:
        return 0.0
    names = {str(value): value for value in scale}
    mass = {value: 0.0 for value in scale}
    for token, logprob in first.items():
        value = names.get(token.strip())
        if value is not None:
            mass[value] += math.exp(logprob)
    total = sum(mass.values())
    return sum(value * p for value, p in mass.items()) / total if total > 0 else 0.0


def logprob_score(response: Any, scale: Sequence[int]) -> float:
    """The mean over the choices of each one's expected score; a choice with text but no
    log-probabilities is an error (the server does not return them: use mode=sample)."""
    texts = choice_texts(response)
    scores = []
    for choice, text in zip(response["choices"], texts):
        tokens = token_alternatives({"choices": [choice]})
        if not tokens and (text or "").strip():
            raise SumbenchError("G-Eval mode=logprobs: the server returned no "
                                "log-probabilities (use mode=sample)")
        scores.append(expected_choice_score(tokens, scale))
    return sum(scores) / len(scores)
