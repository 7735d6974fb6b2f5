"""Model cards of leaderboard entries: self-reported metadata, never used for scores.

Fields (all optional, strings or numbers, each at most 500 characters): base_model, method
("fine-tuning", "LoRA fine-tuning", "few-shot", ...), training_domains, data_fraction, seed,
link, licence, notes, training_data (the data the model was trained on), and usb_test_seen
(true or false: whether USB test data was among it). `card_from_results` fills them from a
`sumbench run` folder's results.json; explicit values win.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tasks.plumbing.errors import DataError
from tasks.plumbing.io import has_lone_surrogate

CARD_FIELDS = ("base_model", "method", "training_domains", "data_fraction", "seed", "link",
               "licence", "notes", "training_data", "usb_test_seen")
#: fields that hold true or false (the others: strings or numbers)
BOOLEAN_FIELDS = ("usb_test_seen",)
MAX_VALUE_CHARS = 500


def card_from_results(results: Mapping[str, Any]) -> dict[str, Any]:
    """Card fields a results.json document states about its run."""
    spec = results.get("spec") if isinstance(results, Mapping) else None
    if not isinstance(spec, Mapping):
        return {}
    card: dict[str, Any] = {"base_model": spec.get("model"), "seed": spec.get("seed")}
    if spec.get("mode") == "fewshot":
        style = spec.get("style") or "default style"
        card["method"] = f"few-shot ({spec.get('fewshot_backend')}, {style})"
    elif spec.get("training") == "none":
        card["method"] = "evaluated as is (no fine-tuning)"
    else:
        card["method"] = ("LoRA fine-tuning" if spec.get("lora") else "fine-tuning") + \
            f" ({spec.get('training')}, profile {spec.get('profile')})"
        card["training_domains"] = spec.get("variant")
        overrides = spec.get("train_overrides") or {}
        if isinstance(overrides, Mapping) and "train_fraction" in overrides:
            card["data_fraction"] = overrides["train_fraction"]
    return {key: value for key, value in card.items() if value is not None}


#: the characters that reorder displayed text (bidi embeddings, overrides, isolates, marks)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")


#: the fields whose text goes into the board's CSV (a tab there reads as a column break)
CSV_TEXT_FIELDS = ("training_data",)


def _hidden_control(char: str, key: str) -> bool:
    """A control character other than a line feed (and a tab, outside the CSV's fields), a
    carriage return included (it ends a CSV row), or a bidi control."""
    import unicodedata

    allowed = "\n" if key in CSV_TEXT_FIELDS else "\t\n"
    return (unicodedata.category(char) in ("Cc", "Zl", "Zp") and char not in allowed) or \
        char in BIDI_CONTROLS


def check_card(card: Any, source: str = "card") -> dict[str, Any]:
    """The card with only known fields of allowed types; DataError naming the field."""
    if not isinstance(card, Mapping):
        raise DataError("expected a JSON object", path=source)
    checked = {}
    for key, value in card.items():
        if key not in CARD_FIELDS:
            raise DataError(f"unknown model card field (known: {', '.join(CARD_FIELDS)})",
                            path=source, field=str(key)[:60])
        if key in BOOLEAN_FIELDS:
            if not isinstance(value, bool):
                raise DataError("expected true or false", path=source, field=key)
            checked[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise DataError("expected a string or a number", path=source, field=key)
        if isinstance(value, float) and not math.isfinite(value):
            raise DataError("expected a finite number", path=source, field=key)
        if len(str(value)) > MAX_VALUE_CHARS:
            raise DataError(f"at most {MAX_VALUE_CHARS} characters", path=source, field=key)
        if isinstance(value, str) and ("\x00" in value or has_lone_surrogate(value)):
            raise DataError("a NUL or a lone UTF-16 surrogate (\\ud800-\\udfff) cannot be "
                            "stored or shown", path=source, field=key)
        if isinstance(value, str) and any(_hidden_control(ch, key) for ch in value):
            allowed = "new lines (LF)" if key in CSV_TEXT_FIELDS else "new lines (LF) and tabs"
            raise DataError("control characters and bidi controls (which reorder what is "
                            "shown) are not allowed, carriage returns (CR) included; text and "
                            f"{allowed} are", path=source, field=key)
        checked[key] = value
    return checked


def merged_card(explicit: Mapping[str, Any], results: Mapping[str, Any] | None) -> dict:
    """Card fields from results.json (when given), overridden by explicit ones; checked."""
    card = card_from_results(results) if results else {}
    card.update({key: value for key, value in explicit.items() if value not in (None, "")})
    return check_card(card)
