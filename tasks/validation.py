"""Field checks for `Task.validate_fields`: each raises DataError(field=...) on bad input."""
from __future__ import annotations

import math
from typing import Any

from tasks.plumbing.errors import DataError, json_type


def require(record: dict, field: str) -> Any:
    if field not in record:
        raise DataError("missing field", field=field)
    return record[field]


def require_str(record: dict, field: str) -> str:
    value = require(record, field)
    if not isinstance(value, str):
        raise DataError(f"expected a string, got {json_type(value)}", field=field)
    return value


def require_str_list(record: dict, field: str) -> list:
    value = require(record, field)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DataError("expected a list of strings", field=field)
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require_probabilities(record: dict, field: str = "prediction") -> list:
    """A list of finite numbers in [0, 1] (any length; bools are not numbers here)."""
    value = require(record, field)
    if not isinstance(value, list):
        raise DataError(f"expected a list of probabilities, got {json_type(value)}",
                        field=field)
    if value and set(map(type, value)) == {float} and math.isfinite(sum(value)) \
            and 0.0 <= min(value) and max(value) <= 1.0:
        return value  # the common case (floats, no NaN), checked in C; the loop names the bad item
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise DataError(f"item {position} is not a number: {item!r}", field=field)
        if not 0.0 <= item <= 1.0:  # also false for NaN, infinities and huge integers
            raise DataError(f"item {position} is not a probability in [0, 1]: {repr(item)[:40]}",
                            field=field)
    return value


def require_binary_labels(record: dict, field: str) -> list:
    value = require(record, field)
    if not isinstance(value, list) or not all(is_int(item) and item in (0, 1) for item in value):
        raise DataError("expected a list of 0/1 integers", field=field)
    return value


def require_binary_label(record: dict, field: str = "label") -> int:
    value = require(record, field)
    if not is_int(value) or value not in (0, 1):
        raise DataError(f"expected 0 or 1, got {json_literal(value)}", field=field)
    return value


#: the largest index a dataset column (int64) holds
MAX_INDEX = 2 ** 63 - 1


def require_index(record: dict, field: str) -> int:
    """A non-negative integer up to MAX_INDEX (bools are not integers here)."""
    value = require(record, field)
    if not is_int(value) or not 0 <= value <= MAX_INDEX:
        shown = (json_literal(value) if not is_int(value) or value < 10 ** 30
                 else f"{str(value)[:12]}...")
        raise DataError(f"expected a non-negative integer below 2**63, got {shown}",
                        field=field)
    return value


def json_literal(value: Any) -> str:
    """A decoded JSON scalar as its JSON text (null, true), other values as their repr."""
    return ("null" if value is None else "true" if value is True else "false"
            if value is False else repr(value))


def require_index_lists(record: dict, field: str, bound: int) -> list:
    """A list of lists of integers, each in 0..bound-1 (indices into a list of `bound`)."""
    value = require(record, field)
    if not isinstance(value, list) or not all(isinstance(item, list) for item in value):
        raise DataError("expected a list of lists of integers", field=field)
    for position, indices in enumerate(value):
        bad = [index for index in indices if not is_int(index) or not 0 <= index < bound]
        if bad:
            raise DataError(f"item {position} holds {bad[0]!r}, not an integer in "
                            f"[0, {bound})", field=field)
    return value
