"""Registries fill once per process, and a thread never sees one half-filled (a server's
request threads ask for tasks at the same moment)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tasks.plumbing.plugins import Once

from servers import child_env

RACE = """
import threading
from tasks import get_task
from tasks.metrics.evaluators import load_evaluators
barrier, failures = threading.Barrier(8), []
def ask():
    barrier.wait()
    try:
        get_task("abstractive_summarization")
        load_evaluators().get("rouge1_recall")
    except Exception as error:
        failures.append(repr(error))
threads = [threading.Thread(target=ask) for _ in range(8)]
[thread.start() for thread in threads]
[thread.join() for thread in threads]
print(failures)
"""


@pytest.mark.slow
def test_threads_asking_at_once_all_find_the_tasks():
    completed = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True,
                               timeout=120, env=child_env())
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"


def test_a_second_thread_waits_for_the_first_load():
    calls, seen = [], []

    def slow_load():
        calls.append(1)
        time.sleep(0.2)
        seen.append("filled")

    once = Once(slow_load)
    first = threading.Thread(target=once)
    first.start()
    time.sleep(0.05)
    once()  # must block until the first load has finished
    assert seen == ["filled"]
    first.join()
    once()
    assert calls == [1]


def test_a_load_asking_for_itself_returns_and_a_failed_load_runs_again():
    calls = []

    def load():
        calls.append(1)
        once()  # re-entry from inside the load: returns at once
        if len(calls) == 1:
            raise RuntimeError("broken the first time")

    once = Once(load)
    with pytest.raises(RuntimeError):
        once()
    once()
    once()
    assert calls == [1, 1]
