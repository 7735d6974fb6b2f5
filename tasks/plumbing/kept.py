"""The one way sumbench keeps built things per process: `Kept`, a table of at most `size`
values by key, newest last, each built once under a lock of its key alone; and
`kept_model(kind, key, load)`, the table of loaded models of one kind (QuestEval's model
sets, presence backends, spaCy pipelines, board columns' evaluators).

Each kind keeps its MODELS_PER_KIND most recently used models, so board columns that use
different models of one kind (two QuestEval columns, two NLI columns) keep theirs loaded
instead of evicting each other on every submission."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
#: loaded models kept per kind and process (the most recently used)
MODELS_PER_KIND = 4


class Kept:
    """Values kept by key, newest last, at most `size`; `get_or_build` builds a missing one
    under a lock of its key alone (the table's own lock is held only to look up and store)."""

    def __init__(self, size: int):
        self.size, self.values = size, OrderedDict()
        self.guard, self.building = threading.Lock(), {}

    def get(self, key):
        with self.guard:
            if key in self.values:
                self.values.move_to_end(key)
                return self.values[key]
        return None

    def get_or_build(self, key, build):
        found = self.get(key)
        if found is not None:
            return found
        with self.guard:
            lock = self.building.setdefault(key, threading.Lock())
        with lock:  # one build per key; other keys are built and answered meanwhile
            try:
                found = self.get(key)
                if found is None:
                    found = build()
                    with self.guard:
                        self.values[key] = found
                        while len(self.values) > self.size:
                            self.values.popitem(last=False)
            finally:
                with self.guard:
                    self.building.pop(key, None)
        return found

    def clear(self) -> None:
        with self.guard:
            self.values.clear()


_KINDS: dict[str, Kept] = {}
_KINDS_GUARD = threading.Lock()


def models_of(kind: str) -> Kept:
    """The table of loaded models of `kind` in this process."""
    with _KINDS_GUARD:
        return _KINDS.setdefault(kind, Kept(MODELS_PER_KIND))


def kept_model(kind: str, key: Hashable, load: Callable[[], T]) -> T:
    """The model of `kind` for `key`, loaded by `load()` the first time it is asked for in
    this process (and again only after MODELS_PER_KIND others of its kind were used since)."""
    return models_of(kind).get_or_build(key, load)


def forget_models(kind: str | None = None) -> None:
    """Drop the kept models of `kind` (of every kind when None): tests, or to free memory."""
    with _KINDS_GUARD:
        tables: list[Any] = list(_KINDS.values()) if kind is None else \
            [_KINDS[kind]] if kind in _KINDS else []
    for table in tables:
        table.clear()
