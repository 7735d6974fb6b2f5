"""Plug-ins: what installed packages add to sumbench's registries through entry points, and
modules named by path or import name (`--plugins`, `SUMBENCH_PLUGINS`).

A package names its objects in its own `pyproject.toml`:

    [project.entry-points."sumbench.tasks"]
    title_generation = "my_package.titles:TitleGeneration"

Groups: `sumbench.tasks` (a Task class; tasks.plumbing.registry.TASKS), `sumbench.presence_backends`
(a PresenceBackend class; leaderboard.evaluators.pyramid.presence) and `sumbench.evaluators` (a
summary metric; tasks.metrics.evaluators). Each group is read once per process, when its
registry is first used. A plug-in that cannot be imported, is not of the kind its group takes,
or whose name is taken (by a built-in or another plug-in) is skipped with one warning line on
stderr naming it and its package; the rest of the program runs on.

`--plugins MODULE_OR_PATH` (any command, repeatable) and the environment variable
`SUMBENCH_PLUGINS` (entries separated by os.pathsep) name plug-ins without packaging: a .py
file, a package folder (with __init__.py) or an importable module. The command line's are
added to the variable, so every process a command starts (Slurm jobs, workers) loads them too.
A plug-in named this way must load: one that cannot is an error naming it, not a warning.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tasks.plumbing.errors import SumbenchError

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


#: the environment variable naming plug-ins for this process and the ones it starts
PLUGINS_VARIABLE = "SUMBENCH_PLUGINS"


def named_plugins(environ=None) -> list[str]:
    """The plug-ins `SUMBENCH_PLUGINS` names, in order (empty entries left out)."""
    value = (os.environ if environ is None else environ).get(PLUGINS_VARIABLE, "")
    return [entry for entry in value.split(os.pathsep) if entry.strip()]


def checked_source(source: str, origin: str = "--plugins") -> str:
    """A plug-in source as every process can find it: an existing .py file or package
    folder as an absolute path, or the name of an importable module; else a SumbenchError
    naming where it was given (`origin`)."""
    path = Path(source).expanduser()
    if source.endswith(".py") or os.sep in source or path.exists():
        if path.is_file() and path.suffix == ".py":
            return str(path.resolve())
        if path.is_dir() and (path / "__init__.py").is_file():
            return str(path.resolve())
        what = "a folder without __init__.py" if path.is_dir() else "no such file"
        raise SumbenchError(f"{origin} {source}: {what} (give a .py file, a package folder "
                            f"or an importable module)")
    try:
        found = importlib.util.find_spec(source)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise SumbenchError(f"{origin} {source}: no such file, folder or importable module")
    return source


def add_named_plugins(sources) -> list[str]:
    """Check `sources` (`checked_source`) and add them to `SUMBENCH_PLUGINS`; returns them."""
    checked = [checked_source(source) for source in sources]
    entries = [_absolute(entry) for entry in named_plugins()]
    entries += [source for source in checked if source not in entries]
    if entries:
        os.environ[PLUGINS_VARIABLE] = os.pathsep.join(entries)
    return checked


def _absolute(entry: str) -> str:
    """An entry of `SUMBENCH_PLUGINS` that is an existing path, made absolute (processes
    started in other folders find it too); other entries unchanged."""
    path = Path(entry).expanduser()
    looks_like_path = entry.endswith(".py") or os.sep in entry
    return str(path.resolve()) if looks_like_path and path.exists() else entry


def import_plugin(source: str) -> ModuleType:
    """Import a plug-in `SUMBENCH_PLUGINS` names (`checked_source`'s forms); a failure is one
    SumbenchError line naming it."""
    source = checked_source(source, PLUGINS_VARIABLE)
    try:
        if not os.path.isabs(source):
            return importlib.import_module(source)
        return _import_path(Path(source))
    except SumbenchError:
        raise
    except Exception as error:  # noqa: BLE001 - a plug-in may raise anything on import
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise SumbenchError(f"plug-in {source} failed to import: {type(error).__name__}"
                            f"{': ' + reason if reason else ''}") from None


def _import_path(path: Path) -> ModuleType:
    """A .py file as module sumbench_plugin_<stem>_<digest of its path>; a package folder
    under its own name (so that its modules import each other as usual)."""
    if path.is_dir():
        name, location, search = path.name, path / "__init__.py", [str(path)]
        other = _installed_location(name)
        if other is not None and other != str(location.resolve()):
            raise SumbenchError(f"plug-in {path}: its name {name!r} is a module already "
                                f"installed ({other}); rename the folder")
    else:
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
        name, location, search = f"sumbench_plugin_{path.stem}_{digest}", path, None
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() != location.resolve():
            raise SumbenchError(f"plug-in {path}: a module named {name!r} is already loaded "
                                f"from elsewhere; rename the folder")
        return loaded
    spec = importlib.util.spec_from_file_location(name, location,
                                                  submodule_search_locations=search)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _installed_location(name: str) -> str | None:
    """Where the importable module `name` lives: its file, or "built-in", "frozen" or
    "namespace package"; None when nothing of that name is importable."""
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    if found.origin in (None, "built-in", "frozen"):
        return found.origin or "namespace package"
    return str(Path(found.origin).resolve())
