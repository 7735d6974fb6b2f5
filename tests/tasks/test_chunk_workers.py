"""Chunks scored in forked children: results in submission order whatever the number of
workers, failures of a child re-raised or named, nothing left running or frozen."""
from __future__ import annotations

import gc
import multiprocessing
import os
import time

import pytest

from tasks.plumbing import chunk_workers
from tasks.plumbing.chunk_workers import ChunkWorkers
from tasks.plumbing.errors import SumbenchError
from tasks.scoring import read_prediction_files, score_files, score_records

needs_fork = pytest.mark.skipif(not chunk_workers.fork_available(),
                                reason="forked workers need the 'fork' start method")


@pytest.fixture(autouse=True)
def nothing_frozen_before():
    """Each test starts with no object frozen: an interpreter or plugin may freeze some at
    start-up (one GPU image froze 375), and ChunkWorkers leaves a caller's freeze alone."""
    gc.unfreeze()


def squares_and_pids(chunk: list[int]) -> list[tuple[int, int]]:
    return [(item * item, os.getpid()) for item in chunk]


def fail_on_seven(chunk: list[int]) -> list[int]:
    if 7 in chunk:
        raise ValueError("seven is not allowed")
    return chunk


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("cannot pickle this")


def raise_unpicklable(chunk: list[int]) -> list[int]:
    raise Unpicklable("a local failure")


def die(chunk: list[int]) -> list[int]:
    os._exit(3)


def fail_first_then_sleep(chunk: list[int]) -> list[int]:
    if chunk[0] == 0:
        raise ValueError("the first chunk fails")
    time.sleep(60)
    return chunk


def submit_all(workers: ChunkWorkers, function, chunks: list[list[int]]) -> list:
    handles = [workers.submit(function, chunk, kind="test") for chunk in chunks]
    return [item for handle in handles for item in handle.result()]


@needs_fork
@pytest.mark.parametrize("count", [1, 2, 3])
def test_results_come_back_in_submission_order(monkeypatch, count):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 2)
    chunks = [list(range(start, start + 5)) for start in range(0, 40, 5)]
    with ChunkWorkers(count, min_chunk=3) as workers:
        results = submit_all(workers, squares_and_pids, chunks)
    assert [square for square, _ in results] == [item * item for item in range(40)]
    pids = {pid for _, pid in results}
    # the first items of a kind run here; the rest of the chunks in children (workers > 1)
    assert results[0][1] == os.getpid()
    assert (len(pids) > 1) == (count > 1)
    assert not multiprocessing.active_children()
    assert gc.get_freeze_count() == 0


@needs_fork
def test_small_chunks_and_one_worker_run_here():
    with ChunkWorkers(2, min_chunk=10) as workers:
        assert {pid for _, pid in submit_all(workers, squares_and_pids, [[1, 2], [3]])} == {
            os.getpid()}
    with ChunkWorkers(1) as workers:
        assert {pid for _, pid in submit_all(workers, squares_and_pids,
                                             [list(range(200))])} == {os.getpid()}


@needs_fork
def test_an_error_in_a_child_is_raised_and_the_others_are_stopped(monkeypatch):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 1)
    chunks = [list(range(start, start + 4)) for start in range(0, 40, 4)]
    with pytest.raises(ValueError, match="seven is not allowed"):
        with ChunkWorkers(2, min_chunk=2) as workers:
            submit_all(workers, fail_on_seven, chunks)
    assert not multiprocessing.active_children()
    assert gc.get_freeze_count() == 0


@needs_fork
def test_a_failure_found_while_waiting_at_the_end_stops_the_children_left(monkeypatch):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 0)
    started = time.monotonic()
    with pytest.raises(ValueError, match="the first chunk fails"):
        with ChunkWorkers(2, min_chunk=1) as workers:
            handles = [workers.submit(fail_first_then_sleep, chunk) for chunk in ([0], [1])]
    assert len(handles) == 2
    assert not multiprocessing.active_children()
    assert time.monotonic() - started < 30  # the sleeping child was stopped, not awaited


@needs_fork
def test_an_exception_that_does_not_pickle_is_named(monkeypatch):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 0)
    with pytest.raises(SumbenchError, match="Unpicklable: a local failure"):
        with ChunkWorkers(2, min_chunk=1) as workers:
            submit_all(workers, raise_unpicklable, [[1, 2]])


@needs_fork
def test_a_dead_child_is_an_error_with_its_exit_code(monkeypatch):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 0)
    with pytest.raises(SumbenchError, match=r"worker process died \(exit code 3\)"):
        with ChunkWorkers(2, min_chunk=1) as workers:
            submit_all(workers, die, [[1, 2]])
    assert not multiprocessing.active_children()


def test_worker_counts_are_checked():
    with pytest.raises(ValueError, match="workers must be >= 1"):
        ChunkWorkers(0)
    assert 1 <= chunk_workers.default_workers() <= 8
    assert chunk_workers.default_workers(limit=1) == 1


@needs_fork
@pytest.mark.slow
def test_score_files_gives_the_same_numbers_with_forked_chunks(usb_fixture_dir, monkeypatch):
    import tasks.scoring as scoring

    paths = sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))
    at_once = score_records(read_prediction_files(paths), bootstrap=10, seed=2)
    monkeypatch.setattr(scoring, "CHUNK_RECORDS", 3)
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 1)
    forked = []
    original = chunk_workers._Forked.__init__

    def counting_init(self, function, chunk):
        forked.append(len(chunk))
        original(self, function, chunk)

    monkeypatch.setattr(chunk_workers._Forked, "__init__", counting_init)
    assert score_files(paths, bootstrap=10, seed=2, workers=2) == at_once
    assert len(forked) > 8
    assert score_files(paths, bootstrap=10, seed=2, workers=1) == at_once


@needs_fork
def test_a_bad_record_read_while_children_run_stops_them(usb_fixture_dir, tmp_path,
                                                         monkeypatch):
    import tasks.scoring as scoring

    monkeypatch.setattr(scoring, "CHUNK_RECORDS", 3)
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 1)
    lines = (usb_fixture_dir / "predictions" / "multisentence_compression.jsonl").read_text(
        ).splitlines()
    path = tmp_path / "comp.jsonl"
    path.write_text("\n".join([*lines, '{"id": "broken"']) + "\n")
    with pytest.raises(scoring.DataError, match=f"{path}:{len(lines) + 1}"):
        score_files([path], workers=2)
    assert not multiprocessing.active_children()
    assert gc.get_freeze_count() == 0


@needs_fork
def test_objects_frozen_by_the_caller_stay_frozen(monkeypatch):
    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 0)
    marker = [object()]
    gc.freeze()
    try:
        assert not any(item is marker for item in gc.get_objects())  # frozen objects are hidden
        with ChunkWorkers(2, min_chunk=1) as workers:
            assert [square for square, _ in submit_all(
                workers, squares_and_pids, [[1, 2], [3]])] == [1, 4, 9]
        assert not any(item is marker for item in gc.get_objects())  # still frozen
    finally:
        gc.unfreeze()


INTERRUPTED_SCRIPT = """
import os, sys, time
from pathlib import Path
from tasks.plumbing import chunk_workers
from tasks.plumbing.chunk_workers import ChunkWorkers

chunk_workers.WARM_ITEMS = 0  # every chunk in a child
folder = Path(sys.argv[1])

def slow(chunk):
    (folder / "children" / str(os.getpid())).write_text("running")
    time.sleep(3600)  # only the parent's stopping ends it
    return chunk

try:
    with ChunkWorkers(2) as workers:
        handles = [workers.submit(slow, [1, 2]) for _ in range(2)]
        (folder / "parent-waiting").write_text("both children started")
        [handle.result() for handle in handles]
except KeyboardInterrupt:
    print("parent interrupted", file=sys.stderr)
    sys.exit(130)
"""


@needs_fork
def test_ctrl_c_reaches_the_parent_only_and_the_children_are_stopped(tmp_path):
    """Ctrl-C is sent only once both children are running and the parent waits on them (the
    script says so in files), so the outcome does not hang on the machine's load."""
    import signal
    import subprocess
    import sys

    (tmp_path / "children").mkdir()
    process = subprocess.Popen([sys.executable, "-c", INTERRUPTED_SCRIPT, str(tmp_path)],
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               cwd=str(chunk_workers.__file__).rsplit("/tasks/", 1)[0])
    try:
        deadline = time.monotonic() + 120
        while not ((tmp_path / "parent-waiting").exists()
                   and len(list((tmp_path / "children").iterdir())) == 2):
            assert process.poll() is None and time.monotonic() < deadline, \
                "the script did not start its two children"
            time.sleep(0.02)
        children = [int(path.name) for path in (tmp_path / "children").iterdir()]
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130 and err.strip() == "parent interrupted", err
    for pid in children:  # the parent joined them before it exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def sigint_ignored(chunk: list[int]) -> list[bool]:
    import signal

    return [signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL for _ in chunk]


@needs_fork
def test_children_ignore_ctrl_c_and_the_parent_keeps_its_handler(monkeypatch):
    import signal

    from benchmark.cli import sigterm_as_interrupt

    monkeypatch.setattr(chunk_workers, "WARM_ITEMS", 0)
    with sigterm_as_interrupt(), ChunkWorkers(2) as workers:  # as under `sumbench`
        assert workers.submit(sigint_ignored, [1, 2]).result() == [True, True]
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
