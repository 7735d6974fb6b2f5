"""The job table: claiming work safely across processes, leases and heartbeats.

A worker claims the oldest queued job, or a running one whose lease expired (its worker died),
in a transaction that locks the row: `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, and on
SQLite a transaction that takes the database write lock first (`BEGIN IMMEDIATE`), so two
workers never claim the same job. While it works, a heartbeat thread extends the lease. A job
that failed `MAX_ATTEMPTS` times is marked failed with its reason.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, or_, select

from leaderboard.service.db import Database, Job, Submission, utcnow

MAX_ATTEMPTS = 3
JOB_KINDS = ("evaluate", "score", "analyse")


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    kind: str
    submission_id: int
    attempts: int


def claim_job(database: Database, worker: str, lease_seconds: float,
              kinds: Sequence[str] = JOB_KINDS) -> ClaimedJob | None:
    """Claim one job (oldest first) or return None when there is nothing to do."""
    now = time.time()
    with database.write_session() as session:
        job = session.scalars(
            select(Job).where(Job.kind.in_(list(kinds)), or_(
                Job.state == "queued",
                and_(Job.state == "running", Job.lease_until < now)))
            .order_by(Job.id).limit(1).with_for_update(skip_locked=True)).first()
        if job is None:
            return None
        job.state, job.worker = "running", worker
        job.lease_until, job.attempts = now + lease_seconds, job.attempts + 1
        return ClaimedJob(job.id, job.kind, job.submission_id, job.attempts)


def extend_lease(database: Database, job_id: int, worker: str, lease_seconds: float) -> bool:
    """Push the lease of a job this worker still holds; False when it lost the job."""
    with database.write_session() as session:
        job = session.get(Job, job_id)
        if job is None or job.worker != worker or job.state != "running":
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

