"""The worker: claims jobs and does the work that never runs in a request.

"score": join the stored predictions onto the hidden gold and score every part with the
track's code (USB: tasks.scoring, the code of `sumbench score`); write the score row, its
private per-example material, the submission's status and an "analyse" job in ONE
transaction. The score row is unique per (submission, version key), so a job re-run after a
crash (the worker was killed after committing, or before) scores the submission exactly once.
"analyse": bootstrap distributions of every part (shared seeded resample indices), the
per-domain breakdown, then the board's ranking snapshot is rebuilt (by the last analysis of
the board to finish when several are under way).

Bad predictions found while joining (e.g. gold changed since submission) reject the
submission with file-less errors; other failures are retried, then reported as "failed" with
a reason. Log lines name jobs and submissions only, never data. Stored blobs are read inside
a transaction and unpacked after it, so a write transaction (on SQLite, the database's one
write lock) lasts only as long as the reads and writes it needs.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from leaderboard.service.boards import load_settings
from leaderboard.service.publish import rebuild_board
from leaderboard.service.db import Database, Job, Material, Score, Submission, pack, unpack
from leaderboard.service.gold import gold_for, score_versions
from leaderboard.service.jobs import Heartbeat, claim_job, fail_or_retry, finish
from tasks.errors import DataError

logger = logging.getLogger("sumbench.leaderboard.worker")


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


class Worker:
    """Processes jobs; `hold` sleeps after each claim (fault drills: kill it mid-job)."""

    def __init__(self, database: Database, *, name: str | None = None,
                 lease_seconds: float | None = None, hold: float = 0.0):
        self.database, self.name, self.hold = database, name or worker_name(), hold
        self.lease_seconds = lease_seconds or load_settings(database).lease_seconds

    def run_once(self) -> bool:
        """Process one job; False when none was waiting."""
        job = claim_job(self.database, self.name, self.lease_seconds)
        if job is None:
            return False
        logger.info("job %s (%s of submission %s) claimed", job.id, job.kind, job.submission_id)
        try:
            with Heartbeat(self.database, job, self.name, self.lease_seconds):
                if self.hold:
                    time.sleep(self.hold)
                (self._score if job.kind == "score" else self._analyse)(job)
        except Exception as error:  # noqa: BLE001 - reported on the submission, retried
            doing = "scoring" if job.kind == "score" else "analysing"
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

    # ---- score ----------------------------------------------------------------------
    def _score(self, job) -> None:
        # a write transaction from the start: on SQLite, a read transaction that then writes
        # (the status) fails when another connection wrote since it began
        with self.database.write_session() as session:
            submission = session.get(Submission, job.submission_id)
            if submission.deleted:
                finish(session, job.id)
                return
            submission.status = "scoring"
            track_name, board = submission.track, submission.board
            stored = submission.predictions
        checked = unpack(stored)  # after the commit: other writers wait only for the read
        settings = load_settings(self.database)
        track = settings.track(track_name)
        gold = gold_for(self.database, track.name)
        started = time.perf_counter()
        try:
            parts = track.score(checked, gold, board)
        except DataError as error:
            self._reject(job, error)
            return
        key, versions = score_versions(track, board, gold)
        self._store_score(job, key, versions, parts, time.perf_counter() - started)

    def _reject(self, job, error: DataError) -> None:
        errors = error.to_list() if hasattr(error, "to_list") else [
            {"file": None, "line": None, "field": error.field, "message": error.reason}]
        with self.database.write_session() as session:
            submission = session.get(Submission, job.submission_id)
            submission.status, submission.errors = "rejected", json.dumps(errors)
            finish(session, job.id)

    def _store_score(self, job, key: str, versions: dict, parts: dict, seconds: float) -> None:
        materials = {part: pack(part_score.material) for part, part_score in parts.items()}
        try:
            with self.database.write_session() as session:
                if session.scalars(select(Score.id).filter_by(
                        submission_id=job.submission_id, version_key=key)).first():
                    logger.info("submission %s already scored under %s", job.submission_id,
                                key[:12])
                else:
                    session.execute(update(Score).where(
                        Score.submission_id == job.submission_id).values(current=False))
                    score = Score(
                        submission_id=job.submission_id, version_key=key,
                        versions=json.dumps(versions, sort_keys=True),
                        results=json.dumps({p: s.result for p, s in parts.items()},
                                           sort_keys=True),
                        headlines=json.dumps({p: s.headline for p, s in parts.items()}),
                        current=True, analysed=False, seconds=seconds)
                    session.add(score)
                    session.flush()
                    for part, examples in materials.items():
                        session.add(Material(score_id=score.id, part=part, examples=examples))
                    session.add(Job(submission_id=job.submission_id, kind="analyse"))
                submission = session.get(Submission, job.submission_id)
                submission.status, submission.errors = "scored", None
                finish(session, job.id)
        except IntegrityError:  # a concurrent run of the same job committed first
            with self.database.write_session() as session:
                finish(session, job.id)

    # ---- analyse --------------------------------------------------------------------
    def _analyse(self, job) -> None:
        from leaderboard.ranking import bootstrap_distribution

        settings = load_settings(self.database)
        with self.database.write_session() as session:
            submission = session.get(Submission, job.submission_id)
            score = session.scalars(select(Score).filter_by(
                submission_id=submission.id, current=True)).first()
            if score is None or submission.deleted:
                finish(session, job.id)
                return
            track_name, board, score_id = submission.track, submission.board, score.id
            score_key = score.version_key
            stored = submission.predictions
            packed = {m.part: m.examples for m in session.scalars(
                select(Material).filter_by(score_id=score_id))}
        checked = unpack(stored)  # unpacked once the write lock is let go
        materials = {part: unpack(blob) for part, blob in packed.items()}
        track = settings.track(track_name)
        gold = gold_for(self.database, track.name)
        distributions = {
            part: bootstrap_distribution(material, track.statistic(part, gold, board),
                                         n_resamples=settings.n_resamples, seed=settings.seed)
            for part, material in materials.items()}
        # the material was scored on the gold of `score_key`: reused only while it is current
        same_gold = score_versions(track, board, gold)[0] == score_key
        breakdown = public_breakdown(
            track.breakdown(checked, gold, board, materials if same_gold else None),
            settings.min_public_items)
        with self.database.write_session() as session:
            score = session.get(Score, score_id)
            for row in session.scalars(select(Material).filter_by(score_id=score_id)):
                row.distribution = np.asarray(distributions[row.part], dtype="<f8").tobytes()
            versions = json.loads(score.versions)
            versions["analysis"] = {"n_resamples": settings.n_resamples, "seed": settings.seed}
            score.versions = json.dumps(versions, sort_keys=True)
            score.breakdown = None if breakdown is None else json.dumps(breakdown,
                                                                        sort_keys=True)
            score.analysed = True
            finish(session, job.id)
        if not analyses_pending(self.database, track_name, board):
            rebuild_board(self.database, track_name, board)


def public_breakdown(breakdown: dict | None, min_items: int) -> dict | None:
    """domain -> part -> result, with a part's results withheld in every domain when one of
    its domain subsets has fewer than `min_items` items (a score over so few items, or the
    difference of the total and the other domains, would expose per-item results)."""
    if breakdown is None:
        return None
    parts = {part for results in breakdown.values() for part in results}
    small = {part for part in parts if any(
        results[part]["n_records"] < min_items for results in breakdown.values()
        if part in results)}
    return {domain: {part: ({"n_records": result["n_records"], "withheld":
                             f"a domain has fewer than {min_items} test items"}
                            if part in small else result)
                     for part, result in results.items()}
            for domain, results in breakdown.items()}


def analyses_pending(database: Database, track: str, board: str) -> bool:
    """Whether other analyse jobs of the board are queued or running: the last one to finish
    rebuilds the board (each checks after its own job is marked done)."""
    with database.session() as session:
        return session.scalars(
            select(Job.id).join(Submission, Submission.id == Job.submission_id)
            .where(Job.kind == "analyse", Job.state.in_(("queued", "running")),
                   Submission.track == track, Submission.board == board).limit(1)
        ).first() is not None


def queue_rescore(database: Database) -> dict:
    """Score jobs for every stored submission not scored under its board's current version
    (old score rows stay as history); analyse jobs for scores analysed with other bootstrap
    settings. Returns counts."""
    settings = load_settings(database)
    queued = {"score": 0, "analyse": 0}
    current_keys: dict[tuple, str | None] = {}
    with database.write_session() as session:
        for submission in session.scalars(select(Submission).where(
                Submission.deleted.is_(False), Submission.status.in_(
                    ("scored", "rejected", "failed")))):
            board_key = (submission.track, submission.board)
            if board_key not in current_keys:
                track = settings.track(submission.track)
                gold = gold_for(database, track.name)
                current_keys[board_key] = score_versions(track, submission.board, gold)[0] \
                    if submission.board in gold else None
            score = session.scalars(select(Score).filter_by(
                submission_id=submission.id, current=True)).first()
            if score is None or score.version_key != current_keys[board_key]:
                submission.status = "queued"
                session.add(Job(submission_id=submission.id, kind="score"))
                queued["score"] += 1
            elif json.loads(score.versions).get("analysis") != {
                    "n_resamples": settings.n_resamples, "seed": settings.seed}:
                session.add(Job(submission_id=submission.id, kind="analyse"))
                queued["analyse"] += 1
    return queued
