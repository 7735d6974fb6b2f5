"""`sumbench leaderboard serve` never outlives itself: however the server ends (Ctrl-C,
SIGTERM, SIGKILL), every worker process it started ends too."""
from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from leaderboard.service.init import initialise

from servers import LeaderboardServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def db(tmp_path_factory, data_dir) -> str:
    path = str(tmp_path_factory.mktemp("serve-stop") / "lb.sqlite")
    initialise(path, gold=str(data_dir), computed_rows=False)
    return path


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # dead, left unreaped by a PID 1
    except psutil.NoSuchProcess:
        return True


def _workers(serve: psutil.Process, count: int, timeout: float = 60) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [child for child in serve.children()
                 if "worker" in child.cmdline() and not _gone(child)]
        if len(found) == count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"serve did not start {count} worker processes")


@pytest.mark.parametrize("how, code", [("SIGINT", 0), ("SIGTERM", 0),
                                       ("SIGKILL", -signal.SIGKILL)])
def test_however_the_server_ends_its_workers_end_with_it(db, how, code):
    server = LeaderboardServer(db, "--workers", "2").start()
    try:
        workers = _workers(psutil.Process(server.process.pid), 2)
        os.kill(server.process.pid, getattr(signal, how))
        assert server.process.wait(timeout=60) == code
        deadline = time.monotonic() + 20
        while not all(_gone(worker) for worker in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [w.pid for w in workers if not _gone(w)] == [], f"workers outlived {how}"
    finally:
        server.stop()
        for worker in psutil.Process().children(recursive=True):  # only if the test failed
            worker.kill()
