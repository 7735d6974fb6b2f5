"""Accepting submissions (validated, stored with a scoring job, audited), hiding, deleting
and the public view of one submission. Deleting or hiding an evaluation that has not ended
stops it (leaderboard.service.jobs.request_stop).

A rejected submission stores nothing but its audit row. An accepted one stores the checked
minimal records (private), its model card (self-reported) and a "score" job for the workers.
Sending the same files again under the same model name to the same board (a retry after a lost
answer) stores nothing and counts no quota while the earlier submission is queued, scoring or
scored: the answer is the earlier submission's, with `"duplicate": true` (HTTP 200), and the
audit log gets a "duplicate" row.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select

from leaderboard.card import check_card, merged_card
from leaderboard.intake.validate import Limits, Upload, uploads_sha256, validate_submission
from leaderboard.service.auth import (
    QUOTA_KINDS,
    audit,
    rejections_since,
    submissions_since,
    system_user,
)
from leaderboard.service.db import Database, Job, Submission, User, pack, utcnow
from leaderboard.service.gold import board_manifest
from leaderboard.service.jobs import STOP_REASONS, request_stop
from leaderboard.service.probing import item_digests
from leaderboard.service.publish import rebuild_board
from leaderboard.service.settings import InstanceSettings
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.validation import MAX_INDEX

MAX_MODEL_CHARS = 200


class QuotaExceeded(SumbenchError):
    pass


class NotFound(SumbenchError):
    pass


class Forbidden(SumbenchError):
    pass


def check_model_name(model: Any) -> str:
    if not isinstance(model, str) or not model.strip():
        raise DataError("a model name is required", field="model")
    model = model.strip()
    if len(model) > MAX_MODEL_CHARS or any(not ch.isprintable() for ch in model):
        raise DataError(f"a model name is 1-{MAX_MODEL_CHARS} printable characters",
                        field="model")
    return model


def manifest(database: Database, settings: InstanceSettings, track_name: str,
             board: str) -> dict:
    """The public manifest of a board: item keys and prediction shapes, no gold; and how
    this instance validates (`validation`: its limits and `strict_lengths`), so a client's
    `--check` refuses what the server would."""
    track = settings.track(track_name)
    return {**board_manifest(database, track, board), "validation": {
        "limits": dataclasses.asdict(Limits.of(settings)),
        "strict_lengths": settings.strict_lengths}}


def accept(database: Database, settings: InstanceSettings, user: User, *, track_name: str,
           board: str, model: Any, card: Mapping[str, Any], uploads: Sequence[Upload],
           kind: str = "submission") -> dict:
    """Validate and store a submission; returns {"id", "status"}. Raises SubmissionErrors /
    DataError (rejected: audited, nothing else stored) or QuotaExceeded."""
    detail = {"track": track_name, "board": board, "files": [u.name for u in uploads],
              "bytes": sum(len(u.data) for u in uploads)}
    try:
        track = settings.track(track_name)
        model = check_model_name(model)
        sent = check_card({key: value for key, value in card.items()
                           if value not in (None, "")})
        identical = Identical(user, kind, track.name, board, model, uploads_sha256(uploads),
                              sent)
        answer = identical.earlier_answer(database, detail)
        if answer is not None:
            return answer
        if kind in QUOTA_KINDS and not user.is_admin:
            with database.session() as session:
                check_rejections(session, settings, user)  # before reading the files
                check_quota(session, settings, user)  # early: before the work of validating
        result = validate_submission(track, uploads, board_manifest(database, track, board),
                                     Limits.of(settings), board)
        card = merged_card(card, result.results)
    except (SumbenchError, ValueError) as error:
        _audit_rejection(database, user, detail, error)
        raise
    try:
        return _store(database, settings, user, kind, identical, card, result, detail)
    except QuotaExceeded as error:
        _audit_rejection(database, user, detail, error)
        raise


def _audit_rejection(database: Database, user: User, detail: dict, error: Exception) -> None:
    with database.session() as session:
        audit(session, user.name, "submit", refusal_outcome(error),
              detail={**detail, "error": str(error)[:2000]})


def refusal_outcome(error: Exception) -> str:
    """The audit outcome of a submission not taken: "refused" over a quota or rate limit
    (nothing was read), else "rejected" (which counts toward `rejected_per_hour`)."""
    return "refused" if isinstance(error, QuotaExceeded) else "rejected"


def check_rejections(session, settings: InstanceSettings, user: User) -> None:
    """Refuse, unread, a submission of a user whose last hour held `rejected_per_hour`
    rejected ones (bad files cost the server work whether or not they are stored)."""
    if rejections_since(session, user, 1) >= settings.rejected_per_hour:
        raise QuotaExceeded(f"{settings.rejected_per_hour} rejected submissions in the last "
                            f"hour (this instance's limit): check files with `sumbench "
                            f"leaderboard submit --check` before sending them")


def check_quota(session, settings: InstanceSettings, user: User) -> None:
    """Refuse a submission over the user's quota of a day or of a week (hidden and deleted
    submissions count)."""
    for days, limit, period in ((1, settings.quota_per_day, "24 hours"),
                                (7, settings.quota_per_week, "7 days")):
        if submissions_since(session, user, days) >= limit:
            raise QuotaExceeded(f"quota reached: {limit} submissions per {period}")


#: statuses of an earlier identical submission that a retry is answered with (one that was
#: rejected or failed in scoring is submitted anew)
ANSWERED_AGAIN = ("queued", "evaluating", "scoring", "scored")


class Identical:
    """What makes a submission the same as an earlier one: owner, kind, track, board, model
    name and the uploaded bytes (`upload_sha256`, files in order). A model to evaluate is the
    same by its content and settings (`upload_sha256` of them), whatever its name."""

    def __init__(self, user: User, kind: str, track: str, board: str, model: str,
                 sha256: str, card: Mapping[str, Any] | None = None):
        self.user, self.kind, self.track, self.board = user, kind, track, board
        self.model, self.sha256 = model, sha256
        self.card = dict(card or {})  # the card fields sent with this request

    def earlier(self, session) -> Submission | None:
        """The earlier identical submission that is not deleted, if any."""
        owner_id = self.user.id if self.kind in QUOTA_KINDS else system_user(session).id
        named = [Submission.model == self.model] if self.kind != "evaluation" else []
        return session.scalars(select(Submission).where(
            Submission.user_id == owner_id, Submission.kind == self.kind,
            Submission.track == self.track, Submission.board == self.board,
            *named, Submission.upload_sha256 == self.sha256,
            Submission.status.in_(ANSWERED_AGAIN),
            Submission.deleted.is_(False)).order_by(Submission.id)).first()

    def earlier_answer(self, database: Database, detail: dict) -> dict | None:
        """The earlier identical submission's answer, or None. Its audit row is written in a
        write transaction: on SQLite a read transaction that then writes fails ("database is
        locked") when another request wrote in between."""
        with database.session() as session:
            if self.earlier(session) is None:
                return None
        with database.write_session() as session:
            earlier = self.earlier(session)  # deleted meanwhile: None, a new submission
            return self.answer(session, earlier, detail) if earlier is not None else None

    def answer(self, session, earlier: Submission, detail: dict) -> dict:
        """The earlier submission's answer (audited as a duplicate; nothing stored)."""
        audit(session, self.user.name, "submit", "duplicate", submission_id=earlier.id,
              detail={**detail, "model": self.model, "sha256": self.sha256})
        stored = json.loads(earlier.card)
        changed = sorted(key for key, value in self.card.items() if stored.get(key) != value)
        note = (f"; the card sent now differs from the stored one ({', '.join(changed)}) and "
                f"was not applied: delete submission {earlier.id} and submit again to change "
                f"it") if changed else ""
        what = "this model (the same content and settings) was" if self.kind == "evaluation" \
            else "these files were"
        return {"id": earlier.id, "status": earlier.status, "duplicate": True,
                "message": f"{what} already submitted as submission {earlier.id} "
                           f"(model {earlier.model!r}); nothing new was stored{note}"}


def _store(database: Database, settings: InstanceSettings, user: User, kind: str,
           identical: Identical, card: dict, result, detail: dict) -> dict:
    """Insert the submission and its score job; the quota and identical submissions are
    checked again in the same write transaction (the owner's row locked, an admin's too), so
    concurrent requests cannot pass the quota, or store the same submission twice, together."""
    track, board, model = identical.track, identical.board, identical.model
    predictions = pack(result.checked)  # compressed before the write lock is taken
    digests = item_digests(result.checked)
    with database.write_session() as session:
        owner = user if kind == "submission" else system_user(session)
        session.execute(select(User.id).where(User.id == owner.id).with_for_update())
        earlier = identical.earlier(session)
        if earlier is not None:
            return identical.answer(session, earlier, detail)
        if kind in QUOTA_KINDS and not user.is_admin:
            check_quota(session, settings, user)
        submission = Submission(
            user_id=owner.id, kind=kind, track=track, board=board, model=model,
            card=json.dumps(card, sort_keys=True), status="queued",
            parts=json.dumps(sorted(result.checked)), n_records=result.n_records,
            upload_sha256=result.sha256, predictions=predictions, item_digests=digests)
        session.add(submission)
        session.flush()
        session.add(Job(submission_id=submission.id, kind="score"))
        audit(session, user.name, "submit", "accepted", submission_id=submission.id,
              detail={**detail, "model": model, "records": result.n_records,
                      "sha256": result.sha256})
        answer = {"id": submission.id, "status": submission.status}
        if result.ignored:  # archive members that were not read: say so, not silently
            answer["ignored"] = list(result.ignored)
        if result.not_hosted:
            answer["not_hosted"] = result.not_hosted
        return answer


def stored_submission(session, submission_id: int) -> Submission | None:
    """The submission with this id, or None (also for ids no database key can hold)."""
    if not 0 < submission_id <= MAX_INDEX:
        return None
    return session.get(Submission, submission_id)


def owned(session, submission_id: int, user: User) -> Submission:
    submission = stored_submission(session, submission_id)
    if submission is None or submission.deleted:
        raise NotFound(f"no submission {submission_id}")
    if submission.user_id != user.id and not user.is_admin:
        raise Forbidden("only the submission's owner (or an admin) may change it")
    return submission


def set_hidden(database: Database, submission_id: int, user: User, hidden: bool) -> dict:
    """Hide or show a submission; hiding an evaluation that has not ended stops it."""
    with database.write_session() as session:
        submission = owned(session, submission_id, user)
        if hidden and not submission.hidden:
            request_stop(session, submission_id, STOP_REASONS["hide"])
        submission.hidden, submission.updated_at = hidden, utcnow()
        audit(session, user.name, "hide" if hidden else "unhide", "accepted",
              submission_id=submission_id)
        board = (submission.track, submission.board)
    rebuild_board(database, *board)
    return {"id": submission_id, "hidden": hidden}


def delete(database: Database, submission_id: int, user: User) -> dict:
    """Mark deleted and drop the private predictions (scores stay as history); an evaluation
    that has not ended is stopped (its slot is given back once its process is gone)."""
    with database.write_session() as session:
        submission = owned(session, submission_id, user)
        request_stop(session, submission_id, STOP_REASONS["delete"])
        submission.deleted, submission.predictions = True, None
        submission.updated_at = utcnow()
        audit(session, user.name, "delete", "accepted", submission_id=submission_id)
        board = (submission.track, submission.board)
    rebuild_board(database, *board)
    return {"id": submission_id, "deleted": True}
