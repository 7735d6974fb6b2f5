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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from leaderboard.service.db import Database, Job, Material, Score, Submission, User, pack, unpack
from leaderboard.service.gold import hosted_gold, score_versions
from leaderboard.service.jobs import finish
from leaderboard.service.ladder import ladder_answers, user_bests
from leaderboard.service.publish import rebuild_board
from leaderboard.service.settings import load_settings
from tasks.plumbing.errors import DataError

logger = logging.getLogger("sumbench.leaderboard.worker")


def public_material(payload: Mapping, material: Sequence) -> list:
    """The material of the part's public items (gold order)."""
    private = set(payload.get("private", ()))
    return [item for index, item in enumerate(material) if index not in private]


def split_results(track, part: str, payload: Mapping, part_score) -> tuple[dict | None,
                                                                          dict | None, int]:
    """(public result, private result, public items) of a scored part: the results of its
    public and of its private items (None where a part has none); without private items, the
    public result is the whole one."""
    material, private = part_score.material, set(payload.get("private", ()))
    if not private:
        return part_score.result, None, len(material)
    public = public_material(payload, material)
    hidden = [item for index, item in enumerate(material) if index in private]
    return (track.subset_result(part, public) if public else None,
            track.subset_result(part, hidden) if hidden else None, len(public))


def score_job(database: Database, job, model_root: str | None = None) -> None:
    # a write transaction from the start: on SQLite, a read transaction that then writes
    # (the status) fails when another connection wrote since it began
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        if submission.deleted:
            finish(session, job.id)
            return
        submission.status = "scoring"
        track_name, board, kind = submission.track, submission.board, submission.kind
        stored = submission.predictions
    checked = unpack(stored)  # after the commit: other writers wait only for the read
    settings = load_settings(database)
    track = settings.track(track_name, model_root)
    hosted = hosted_gold(database, track.name)
    gold = hosted.gold
    started = time.perf_counter()
    try:
        parts = track.score(checked, gold, board)
    except DataError as error:
        reject(database, job, error)
        return
    key, versions = score_versions(track, board, hosted)
    split = {part: split_results(track, part, gold[board][part], part_score)
             for part, part_score in parts.items()}
    gold_match = track.gold_match(checked, gold, board, {part: scored.headline
                                                         for part, scored in parts.items()}) \
        if settings.gold_is_public and kind in ("submission", "evaluation") else None
    stored_score = StoredScore(key, versions, parts,
                               {part: results[:2] for part, results in split.items()},
                               {part: results[2] for part, results in split.items()},
                               time.perf_counter() - started, gold_match,
                               {part: list(track.headline_range(part)) for part in parts})
    if store_score(database, settings, job, stored_score):
        rebuild_board(database, track_name, board)


def reject(database: Database, job, error: DataError) -> None:
    errors = error.to_list() if hasattr(error, "to_list") else [
        {"file": None, "line": None, "field": error.field, "message": error.reason}]
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        submission.status, submission.errors = "rejected", json.dumps(errors)
        finish(session, job.id)


@dataclass
class StoredScore:
    """What a score job computed: version, whole-set part scores, (public, private) results
    per part, public item counts and the seconds it took."""
    key: str
    versions: dict
    parts: dict
    split: dict
    n_public: dict
    seconds: float
    gold_match: dict | None = None
    bounds: dict | None = None  # part -> [low, high] of its headline

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
                     current=True, analysed=False, seconds=self.seconds,
                     gold_match=None if self.gold_match is None else json.dumps(
                         self.gold_match, sort_keys=True))


#: the entries the Ladder answers: what a participant sends (a predictions file, or a model
#: the server runs: trained to emit crafted outputs, it would probe as a file does)
LADDERED_KINDS = ("submission", "evaluation")


def is_laddered(submission: Submission, owner: User, settings) -> bool:
    """A participant's (not an admin's) predictions file or evaluated model, while the Ladder
    is on (never on public gold)."""
    return submission.kind in LADDERED_KINDS and not owner.is_admin and \
        settings.ladder_step > 0


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
                                  settings.ladder_step, settings.min_public_items,
                                  computed.bounds)
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
    settings = load_settings(database)
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        score = session.scalars(select(Score).filter_by(
            submission_id=submission.id, current=True)).first()
        if score is None or submission.deleted:
            finish(session, job.id)
            return
        track_name, board, score_id = submission.track, submission.board, score.id
        score_key, laddered = score.version_key, score.released is not None
        stored = submission.predictions
        packed = {m.part: m.examples for m in session.scalars(
            select(Material).filter_by(score_id=score_id))}
    track = settings.track(track_name)
    hosted = hosted_gold(database, track.name)
    if score_versions(track, board, hosted)[0] != score_key:
        # scored on another version (gold or settings changed since): its material would be
        # read against the wrong items; `rescore` scores it again under the current one
        with database.write_session() as session:
            finish(session, job.id)
        return
    checked = unpack(stored)  # unpacked once the write lock is let go
    materials = {part: unpack(blob) for part, blob in packed.items()}
    gold = hosted.gold
    distributions = {} if laddered else {  # nothing of a laddered entry's material is shown
        part: track.distribution(part, gold, board,
                                 public_material(gold[board].get(part, {}), material),
                                 n_resamples=settings.n_resamples, seed=settings.seed)
        for part, material in materials.items()}
    breakdown = public_breakdown(track.breakdown(checked, gold, board, materials),
                                 0 if settings.gold_is_public else settings.min_public_items)
    with database.write_session() as session:
        score = session.get(Score, score_id)
        for row in session.scalars(select(Material).filter_by(score_id=score_id)):
            if row.part in distributions:
                row.distribution = np.asarray(distributions[row.part], dtype="<f8").tobytes()
        versions = json.loads(score.versions)
        versions["analysis"] = {"n_resamples": settings.n_resamples, "seed": settings.seed}
        score.versions = json.dumps(versions, sort_keys=True)
        score.breakdown = None if breakdown is None else json.dumps(breakdown, sort_keys=True)
        score.analysed = True
        finish(session, job.id)
    rebuild_board(database, track_name, board)


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
