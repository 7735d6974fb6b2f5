"""The process that evaluates a submitted model, as a worker runs it: its environment (none
of the worker's credentials, offline), its death with the worker, its wall-clock and memory
limits, and its end when its evaluation is stopped (the submission deleted or hidden); it runs
in a process group of its own, which is killed whole, and the worker waits until the process
is gone (leaderboard.service.evaluation starts it; evaluate_child is its program)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tasks.plumbing.errors import SumbenchError

POLL_SECONDS = 0.5


class EvaluationFailed(SumbenchError):
    """The model could not be evaluated: the reason a participant reads; `cost`: what the
    evaluation spent up to the failure, when it ran (`peak_rss_bytes`: the most resident
    memory the worker polled before it ended the process)."""

    def __init__(self, reason: str, *, cost: dict | None = None) -> None:
        super().__init__(reason)
        self.cost, self.peak_rss_bytes = cost, 0


class EvaluationStopped(EvaluationFailed):
    """The evaluation was stopped (its submission deleted or hidden): the reason."""


#: what the evaluation process may see of the worker's environment (no credentials, no
#: database address; the operator's task plug-ins, so that their tasks evaluate); it runs
#: offline
CHILD_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
                     "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                     "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TOKENIZERS_PARALLELISM",
                     "SUMBENCH_PLUGINS")


def child_environment(scratch: Path) -> dict[str, str]:
    """The worker's harmless variables; offline, with an empty Hugging Face home of its own
    (no cached model of the worker's can stand in for a name)."""
    import os

    kept = {key: os.environ[key] for key in CHILD_ENVIRONMENT if key in os.environ}
    code = str(Path(__file__).resolve().parents[2])  # sumbench's own, installed or not
    path = os.pathsep.join(filter(None, [code, kept.get("PYTHONPATH")]))
    return {**kept, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(scratch / "hf-home")}


def die_with_parent(signal_number: int | None = None) -> None:
    """Run in a child process before it starts: ask Linux to send it `signal_number`
    (default SIGKILL: an evaluation process) when its parent (the worker; the server, for
    its workers) dies; set before the program runs, so no death slips in between."""
    import signal

    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(  # PR_SET_PDEATHSIG
            1, signal_number or signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the worker's lease still covers it
        pass


def supervise(command: list[str], seconds: int, memory_bytes: int, log: Path, scratch: Path,
              stop: Callable[[], str | None] = lambda: None) -> tuple[int, int]:
    """Run `command` in `scratch` (its output to `log`), killing it past `seconds`, when its
    resident memory (with its children's) passes `memory_bytes`, or when `stop()` (polled)
    gives a reason; (its exit status, the most resident memory polled), or EvaluationFailed
    naming the limit (EvaluationStopped: the reason), raised once the process is gone."""
    import psutil

    with open(log, "wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                   cwd=scratch, env=child_environment(scratch),
                                   start_new_session=True, preexec_fn=die_with_parent)
        deadline = time.monotonic() + seconds
        peak = 0
        try:
            while process.poll() is None:
                reason = stop()
                if reason is not None:
                    raise EvaluationStopped(reason)
                if time.monotonic() > deadline:
                    raise EvaluationFailed(f"the evaluation timed out after {seconds} s (this "
                                           f"board's limit for one evaluation)")
                peak = max(peak, resident_bytes(psutil, process.pid))
                if peak > memory_bytes:
                    raise EvaluationFailed(f"the evaluation ran out of memory (over "
                                           f"{memory_bytes} bytes resident)")
                with contextlib.suppress(subprocess.TimeoutExpired):  # back when it ends
                    process.wait(POLL_SECONDS)
            return process.returncode, peak
        except EvaluationFailed as error:
            error.peak_rss_bytes = peak
            raise
        finally:
            end_process_group(psutil, process)


def end_process_group(psutil, process: subprocess.Popen, grace: float = 10.0) -> None:
    """Kill the process's group (the process leads it) and whatever it started, and wait until
    the process is gone (reaped) and its descendants too; a descendant still there after
    `grace` seconds is named in an error."""
    descendants = []
    if process.poll() is None:
        try:
            descendants = psutil.Process(process.pid).children(recursive=True)
        except psutil.Error:  # it ended meanwhile
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    for child in descendants:  # one that left the group too
        try:
            child.kill()
        except psutil.Error:
            pass
    deadline = time.monotonic() + grace
    while alive := [child for child in descendants if not gone(psutil, child)]:
        if time.monotonic() > deadline:
            raise OSError(f"processes {[child.pid for child in alive]} of the evaluation "
                          f"process {process.pid} outlived SIGKILL for {grace} s")
        time.sleep(0.05)


def gone(psutil, process) -> bool:
    """Whether a process (not the worker's child: init reaps it) has ended."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:  # no such process (psutil also checks its start time)
        return True


def resident_bytes(psutil, pid: int) -> int:
    try:
        parent = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])
    except psutil.Error:  # it ended between the poll and now
        return 0
