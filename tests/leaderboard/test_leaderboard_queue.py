"""The job queue on SQLite and PostgreSQL: users take turns (one user's backlog puts another
user's first job behind at most one of theirs, a user's own jobs keep their order), and an
evaluation deleted or hidden while it runs is stopped, its slot held until its worker ends it
(leaderboard.service.jobs). Real databases, the service's own functions; the worker and the
model's process are tested in test_leaderboard_compute.py."""
from __future__ import annotations

import contextlib
import shutil

import pytest

from leaderboard.service.auth import ensure_user
from leaderboard.service.compute import TooManyEvaluations, check_evaluation_slots
from leaderboard.service.db import Database, Job, Submission
from leaderboard.service.evaluation import EvaluateOptions, evaluate_job, fail
from leaderboard.service.jobs import (
    STOP_REASONS,
    claim_job,
    fail_or_retry,
    finish,
    stop_requested,
)
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import delete, set_hidden

from lb_helpers import make_database

LEASE = 60.0


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path, data_dir):
    """A migrated database with one task's gold (deleting rebuilds the board) and users a, b
    and c."""
    from leaderboard.service.init import initialise

    shutil.copytree(data_dir / "all" / "fixing_factuality",
                    tmp_path / "gold" / "all" / "fixing_factuality")
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = make_database(tmp_path / "lb.sqlite", usb_data=tmp_path / "gold",
                                computed_rows=False)
        else:
            from servers import fresh_database

            url = stack.enter_context(fresh_database(request.getfixturevalue(
                "postgres_server")))
            initialise(url, gold=str(tmp_path / "gold"), computed_rows=False)
        database = Database(url)
        stack.callback(database.dispose)
        with database.write_session() as session:
            for name in "abc":
                ensure_user(session, name)
        yield database


def _user(database, name: str):
    with database.session() as session:
        return ensure_user(session, name)


def _evaluation(database, name: str) -> int:
    """A queued evaluation of user `name` with its evaluate job; its submission id."""
    with database.write_session() as session:
        submission = Submission(user_id=ensure_user(session, name).id, kind="evaluation",
                                track="usb", board="all", model=f"{name} model",
                                status="queued", evaluation="{}")
        session.add(submission)
        session.flush()
        session.add(Job(submission_id=submission.id, kind="evaluate"))
        return submission.id


def _claim(database, worker: str = "w"):
    return claim_job(database, worker, LEASE, ("evaluate",))


def _done(database, job) -> None:
    with database.write_session() as session:
        finish(session, job.id)


def test_users_take_turns_and_keep_their_own_order(database):
    a = [_evaluation(database, "a") for _ in range(3)]
    b = _evaluation(database, "b")
    claimed = []
    for _ in range(2):  # one worker: each job ends before the next is claimed
        claimed.append((job := _claim(database)).submission_id)
        _done(database, job)
    c = _evaluation(database, "c")  # a newcomer goes before a's backlog too
    while (job := _claim(database)) is not None:
        claimed.append(job.submission_id)
        _done(database, job)
    assert claimed == [a[0], b, c, a[1], a[2]]
    a = _evaluation(database, "a")
    b = [_evaluation(database, "b") for _ in range(2)]
    # two workers at once: b's last evaluation ended before a's, so b goes first, but b's
    # next one waits while b has one running
    assert [_claim(database, worker).submission_id for worker in ("w1", "w2", "w3")] == [
        b[0], a, b[1]]


def _slots_left(database, name: str) -> bool:
    """Whether user `name` may submit one more evaluation (the limit is 1)."""
    settings = load_settings(database).with_changes({"evaluations_per_user": "1"})
    with database.session() as session:
        try:
            check_evaluation_slots(session, settings, ensure_user(session, name))
            return True
        except TooManyEvaluations:
            return False


def _stop(database, action: str, submission: int, user) -> None:
    if action == "delete":
        delete(database, submission, user)
    else:
        set_hidden(database, submission, user, True)


@pytest.mark.parametrize("action", ["delete", "hide"])
def test_a_stopped_evaluation_holds_its_slot_until_its_worker_ends_it(database, action):
    running = _evaluation(database, "a")
    job = _claim(database)
    user = _user(database, "a")
    _stop(database, action, running, user)
    with database.session() as session:
        row = session.get(Job, job.id)
        assert (row.state, row.error) == ("stopping", STOP_REASONS[action])
    assert stop_requested(database, job.id) == STOP_REASONS[action]
    assert not _slots_left(database, "a")  # its process may still run
    fail(database, job, STOP_REASONS[action])  # what its worker does once the process is gone
    assert _slots_left(database, "a")
    with database.session() as session:
        assert session.get(Submission, running).status == "failed"
    queued = _evaluation(database, "a")  # one that never ran ends at once
    _stop(database, action, queued, user)
    assert _slots_left(database, "a") and _claim(database) is None


def test_a_stopping_evaluation_whose_worker_died_is_ended_not_run(database):
    running = _evaluation(database, "a")
    job = _claim(database)
    delete(database, running, _user(database, "a"))
    with database.write_session() as session:
        session.get(Job, job.id).lease_until = 0.0  # its worker died: the lease lapsed
    taken = _claim(database, "taker")
    assert taken.id == job.id
    evaluate_job(database, taken, EvaluateOptions())  # ends it before fetching anything
    with database.session() as session:
        row = session.get(Job, job.id)
        assert (row.state, row.error) == ("failed", STOP_REASONS["delete"])
    assert _slots_left(database, "a")
    again = _evaluation(database, "a")  # an unexpected error while stopping: not retried
    job = _claim(database)
    set_hidden(database, again, _user(database, "a"), True)
    assert fail_or_retry(database, job, "internal error (KeyError) while evaluating")
    with database.session() as session:
        assert session.get(Job, job.id).state == "failed"
        assert session.get(Submission, again).errors.count(STOP_REASONS["hide"]) == 1
