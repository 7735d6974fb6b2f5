"""Run a function over chunks of work in forked child processes, results in submission order.

Used by streaming scoring (`tasks.scoring.score_files`): the parent keeps reading and
validating records while children score full chunks. A child is forked with its chunk, so
nothing is pickled on the way in (only the small result comes back through a pipe); at most
`workers` children run at once, and results are taken in the order the chunks were submitted,
so the numbers never depend on the number of workers. Where `fork` is not available (Windows,
or `workers` 1) every chunk runs in the parent.

`function(chunk)` must give one result per item, as a list (a chunk may be split). Two things
keep forked children as fast as the parent: the first items of each kind of work run in the
parent (their imports and caches are then inherited instead of rebuilt in every child), and
the parent's objects are frozen out of the garbage collector before forking (a collection in
the child would otherwise touch, and so copy, every page of the parent's heap).
"""
from __future__ import annotations

import gc
import multiprocessing
import signal
from collections import deque
from collections.abc import Callable
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.provenance import available_cpus

#: items of the first chunk of each kind run in the parent (warming imports and caches)
WARM_ITEMS = 64


def default_workers(limit: int = 8) -> int:
    """The CPUs this process may use (its affinity where known), at most `limit`."""
    return max(1, min(limit, available_cpus()))


def fork_available() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class _Done:
    """A result computed in the parent."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


def _child(function: Callable[[Any], Any], chunk: Any, writer) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it and stops the children
    # (each would otherwise print its own KeyboardInterrupt traceback); SIGTERM, which the
    # parent may turn into an exception (benchmark.cli), simply ends a child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.disable()  # a short life: reference counting frees what it makes
    try:
        value = function(chunk)
    except BaseException as error:  # noqa: BLE001 - the parent re-raises it
        try:
            writer.send(("error", error))
        except Exception:  # an exception that does not pickle
            writer.send(("error", SumbenchError(f"{type(error).__name__}: {error}")))
    else:
        writer.send(("ok", value))
    finally:
        writer.close()


class _Joined:
    """The results of consecutive pieces of one chunk, concatenated."""

    def __init__(self, *parts) -> None:
        self.parts = parts

    def result(self) -> list:
        return [item for part in self.parts for item in part.result()]


class _Forked:
    """A chunk running in a child; `result()` waits for it (once). The caller freezes the
    garbage collector's objects first."""

    def __init__(self, function: Callable[[Any], Any], chunk: Any) -> None:
        context = multiprocessing.get_context("fork")
        self._reader, writer = context.Pipe(duplex=False)
        self._process = context.Process(target=_child, args=(function, chunk, writer),
                                        daemon=True)
        self._process.start()
        writer.close()
        self._outcome: tuple[str, Any] | None = None

    def result(self) -> Any:
        if self._outcome is None:
            try:
                self._outcome = self._reader.recv()
            except EOFError:
                self._process.join()
                raise SumbenchError(f"a scoring worker process died (exit code "
                                    f"{self._process.exitcode})") from None
            finally:
                self._reader.close()
            self._process.join()
        kind, value = self._outcome
        if kind == "error":
            raise value
        return value

    def stop(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._reader.close()


class ChunkWorkers:
    """`submit(function, chunk)` returns a handle whose `result()` is `function(chunk)`.
    Chunks of at least `min_chunk` items go to forked children when `workers` > 1; the first
    WARM_ITEMS items of each `kind` (any hashable naming the work) run here first, warming
    what the children inherit. Use as a context manager so that unfinished children are stopped
    on errors and the frozen objects are handed back to the garbage collector."""

    def __init__(self, workers: int = 1, min_chunk: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers if fork_available() else 1
        self.min_chunk = min_chunk
        self._running: deque[_Forked] = deque()
        self._warm: set = set()
        self._froze = False  # whether this object froze the collector (and so unfreezes it)

    def submit(self, function: Callable[[Any], list], chunk: list, kind: Any = None):
        if self.workers <= 1 or len(chunk) < self.min_chunk:
            return _Done(function(chunk))
        if WARM_ITEMS and kind not in self._warm:
            self._warm.add(kind)
            warm, rest = _Done(function(chunk[:WARM_ITEMS])), chunk[WARM_ITEMS:]
            return _Joined(warm, self._fork(function, rest)) if rest else warm
        return self._fork(function, chunk)

    def _fork(self, function: Callable[[Any], list], chunk: list) -> _Forked:
        while len(self._running) > self.workers:  # one spare: this process reads on
            self._running.popleft().result()  # keeps its outcome for the caller
        if not self._froze and gc.get_freeze_count() == 0:
            self._froze = True  # a caller's own frozen objects stay frozen
        if self._froze:
            gc.freeze()
        handle = _Forked(function, chunk)
        self._running.append(handle)
        return handle

    def __enter__(self) -> ChunkWorkers:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if kind is None:  # wait for every child in order; the first failure is raised
                while self._running:
                    self._running[0].result()
                    self._running.popleft()
        finally:  # after an error (here or in the block) the children left are stopped
            while self._running:
                self._running.popleft().stop()
            if self._froze:
                gc.unfreeze()
