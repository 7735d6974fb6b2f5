"""What a JSON line would become, read before it becomes Python objects: how deeply it nests,
how many arrays and objects it opens and how many values it holds, counted from its brackets
and commas outside strings. A 1 MB line of `[[],[],...]` is 333,000 lists once parsed (about
20 MB); counted here, it is a few passes over its bytes, and refused unparsed.

The limits are structural, the same for every board: a record of any track is one object with
a few lists (its prediction, and the input lines, labels or outputs `sumbench predict` writes
beside it), so it opens a few containers however long its document; and a line holds at most
one value per `VALUE_BYTES` of the instance's line limit (131,072 values in 1 MiB: a record of
document sentences and probabilities holds far fewer). What a task allows (a probability per
line of the item) is checked once the record is read, one record at a time."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: a JSON string, escapes included (unrolled: no backtracking within a long string)
STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: every byte but brackets and braces
NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
#: the deepest a record nests ({"prediction": [...]} is 2; metadata a few more)
MAX_DEPTH = 16
#: the arrays and objects one record may open (a few lists and an object or two of
#: metadata in any real record)
MAX_CONTAINERS = 1024
#: a line holds at most one value per this many bytes of the line limit (131,072 values for
#: 1 MiB); real records hold far fewer (document sentences, probabilities)
VALUE_BYTES = 8


@dataclass(frozen=True)
class Shape:
    depth: int       # containers open at once, at most
    containers: int  # arrays and objects
    values: int      # values of every depth, containers included (a key's value counts once)


def json_shape(raw: bytes) -> Shape:
    """The shape of one JSON text (strings count as one value each; a malformed text gets
    some shape, and JSON's own reader then refuses it)."""
    bare = STRING.sub(b"0", raw)
    containers = _containers(bare)
    return Shape(_depth(bare), containers, _values(bare, containers))


def _containers(bare: bytes) -> int:
    return bare.count(b"[") + bare.count(b"{")


def _values(bare: bytes, containers: int) -> int:
    """Values of a text whose strings are blanked (`containers` of them arrays and objects):
    elements are separated by commas, every container is one more, and a container holding
    nothing (`[]`, `{}`) has no element (written with white space inside, `[ ]`, it counts
    one: over, never under)."""
    return bare.count(b",") + containers + 1 - bare.count(b"[]") - bare.count(b"{}")


def _depth(bare: bytes) -> int:
    marks = np.frombuffer(bare.translate(None, NOT_BRACKETS), np.uint8)
    if not len(marks):
        return 0
    steps = (marks == ord("[")).view(np.int8) + (marks == ord("{")).view(np.int8)
    steps -= (marks == ord("]")).view(np.int8) + (marks == ord("}")).view(np.int8)
    return max(int(np.cumsum(steps, dtype=np.int32).max()), 0)


def max_values(line_bytes: int) -> int:
    """The most values a line of `line_bytes` (an instance's `max_line_bytes`) may hold."""
    return max(line_bytes // VALUE_BYTES, 1)


def shape_problem(raw: bytes, most_values: int) -> str | None:
    """Why a line is refused before it is parsed (more than MAX_CONTAINERS arrays and
    objects, more than `most_values` values, nested deeper than MAX_DEPTH), or None. A line
    whose bytes alone bound all three (at most MAX_DEPTH brackets and braces, and
    `most_values` commas and brackets) is not counted further."""
    opens = raw.count(b"[") + raw.count(b"{")
    if opens <= MAX_DEPTH and raw.count(b",") + opens + 1 <= most_values:
        return None
    bare = STRING.sub(b"0", raw)
    containers = _containers(bare)
    if containers > MAX_CONTAINERS:
        return (f"a line of {containers} JSON arrays and objects (a record opens at most "
                f"{MAX_CONTAINERS})")
    values = _values(bare, containers)
    if values > most_values:
        return (f"a line of {values} JSON values (at most {most_values}: one per "
                f"{VALUE_BYTES} bytes of this instance's line limit)")
    depth = _depth(bare)
    if depth > MAX_DEPTH:
        return f"a line nested {depth} deep (a record nests at most {MAX_DEPTH} deep)"
    return None
