"""Plug-ins: what installed packages add to sumbench's registries through entry points.

A package names its objects in its own `pyproject.toml`:

    [project.entry-points."sumbench.tasks"]
    title_generation = "my_package.titles:TitleGeneration"

Groups: `sumbench.tasks` (a Task class; tasks.plumbing.registry.TASKS), `sumbench.presence_backends`
(a PresenceBackend class; leaderboard.evaluators.presence) and `sumbench.evaluators` (a
summary metric; tasks.metrics.evaluators). Each group is read once per process, when its
registry is first used. A plug-in that cannot be imported, is not of the kind its group takes,
or whose name is taken (by a built-in or another plug-in) is skipped with one warning line on
stderr naming it and its package; the rest of the program runs on.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

#: group -> what its entry points name (for messages)
GROUPS = {"sumbench.tasks": "task", "sumbench.presence_backends": "presence backend",
          "sumbench.evaluators": "evaluator"}
#: the package every built-in comes from
BUILTIN = "sumbench"


def entry_points(group: str) -> list:
    """The group's entry points of every installed distribution, by name."""
    from importlib.metadata import entry_points as all_entry_points

    return sorted(all_entry_points(group=group), key=lambda point: point.name)


def package_of(point) -> str:
    dist = getattr(point, "dist", None)
    return getattr(dist, "name", None) or point.value.split(":")[0].split(".")[0]


def warn(message: str) -> None:
    print(f"sumbench: warning: {message}", file=sys.stderr)


def load_plugins(group: str, register: Callable[[str, Any], None]) -> dict[str, str]:
    """Load the group's entry points and `register(name, object)` each; returns name ->
    package of those registered. A failure of one plug-in is a warning, never an error."""
    kind, loaded = GROUPS[group], {}
    for point in entry_points(group):
        package = package_of(point)
        try:
            register(point.name, point.load())
        except Exception as error:  # noqa: BLE001 - a broken plug-in must not stop sumbench
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            warn(f"skipped the {kind} plug-in {point.name!r} of package {package!r} "
                 f"({type(error).__name__}{': ' + reason if reason else ''})")
            continue
        loaded[point.name] = package
    return loaded


class Once:
    """`load()` run once per process, safe across threads: a caller in another thread waits
    until the first call has finished (so it never sees a half-filled registry); a call from
    inside the load itself (an import that asks for the registry) returns at once; a load that
    raised runs again on the next call."""

    def __init__(self, load: Callable[[], None]):
        self._load, self._lock = load, threading.RLock()
        self._done = self._running = False

    def __call__(self) -> None:
        if self._done:
            return
        with self._lock:
            if self._done or self._running:
                return
            self._running = True
            try:
                self._load()
                self._done = True
            finally:
                self._running = False
