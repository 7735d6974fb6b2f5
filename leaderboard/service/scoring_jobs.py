"""The "score" and "analyse" jobs of a submission.

"score": join the stored predictions onto the hidden gold and score every part with the
track's code (USB: tasks.scoring, the code of `sumbench score`); the whole test set's results
(admins only), the public and private parts' results (leaderboard.tracks.hosting), the Ladder's
answer for a laddered entry (leaderboard.service.ladder), the private per-example material, the
submission's status and an "analyse" job are written in ONE transaction, and the board is
rebuilt at once: the entry is listed with its point scores, its intervals pending. The score
row is unique per (submission, version key), so a job re-run after a crash (the worker was
killed after committing, or before) scores the submission exactly once.
"analyse": bootstrap distributions of every part's public items (shared seeded resample
indices), the per-domain breakdown of the public items, then the board is rebuilt again.

Bad predictions found while joining (e.g. gold changed since submission) reject the
submission with file-less errors. Log lines name jobs and submissions only, never data. Stored
blobs are read inside a transaction and unpacked after it, so a write transaction (on SQLite,
the database's one write lock) lasts only as long as the reads and writes it needs.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Mapping, Sequence

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from leaderboard.service.settings import load_settings
from leaderboard.service.db import (Database, Job, Material, Score, Submission, User, pack,
                                    unpack)
from leaderboard.service.gold import gold_for, score_versions
from leaderboard.service.jobs import finish
from leaderboard.service.ladder import ladder_answers, user_bests
from leaderboard.service.publish import rebuild_board
from tasks.errors import DataError

logger = logging.getLogger("sumbench.leaderboard.worker")


def public_indices(payload: Mapping, n_items: int) -> list[int]:
    private = set(payload.get("private", ()))
    return [index for index in range(n_items) if index not in private]


def split_results(track, part: str, payload: Mapping, part_score) -> tuple[dict | None,
                                                                          dict | None]:
    """(public result, private result) of a scored part: the results of its public and of
    its private items (None where a part has none); without private items, the public result
    is the whole one."""
    material = part_score.material
    if not payload.get("private"):
        return part_score.result, None
    public = set(public_indices(payload, len(material)))
    parts = ([m for i, m in enumerate(material) if i in public],
             [m for i, m in enumerate(material) if i not in public])
    return tuple(track.subset_result(part, items) if items else None for items in parts)


def score_job(database: Database, job) -> None:
    # a write transaction from the start: on SQLite, a read transaction that then writes
    # (the status) fails when another connection wrote since it began
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        if submission.deleted:
            finish(session, job.id)
            return
        submission.status = "scoring"
        track_name, board = submission.track, submission.board
        stored = submission.predictions
    checked = unpack(stored)  # after the commit: other writers wait only for the read
    settings = load_settings(database)
    track = settings.track(track_name)
    gold = gold_for(database, track.name)
    started = time.perf_counter()
    try:
        parts = track.score(checked, gold, board)
    except DataError as error:
        reject(database, job, error)
        return
    key, versions = score_versions(database, track, board, gold)
    split = {part: split_results(track, part, gold[board][part], part_score)
             for part, part_score in parts.items()}
    n_public = {part: len(public_indices(gold[board][part], len(part_score.material)))
                for part, part_score in parts.items()}
    stored_score = StoredScore(key, versions, parts, split, n_public,
                               time.perf_counter() - started)
    if store_score(database, settings, job, stored_score):
        rebuild_board(database, track_name, board)


def reject(database: Database, job, error: DataError) -> None:
    errors = error.to_list() if hasattr(error, "to_list") else [
        {"file": None, "line": None, "field": error.field, "message": error.reason}]
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        submission.status, submission.errors = "rejected", json.dumps(errors)
        finish(session, job.id)


class StoredScore:
    """What a score job computed: version, whole-set part scores, (public, private) results
    per part, public item counts and the seconds it took."""

    def __init__(self, key: str, versions: dict, parts: dict, split: dict,
                 n_public: dict, seconds: float):
        self.key, self.versions, self.parts, self.split = key, versions, parts, split
        self.n_public, self.seconds = n_public, seconds

    def public_headlines(self) -> dict[str, float | None]:
        return {part: None if public is None else public["headline"]
                for part, (public, _) in self.split.items()}

    def row(self, released: dict | None) -> Score:
        def results(index: int) -> str:
            return json.dumps({part: pair[index] for part, pair in self.split.items()},
                              sort_keys=True)
        return Score(submission_id=None, version_key=self.key,
                     versions=json.dumps(self.versions, sort_keys=True),
                     results=json.dumps({p: s.result for p, s in self.parts.items()},
                                        sort_keys=True),
                     headlines=json.dumps(self.public_headlines()),
                     public_results=results(0), private_results=results(1),
                     released=None if released is None else json.dumps(released,
                                                                        sort_keys=True),
                     current=True, analysed=False, seconds=self.seconds)


def is_laddered(submission: Submission, owner: User, settings) -> bool:
    """A predictions file of a user who is not an admin, while the Ladder is on."""
    return submission.kind == "submission" and not owner.is_admin and settings.ladder_step > 0


def store_score(database: Database, settings, job, computed: StoredScore) -> bool:
    """Store the score (once per version key); True when the board changed."""
    materials = {part: pack(part_score.material) for part, part_score in computed.parts.items()}
    try:
        with database.write_session() as session:
            submission = session.get(Submission, job.submission_id)
            changed = _add_score(session, settings, submission, computed, materials)
            submission.status, submission.errors = "scored", None
            finish(session, job.id)
            return changed
    except IntegrityError:  # a concurrent run of the same job committed first
        with database.write_session() as session:
            finish(session, job.id)
        return False


def _add_score(session, settings, submission: Submission, computed: StoredScore,
               materials: dict) -> bool:
    if session.scalars(select(Score.id).filter_by(submission_id=submission.id,
                                                  version_key=computed.key)).first():
        logger.info("submission %s already scored under %s", submission.id, computed.key[:12])
        return False
    # the owner's row locked: two scores of one user take their Ladder turns one by one
    owner = session.scalars(select(User).where(User.id == submission.user_id)
                            .with_for_update()).one()
    released = None
    if is_laddered(submission, owner, settings):
        bests = user_bests(session, owner.id, submission.track, submission.board,
                           computed.key, before=submission.id)
        released = ladder_answers(computed.public_headlines(), computed.n_public, bests,
                                  settings.ladder_step, settings.min_public_items)
    session.execute(update(Score).where(Score.submission_id == submission.id)
                    .values(current=False))
    score = computed.row(released)
    score.submission_id = submission.id
    session.add(score)
    session.flush()
    for part, examples in materials.items():
        session.add(Material(score_id=score.id, part=part, examples=examples))
    session.add(Job(submission_id=submission.id, kind="analyse"))
    return True


def analyse_job(database: Database, job) -> None:
    from leaderboard.ranking import bootstrap_distribution

    settings = load_settings(database)
    with database.write_session() as session:
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
    gold = gold_for(database, track.name)
    # the material was scored on the gold of `score_key`: reused only while it is current
    same_gold = score_versions(database, track, board, gold)[0] == score_key
    distributions = {part: _public_distribution(
        bootstrap_distribution, material, gold[board].get(part, {}) if same_gold else {},
        track.statistic(part, gold, board), settings) for part, material in materials.items()}
    breakdown = public_breakdown(
        track.breakdown(checked, gold, board, materials if same_gold else None),
        settings.min_public_items)
    with database.write_session() as session:
        score = session.get(Score, score_id)
        for row in session.scalars(select(Material).filter_by(score_id=score_id)):
            row.distribution = np.asarray(distributions[row.part], dtype="<f8").tobytes()
        versions = json.loads(score.versions)
        versions["analysis"] = {"n_resamples": settings.n_resamples, "seed": settings.seed}
        score.versions = json.dumps(versions, sort_keys=True)
        score.breakdown = None if breakdown is None else json.dumps(breakdown, sort_keys=True)
        score.analysed = True
        finish(session, job.id)
    rebuild_board(database, track_name, board)


def _public_distribution(bootstrap, material: Sequence, payload: Mapping, statistic,
                         settings) -> np.ndarray:
    """The bootstrap distribution of the part's headline over its public items."""
    public = public_indices(payload, len(material))
    return bootstrap([material[index] for index in public], statistic,
                     n_resamples=settings.n_resamples, seed=settings.seed)


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
