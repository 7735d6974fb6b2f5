"""The job table: claiming work safely across processes, leases and heartbeats, stopping.

A worker claims a queued job, or a running one whose lease expired (its worker died), in a
transaction that locks the row: `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, and on
SQLite a transaction that takes the database write lock first (`BEGIN IMMEDIATE`), so two
workers never claim the same job. The queue interleaves users (`user_turns`): among the
claimable jobs of a kind, those of users with none of that kind running come first, then
those of the user whose last one ended longest ago (or never), then the oldest; so one user's
backlog puts another user's first job behind at most one of theirs. While it works, a
heartbeat thread extends the lease. A job that failed `MAX_ATTEMPTS` times is marked failed
with its reason.

Deleting or hiding a submission stops its unfinished "evaluate" job (`request_stop`): a
queued one ends at once; a running one is marked "stopping", and its worker, which polls for
it (`stop_requested`), ends the model's process and only then the job.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.orm import aliased

from leaderboard.service.db import Database, Job, Submission, utcnow

MAX_ATTEMPTS = 3
JOB_KINDS = ("evaluate", "score", "analyse")
#: the states of a job a worker holds (a "stopping" one: its worker is ending it)
HELD_STATES = ("running", "stopping")


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    kind: str
    submission_id: int
    attempts: int


def claim_job(database: Database, worker: str, lease_seconds: float,
              kinds: Sequence[str] = JOB_KINDS) -> ClaimedJob | None:
    """Claim one job (users in turn, see `user_turns`) or return None when there is nothing
    to do. A "stopping" job whose worker died stays "stopping": its runner ends it."""
    now = time.time()
    claimable = and_(Job.kind.in_(list(kinds)), or_(
        Job.state == "queued", and_(Job.state.in_(HELD_STATES), Job.lease_until < now)))
    turns = user_turns(kinds, now)
    with database.write_session() as session:
        if session.scalar(select(Job.id).where(claimable).limit(1)) is None:
            return None  # idle: the users' turns are not read
        job = session.scalars(
            select(Job).join(Submission, Submission.id == Job.submission_id)
            .join(turns, and_(turns.c.user_id == Submission.user_id, turns.c.kind == Job.kind),
                  isouter=True)  # every job has its turn; outer: SQLite reads the jobs first
            .where(claimable)
            .order_by(turns.c.busy, turns.c.ended.asc().nulls_first(), Job.id).limit(1)
            .with_for_update(skip_locked=True, of=Job)).first()
        if job is None:
            return None
        job.state = "stopping" if job.state == "stopping" else "running"
        job.worker, job.lease_until = worker, now + lease_seconds
        job.attempts += 1
        return ClaimedJob(job.id, job.kind, job.submission_id, job.attempts)


def user_turns(kinds: Sequence[str], now: float):
    """Per user and job kind: `busy` (1 when a worker holds one of them under a live lease)
    and `ended` (when the last one ended; None: never), read in one pass over the jobs (on
    PostgreSQL a MATERIALIZED CTE: once, whatever the planner guesses of the rows). Jobs are
    claimed by (busy, ended with never first, job id): a user's own keep their order."""
    job, owner = aliased(Job), aliased(Submission)
    held = and_(job.state.in_(HELD_STATES), job.lease_until >= now)
    return (select(owner.user_id, job.kind, func.max(case((held, 1), else_=0)).label("busy"),
                   func.max(job.finished_at).label("ended"))
            .join(owner, owner.id == job.submission_id).where(job.kind.in_(list(kinds)))
            .group_by(owner.user_id, job.kind).cte("turns")
            .prefix_with("MATERIALIZED", dialect="postgresql"))


def extend_lease(database: Database, job_id: int, worker: str, lease_seconds: float) -> bool:
    """Push the lease of a job this worker still holds; False when it lost the job."""
    with database.write_session() as session:
        job = session.get(Job, job_id)
        if job is None or job.worker != worker or job.state not in HELD_STATES:
            return False
        job.lease_until = time.time() + lease_seconds
        return True


class Heartbeat:
    """Extends a claimed job's lease every lease/3 seconds until stopped."""

    def __init__(self, database: Database, job: ClaimedJob, worker: str, lease_seconds: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, args=(database, job.id, worker, lease_seconds), daemon=True)

    def _beat(self, database, job_id, worker, lease_seconds) -> None:
        while not self._stop.wait(lease_seconds / 3):
            if not extend_lease(database, job_id, worker, lease_seconds):
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def finish(session, job_id: int, state: str = "done", error: str | None = None) -> None:
    job = session.get(Job, job_id)
    job.state, job.error, job.finished_at = state, error, utcnow()


def fail_or_retry(database: Database, job: ClaimedJob, reason: str) -> bool:
    """After an unexpected error: requeue the job, or (at MAX_ATTEMPTS) mark it and its
    submission failed with the reason. Returns True when it gave up."""
    with database.write_session() as session:
        row = session.get(Job, job.id)
        if row.state == "stopping":  # asked to stop: it ends, with why, never again
            fail_job(session, job.id, job.submission_id, row.error)
            return True
        if job.attempts >= MAX_ATTEMPTS:
            finish(session, job.id, "failed", reason)
            submission = session.get(Submission, job.submission_id)
            if job.kind in ("evaluate", "score") and \
                    submission.status in ("queued", "evaluating", "scoring"):
                submission.status = "failed"
                submission.errors = json.dumps([{"message": reason}])
            return True
        row.state, row.lease_until, row.error = "queued", 0.0, reason
        return False


def fail_job(session, job_id: int, submission_id: int, reason: str) -> None:
    """End the job and its submission "failed" with the reason."""
    submission = session.get(Submission, submission_id)
    submission.status = "failed"
    submission.errors = json.dumps([{"file": None, "line": None, "field": None,
                                     "message": reason}])
    finish(session, job_id, "failed", reason)


#: why an evaluation was stopped, by what its owner (or an admin) did to its submission
STOP_REASONS = {
    "delete": "the evaluation was stopped: its submission was deleted",
    "hide": "the evaluation was stopped: its submission was hidden before the evaluation "
            "ended (submit the model again to evaluate it)"}


def request_stop(session, submission_id: int, reason: str) -> None:
    """Stop the submission's unfinished "evaluate" job: a queued one ends "failed" with the
    reason at once, and so does the submission; a held one is marked "stopping" with it (its
    worker ends the model's process, then the job, and until then the user's slot stays
    taken). The submission's row is locked before the jobs', as workers lock them."""
    session.execute(select(Submission.id).where(Submission.id == submission_id)
                    .with_for_update())
    for job in session.scalars(select(Job).where(
            Job.submission_id == submission_id, Job.kind == "evaluate",
            Job.state.in_(("queued", "running"))).with_for_update()):
        if job.state == "queued":
            fail_job(session, job.id, submission_id, reason)
        else:
            job.state, job.error = "stopping", reason


def stop_requested(database: Database, job_id: int) -> str | None:
    """Why the job is to stop (it is "stopping"), or None."""
    with database.session() as session:
        state, error = session.execute(select(Job.state, Job.error)
                                       .where(Job.id == job_id)).one()
    return error if state == "stopping" else None
