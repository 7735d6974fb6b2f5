"""What a JSON line would become, read before it becomes Python objects: how deeply it nests
and how many values it holds, counted from its brackets and commas outside strings. A 1 MB
line of `[[],[],...]` is 333,000 lists once parsed (about 20 MB); counted here, it is a few
array operations over its bytes, and refused unparsed."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: a JSON string, escapes included (unrolled: no backtracking within a long string)
STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: every byte but brackets and braces
NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
#: the deepest a record of any track nests ({"prediction": [...]} is 2; metadata a few more)
MAX_DEPTH = 16
#: values a record holds besides its prediction's (ids, task names, digests, metadata)
RECORD_VALUES = 256


@dataclass(frozen=True)
class Shape:
    depth: int    # containers open at once, at most
    values: int   # values of every depth, containers included (a key's value counts once)


def json_shape(raw: bytes) -> Shape:
    """The nesting depth and value count of one JSON text (strings count as one value each;
    a malformed text gets some shape, and JSON's own reader then refuses it)."""
    bare = STRING.sub(b"0", raw)
    return Shape(_depth(bare), _values(bare))


def _values(bare: bytes) -> int:
    """Values of a text whose strings are blanked: elements are separated by commas, every
    container is one more, and a container holding nothing (`[]`, `{}`) has no element
    (written with white space inside, `[ ]`, it counts one: over, never under)."""
    opens = bare.count(b"[") + bare.count(b"{")
    return bare.count(b",") + opens + 1 - bare.count(b"[]") - bare.count(b"{}")


def _depth(bare: bytes) -> int:
    marks = np.frombuffer(bare.translate(None, NOT_BRACKETS), np.uint8)
    if not len(marks):
        return 0
    steps = (marks == ord("[")).view(np.int8) + (marks == ord("{")).view(np.int8)
    steps -= (marks == ord("]")).view(np.int8) + (marks == ord("}")).view(np.int8)
    return max(int(np.cumsum(steps, dtype=np.int32).max()), 0)


def shape_problem(raw: bytes, max_values: int | None) -> str | None:
    """Why a line is refused before it is parsed (holding more than `max_values` values, or
    nested deeper than MAX_DEPTH), or None. Lines whose bytes alone bound both (at most
    MAX_DEPTH brackets and braces, at most `max_values` commas and brackets) are not counted
    further; the depth is counted only for lines within the value limit."""
    opens = raw.count(b"[") + raw.count(b"{")
    if opens <= MAX_DEPTH and (max_values is None or raw.count(b",") + opens + 1 <= max_values):
        return None
    bare = STRING.sub(b"0", raw)
    values = _values(bare)
    if max_values is not None and values > max_values:
        return (f"a line of {values} JSON values (a record of this board holds at most "
                f"{max_values}: its prediction's and {RECORD_VALUES} more)")
    depth = _depth(bare)
    if depth > MAX_DEPTH:
        return f"a line nested {depth} deep (a record nests at most {MAX_DEPTH} deep)"
    return None


def max_record_values(manifest) -> int | None:
    """The most values one record of a board may hold: its longest prediction (a probability
    per line of the item with the most lines, `n` in the manifest) and RECORD_VALUES more;
    None without a manifest (or with one that lists no items: the track's check says why)."""
    parts = manifest.get("parts") if isinstance(manifest, Mapping) else None
    if not isinstance(parts, Mapping):
        return None
    lengths = [item.get("n") for items in parts.values() if isinstance(items, list)
               for item in items if isinstance(item, Mapping)]
    return max([n for n in lengths if isinstance(n, int)] or [1]) + RECORD_VALUES
