"""A registry of task classes: unique names, aliases, and "did you mean" for unknown names."""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from tasks.plumbing.errors import SumbenchError, UnknownNameError

T = TypeVar("T")


class DuplicateNameError(SumbenchError, ValueError):
    """A name or alias is already taken in a registry."""


class Registry(Generic[T]):
    """Maps canonical names (and case-insensitive aliases) to registered objects."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}  # lower-cased name or alias -> canonical name

    def register(self, name: str, entry: T, aliases: tuple[str, ...] = ()) -> T:
        for key in (name, *aliases):
            owner = self._aliases.get(key.lower())
            if owner is not None:
                raise DuplicateNameError(
                    f"{self.kind} name {key!r} is already registered (by {owner!r})")
        self._entries[name] = entry
        for key in (name, *aliases):
            self._aliases[key.lower()] = name
        return entry

    def canonical_name(self, name: str) -> str:
        canonical = self._aliases.get(name.lower())
        if canonical is None:
            raise UnknownNameError(self._unknown_message(name))
        return canonical

    def get(self, name: str) -> T:
        return self._entries[self.canonical_name(name)]

    def aliases_of(self, name: str) -> list[str]:
        """The aliases (not the name itself) registered for a canonical name."""
        return sorted(alias for alias, owner in self._aliases.items()
                      if owner == name and alias != name.lower())

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def _unknown_message(self, name: str) -> str:
        candidates = sorted(set(self._aliases) | set(self._entries))
        close = difflib.get_close_matches(name.lower(), candidates, n=3, cutoff=0.5)
        close = sorted({self._aliases.get(c, c) for c in close})
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self.names())})"

    def decorator(self, *aliases: str) -> Callable[[T], T]:
        """Class decorator: registers the class under its `name` attribute and `aliases`."""
        def wrap(entry: T) -> T:
            return self.register(entry.name, entry, tuple(aliases))
        return wrap


#: The one registry of benchmark tasks. Register with `@TASKS.decorator("ALIAS", ...)`.
TASKS: Registry = Registry("task")
