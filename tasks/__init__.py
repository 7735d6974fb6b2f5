"""Benchmark tasks: a registry of small task classes (data, formats, parser, metrics).

The built-in tasks register when first asked for, and so do tasks of installed packages
(`sumbench.tasks` entry points, tasks.plumbing.plugins); `task_source(name)` names the package a
task comes from. Importing `tasks` makes `nltk.word_tokenize` and `nltk.sent_tokenize` work
offline with NLTK's English Punkt model (tasks.plumbing.punkt).

Plug-ins named by path or module (`--plugins`, `SUMBENCH_PLUGINS`; tasks.plumbing.plugins)
register every whole Task class with a `name` they define, on first use of the registry and
whenever the variable names one more."""
from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Sequence

from tasks.base import Task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.plugins import (
    Once,
    add_named_plugins,
    import_plugin,
    load_plugins,
    named_plugins,
)
from tasks.plumbing.punkt import install_english_punkt
from tasks.plumbing.registry import TASKS

install_english_punkt()

#: modules whose import registers the built-in tasks
BUILTIN_TASK_MODULES = ("tasks.usb", "tasks.qapyramid.qa_generation",
                        "tasks.qapyramid.presence_detection")
#: what `all` means where commands take task lists
DEFAULT_SUITE = "usb"
#: task name -> the package it comes from (built-ins: sumbench)
TASK_SOURCES: dict[str, str] = {}


def _register_tasks() -> None:
    for module in BUILTIN_TASK_MODULES:
        importlib.import_module(module)
    TASK_SOURCES.update(dict.fromkeys(TASKS.names(), "sumbench"))
    TASK_SOURCES.update(load_plugins("sumbench.tasks", register_task_class))


#: registers the built-in and installed plug-in tasks once, whichever thread asks first
_load_installed_tasks = Once(_register_tasks)
#: the named plug-ins loaded so far, and the lock of loading more
_NAMED_LOADED: set[str] = set()
_NAMED_LOCK = threading.RLock()


def _load_all_tasks() -> None:
    """Every task: built-ins and installed plug-ins once, then the named plug-ins not loaded
    yet (`SUMBENCH_PLUGINS`; a failure is a SumbenchError naming the plug-in)."""
    _load_installed_tasks()
    with _NAMED_LOCK:
        for source in named_plugins():
            if source not in _NAMED_LOADED:
                _register_module_tasks(source, import_plugin(source))
                _NAMED_LOADED.add(source)


def use_plugins(sources: Sequence[str]) -> None:
    """Load the plug-ins `--plugins` names now (an error names the one that fails) and add
    them to `SUMBENCH_PLUGINS`, so that the processes this one starts load them too."""
    add_named_plugins(sources)
    _load_all_tasks()


def _register_module_tasks(source: str, module) -> list[str]:
    """Register the whole Task classes with a `name` that `module` (or a module of its
    package) defines, all or none: a name already taken (or taken twice) is a SumbenchError
    naming the plug-in."""
    prefix = module.__name__
    found = list(dict.fromkeys(
        value for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Task) and
        (value.__module__ == prefix or value.__module__.startswith(prefix + ".")) and
        not inspect.isabstract(value) and getattr(value, "name", None)))
    names = [key for value in found for key in (value.name, *getattr(value, "aliases", ()))]
    taken = sorted({key for key in names if key in TASKS or
                    [other.lower() for other in names].count(key.lower()) > 1})
    if taken:
        raise SumbenchError(f"plug-in {source}: task name(s) already registered or given "
                            f"twice: {', '.join(taken)}")
    for value in found:
        try:
            register_task_class(value.name, value)
        except (SumbenchError, TypeError, ValueError) as error:
            raise SumbenchError(f"plug-in {source}: {error}") from None
        TASK_SOURCES[value.name] = source
    return [value.name for value in found]


def register_task_class(name: str, task_class) -> None:
    """Register a plug-in's Task class under its `name` (and its `aliases`); the entry point
    must carry the same name, and the class must be a whole task (no abstract method left)."""
    import inspect

    if not (isinstance(task_class, type) and issubclass(task_class, Task)):
        raise TypeError(f"expected a Task class, got {task_class!r}")
    if inspect.isabstract(task_class):
        missing = ", ".join(sorted(task_class.__abstractmethods__))
        raise TypeError(f"{task_class.__name__} leaves abstract: {missing}")
    if getattr(task_class, "name", None) != name:
        raise ValueError(f"the entry point is named {name!r}, the task "
                         f"{getattr(task_class, 'name', None)!r}")
    TASKS.register(name, task_class, tuple(getattr(task_class, "aliases", ())))


def task_source(name: str) -> str:
    """The package a registered task comes from."""
    _load_all_tasks()
    return TASK_SOURCES.get(TASKS.canonical_name(name), "unknown")


def get_task(name: str, **options):
    """An instance of the task registered as `name` (or an alias); unknown names suggest matches."""
    _load_all_tasks()
    return TASKS.get(name)(**options)


def task_names(suite: str | None = None) -> list[str]:
    """Registered task names, sorted; only those of one suite (e.g. "usb") when given."""
    _load_all_tasks()
    if suite is None:
        return TASKS.names()
    return [name for name in TASKS.names() if TASKS.get(name).suite == suite]


def canonical_task_name(name: str) -> str:
    _load_all_tasks()
    return TASKS.canonical_name(name)


#: the task-list word for every task of `DEFAULT_SUITE`
ALL_TASKS = "all"


def _task_list_parts(names: Sequence[str]) -> list[str]:
    return [part.strip() for name in names for part in name.split(",") if part.strip()]


def means_all_tasks(names: Sequence[str]) -> bool:
    """Whether a task list is the word "all" alone (any case, commas allowed)."""
    return [part.lower() for part in _task_list_parts(names)] == [ALL_TASKS]


def parse_task_list(names: Sequence[str]) -> tuple[str, ...]:
    """Canonical task names from names or aliases (any case; "T1,T2" allowed), or "all"
    alone for every task of `DEFAULT_SUITE`. An empty list, a task listed twice, or "all"
    mixed with names is a SumbenchError; an unknown name an UnknownNameError."""
    parts = _task_list_parts(names)
    if not parts:
        raise SumbenchError("no tasks given")
    if means_all_tasks(parts):
        return tuple(task_names(DEFAULT_SUITE))
    if any(part.lower() == ALL_TASKS for part in parts):
        raise SumbenchError(f"'all' stands alone: give it or task names, not both "
                            f"(got {', '.join(parts)})")
    canonical = [canonical_task_name(part) for part in parts]
    repeated = [name for name in dict.fromkeys(canonical) if canonical.count(name) > 1]
    if repeated:
        raise SumbenchError(f"a task is listed twice: {', '.join(repeated)} (in "
                            f"{', '.join(parts)})")
    return tuple(canonical)
