"""Batches run side by side on CPU worker threads (trainers.cpu_workers): the same outputs in
the same order, each worker with its share of torch's threads, failures raised in the caller
(presence backends with one worker or two: tests/leaderboard/test_presence_backends.py)."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from trainers.cpu_workers import DEFAULT_CPU_WORKERS, auto_workers, map_batches


@pytest.fixture
def two_threads():
    """torch with 2 intra-op threads for the test, the caller's count put back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_auto_workers_runs_two_batches_at_once_on_a_cpu_only(two_threads):
    assert auto_workers("cpu") == DEFAULT_CPU_WORKERS == 2
    assert auto_workers("cuda") == auto_workers("cuda:1") == auto_workers("mps") == 1
    assert auto_workers("cpu", 3) == 3 and auto_workers("cuda", 2) == 2
    torch.set_num_threads(1)
    assert auto_workers("cpu") == 1  # one core's worth of threads: no second worker
    with pytest.raises(ValueError, match="workers must be an integer >= 1, got 0"):
        auto_workers("cpu", 0)


def test_map_batches_keeps_order_and_splits_the_threads(two_threads):
    seen = []

    def work(batch):
        seen.append((threading.current_thread().name, torch.get_num_threads(),
                     torch.is_inference_mode_enabled()))
        return [value * value for value in batch]

    batches = [[i, i + 1] for i in range(0, 40, 2)]
    assert map_batches(work, batches, workers=2) == [[i * i, (i + 1) ** 2]
                                                     for i in range(0, 40, 2)]
    assert {name.startswith("sumbench-batch") for name, _, _ in seen} == {True}
    assert {threads for _, threads, _ in seen} == {1}  # 2 threads shared by 2 workers
    assert {inference for _, _, inference in seen} == {True}
    assert torch.get_num_threads() == 2  # the caller's own count is unchanged
    seen.clear()
    assert map_batches(work, batches, workers=1) == map_batches(work, batches, workers=4)
    assert seen[0][0] == threading.current_thread().name  # one worker: the caller's thread


def test_a_failing_batch_stops_the_rest_whichever_it_is(two_threads):
    """A failure in batch 1 while batch 0 is still running: the other worker starts no more
    batches, and the error reaches the caller once batch 0 ends."""
    started = []

    def work(batch):
        started.append(batch)
        if batch == 1:
            raise ValueError("batch 1 is bad")
        time.sleep(0.3 if batch == 0 else 0.01)
        return batch

    with pytest.raises(ValueError, match="batch 1 is bad"):
        map_batches(work, range(50), workers=2)
    assert len(started) < 5  # not the 48 batches after it
    assert torch.get_num_threads() == 2


def test_workers_must_be_a_whole_number(two_threads):
    for bad in (0, -1, 2.7, "3", True):
        with pytest.raises(ValueError, match="workers must be an integer >= 1"):
            auto_workers("cpu", bad)


def test_a_lone_batch_runs_with_a_workers_share(two_threads):
    """Every batch gets the same thread share however many batches a call has, so a batch's
    numbers never depend on the call it came in."""
    assert map_batches(lambda batch: torch.get_num_threads(), [0], workers=2) == [1]
    assert map_batches(lambda batch: torch.get_num_threads(), [0, 1, 2], workers=2) == [1] * 3
