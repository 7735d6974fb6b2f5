"""The worker: claims jobs and does the work that never runs in a request.

Job kinds: "evaluate" (leaderboard.service.evaluation: a submitted model predicts on the
board's inputs), "score" and "analyse" (leaderboard.service.scoring_jobs). A worker may take
some kinds only (`kinds`: GPU machines run the evaluations). A job that fails unexpectedly is
retried, then reported as "failed" with a reason; log lines name jobs and submissions only,
never data.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

from sqlalchemy import select

from leaderboard.service.db import Database, Job, Score, Submission
from leaderboard.service.evaluation import EvaluateOptions, evaluate_job
from leaderboard.service.gold import hosted_gold, score_versions
from leaderboard.service.jobs import JOB_KINDS, Heartbeat, claim_job, fail_or_retry
from leaderboard.service.scoring_jobs import analyse_job, score_job
from leaderboard.service.settings import load_settings

logger = logging.getLogger("sumbench.leaderboard.worker")


#: job kind -> what runs it (evaluate jobs also take the worker's EvaluateOptions)
JOB_RUNNERS = {"score": score_job, "analyse": analyse_job}
DOING = {"evaluate": "evaluating the model", "score": "scoring", "analyse": "analysing"}


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


class Worker:
    """Processes jobs; `hold` sleeps after each claim (fault drills: kill it mid-job)."""

    def __init__(self, database: Database, *, name: str | None = None,
                 lease_seconds: float | None = None, hold: float = 0.0,
                 kinds: tuple[str, ...] = JOB_KINDS, evaluate: EvaluateOptions | None = None):
        self.database, self.name, self.hold = database, name or worker_name(), hold
        self.lease_seconds = lease_seconds or load_settings(database).lease_seconds
        self.kinds, self.evaluate = tuple(kinds), evaluate or EvaluateOptions()

    def _run(self, job) -> None:
        if job.kind == "evaluate":
            evaluate_job(self.database, job, self.evaluate)
        elif job.kind == "score":  # QuestEval columns find their models under the root
            score_job(self.database, job, self.evaluate.model_root)
        else:
            JOB_RUNNERS[job.kind](self.database, job)

    def run_once(self) -> bool:
        """Process one job; False when none was waiting."""
        job = claim_job(self.database, self.name, self.lease_seconds, self.kinds)
        if job is None:
            return False
        logger.info("job %s (%s of submission %s) claimed", job.id, job.kind, job.submission_id)
        try:
            with Heartbeat(self.database, job, self.name, self.lease_seconds):
                if self.hold:
                    time.sleep(self.hold)
                self._run(job)
        except Exception as error:  # noqa: BLE001 - reported on the submission, retried
            doing = DOING.get(job.kind, job.kind)
            reason = f"internal error ({type(error).__name__}) while {doing}"
            logger.warning("job %s failed: %s", job.id, reason)
            fail_or_retry(self.database, job, reason)
        return True

    def run(self, stop: threading.Event, poll_seconds: float = 0.5) -> None:
        while not stop.is_set():
            if not self.run_once():
                stop.wait(poll_seconds)

    def drain(self) -> int:
        """Process jobs until none is left; returns how many ran."""
        count = 0
        while self.run_once():
            count += 1
        return count


def queue_rescore(database: Database) -> dict:
    """Score jobs for every stored submission not scored under its board's current version
    (old score rows stay as history), in submission order (the Ladder's order); a model the
    server evaluated is evaluated again (its inputs may have changed); analyse jobs for scores
    analysed with other bootstrap settings. Returns counts."""
    settings = load_settings(database)
    queued = {"score": 0, "analyse": 0, "evaluate": 0}
    current_keys: dict[tuple, str | None] = {}
    with database.write_session() as session:
        for submission in session.scalars(select(Submission).where(
                Submission.deleted.is_(False), Submission.predictions.is_not(None),
                Submission.status.in_(("scored", "rejected", "failed")))
                .order_by(Submission.id)):
            board_key = (submission.track, submission.board)
            if board_key not in current_keys:
                track = settings.track(submission.track)
                hosted = hosted_gold(database, track.name)
                current_keys[board_key] = score_versions(track, submission.board, hosted)[0] \
                    if submission.board in hosted.gold else None
            score = session.scalars(select(Score).filter_by(
                submission_id=submission.id, current=True)).first()
            if score is None or score.version_key != current_keys[board_key]:
                kind = "evaluate" if submission.kind == "evaluation" else "score"
                if kind == "evaluate":
                    submission.predictions = None
                submission.status = "queued"
                session.add(Job(submission_id=submission.id, kind=kind))
                queued[kind] += 1
            elif json.loads(score.versions).get("analysis") != {
                    "n_resamples": settings.n_resamples, "seed": settings.seed}:
                session.add(Job(submission_id=submission.id, kind="analyse"))
                queued["analyse"] += 1
    return queued
