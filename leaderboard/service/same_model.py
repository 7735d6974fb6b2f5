"""The duplicate rule of models evaluated here: an evaluation of the same model (the same
weights fingerprint, files key and predict settings) as an earlier one on the board fails,
naming it where it may be named (leaderboard.service.evaluation runs it once the model is
fetched and hashed)."""
from __future__ import annotations

import json

from sqlalchemy import select

from leaderboard.service.db import Database, Submission
from leaderboard.service.evaluation_process import EvaluationFailed


def claim_content(database: Database, job, evaluation: dict) -> None:
    """Record the digests on the submission, unless an earlier evaluation on the board of the
    same model blocks it (`same_model`): then fail, naming it."""
    with database.write_session() as session:
        submission = session.scalars(select(Submission).where(
            Submission.id == job.submission_id).with_for_update()).one()
        earlier = same_model(session, submission, evaluation)
        shown = earlier is not None and not earlier.hidden  # a hidden one is never named
        duplicate = {"duplicate_of": earlier.id} if shown else {}
        submission.evaluation = json.dumps({**evaluation, **duplicate}, sort_keys=True)
        which = None if earlier is None else f"submission {earlier.id}" if shown else \
            "one of your hidden submissions (unhide it to show it)"
    if which is not None:
        raise EvaluationFailed(f"{which} already evaluated the same model (the same weights, "
                               f"files and predict settings): not evaluated again")


#: the states of an evaluation that block the same model's evaluation by its own user (any
#: but failed); another user's blocks only once scored and while it is shown
BLOCKING_STATES = ("queued", "evaluating", "scoring", "scored")


def same_model(session, submission: Submission, evaluation: dict) -> Submission | None:
    """The earliest other evaluation on the board of the same model (the same weights
    fingerprint, files key and predict settings, whatever its name or files beside them)
    that blocks this one: the user's own, hidden or not, unless deleted or failed; another
    user's only when scored and shown (so no one can squat a public model by evaluating it
    and hiding the entry, and no answer names another user's hidden entry). A shown one is
    preferred, so that the answer can name it."""
    blocking = []
    for other in session.scalars(select(Submission).where(
            Submission.kind == "evaluation", Submission.track == submission.track,
            Submission.board == submission.board, Submission.id != submission.id,
            Submission.deleted.is_(False), Submission.status.in_(BLOCKING_STATES))
            .order_by(Submission.id)):
        if other.user_id != submission.user_id and (other.hidden or other.status != "scored"):
            continue
        stored = json.loads(other.evaluation or "{}")
        if all(stored.get(key) == evaluation[key] for key in ("weights", "files_key",
                                                               "predict")):
            blocking.append(other)
    return min(blocking, key=lambda other: (other.hidden, other.id), default=None)
