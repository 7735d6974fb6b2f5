"""The evaluation process's supervision (leaderboard.service.evaluation_process.supervise) on
plain Python children: its exit status as soon as it ends, its limits, and a stop."""
from __future__ import annotations

import sys
import time

import pytest

from leaderboard.service import evaluation_process
from leaderboard.service.evaluation_process import EvaluationFailed, EvaluationStopped, supervise


def _supervise(tmp_path, code: str, **options):
    return supervise([sys.executable, "-c", code], options.pop("seconds", 60),
                     options.pop("memory_bytes", 1 << 40), tmp_path / "log.txt", tmp_path,
                     **options)


def test_the_worker_has_the_status_when_the_child_ends_not_at_its_next_poll(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(evaluation_process, "POLL_SECONDS", 120.0)
    started = time.monotonic()
    code, _ = _supervise(tmp_path, "import sys; print('done'); sys.exit(3)")
    assert (code, time.monotonic() - started < 60) == (3, True)
    assert (tmp_path / "log.txt").read_text().strip() == "done"


@pytest.mark.parametrize("options, error, message", [
    ({"seconds": 1}, EvaluationFailed, "the evaluation timed out after 1 s"),
    ({"memory_bytes": 1}, EvaluationFailed, "the evaluation ran out of memory (over 1 bytes"),
    ({"stop": lambda: "its submission was deleted"}, EvaluationStopped,
     "its submission was deleted"),
])
def test_a_child_past_a_limit_or_stopped_is_ended_naming_why(tmp_path, monkeypatch, options,
                                                             error, message):
    monkeypatch.setattr(evaluation_process, "POLL_SECONDS", 0.05)
    with pytest.raises(error) as caught:
        _supervise(tmp_path, "import time; time.sleep(600)", **options)
    assert str(caught.value).startswith(message)
