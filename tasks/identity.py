"""What names a prediction record within its task: duplicate checks and the order in which
the bootstrap resamples records (tasks.scoring)."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

#: what names a record: its item and position (plus the task's `identity_extra`) ...
INDEX_IDENTITY = ("id", "summ_idx")
#: ... or, in records without `summ_idx`, its item and text
TEXT_IDENTITY = ("id", "claim", "summary_sent")


def identity_fields(task, record: dict) -> tuple[str, ...]:
    """The fields that name `record` within its task (free text only where `summ_idx` is
    missing: an edited claim must not make a second copy of an item look new)."""
    return (INDEX_IDENTITY if "summ_idx" in record else TEXT_IDENTITY) + task.identity_extra


def record_key(task, record: dict) -> tuple:
    """What makes a record unique within its task."""
    return (task.name, *[_hashable(record.get(field))
                         for field in identity_fields(task, record)])


def describe(task, record: dict) -> str:
    """The record's identity as an error message shows it (long text cut to 60 characters)."""
    fields = [f"{field}={_shown(record[field])}" for field in identity_fields(task, record)
              if field in record]
    return f"{task.name}: {', '.join(fields) or 'no identifying fields'}"


def _shown(value: Any) -> str:
    return repr(value[:60] if isinstance(value, str) else value)


def _hashable(value: Any) -> Any:
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


def record_digest(task, record: dict) -> int:
    """A stable 64-bit digest of `record_key` (what duplicates are checked and the bootstrap
    orders records by)."""
    text = repr(record_key(task, record)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def in_identity_order(examples: Sequence, digests: Sequence[int]) -> list:
    """Per-record material reordered by the records' identity digests: what the bootstrap
    resamples, so that its intervals do not depend on the order of the input."""
    order = sorted(range(len(examples)), key=digests.__getitem__)
    return [examples[position] for position in order]
