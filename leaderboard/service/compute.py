"""What one participant's evaluations may cost: how many may wait or run at once, and the
generated tokens and wall-clock seconds of each.

- `evaluations_per_user` (default 2): a user's evaluations queued or running at once; one
  more is refused when submitted (429, naming the limit). Admins have none. An evaluation
  deleted or hidden while it runs holds its slot until its worker has ended the model's
  process (leaderboard.service.jobs.request_stop), so deleting and submitting again never
  runs more at once.
- An evaluation's token budget: `evaluate_token_budget`, or by default (0) the release's
  `max_new_tokens` for every model input the evaluation runs (each EVEXT claim and window,
  each EXT window, each FAC pair, ...: what a model that never stops spends at most), planned
  by the evaluation process with the code `sumbench predict` plans with and the model's own
  tokenizer. The evaluation process stops past it.
- Its wall-clock limit grows with the model inputs, planned by the worker the same way
  without the model's tokenizer (an input longer than a window counts once):
  `evaluate_base_seconds` plus `evaluate_seconds_per_token` per budgeted token, never more
  than `evaluate_seconds`.

When a limit is hit the entry fails with the limit in its reason. Scoring and analysis never
wait for an evaluation: the server runs them on workers of their own (`serve`).
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, exists, func, or_, select

from leaderboard.service.db import Job, Submission, User
from leaderboard.service.jobs import HELD_STATES
from leaderboard.service.settings import InstanceSettings
from leaderboard.service.submissions import QuotaExceeded

#: the states of an evaluation that hold one of its user's slots
RUNNING_STATES = ("queued", "evaluating")


class TooManyEvaluations(QuotaExceeded):
    """A user's evaluations queued or running are at the instance's limit."""


@dataclass(frozen=True)
class EvaluationBudget:
    tokens: int      # generated tokens the evaluation process may spend
    seconds: int     # its wall-clock limit

    def to_dict(self) -> dict:
        return {"max_generated_tokens": self.tokens, "seconds": self.seconds}


def evaluation_budget(settings: InstanceSettings, generations: int,
                      max_new_tokens: int) -> EvaluationBudget:
    """The budget of an evaluation that runs `generations` model inputs (see the module's
    rules)."""
    tokens = settings.evaluate_token_budget or generations * max_new_tokens
    seconds = settings.evaluate_base_seconds + tokens * settings.evaluate_seconds_per_token
    return EvaluationBudget(int(tokens), int(min(settings.evaluate_seconds, seconds)))


def evaluations_waiting(session, user: User) -> int:
    """The user's evaluations queued or running: not deleted, in RUNNING_STATES, or (deleted
    too) with an evaluate job a worker still holds (running, or stopping its process)."""
    held = exists(select(Job.id).where(Job.submission_id == Submission.id,
                                       Job.kind == "evaluate", Job.state.in_(HELD_STATES)))
    return int(session.scalar(select(func.count(Submission.id)).where(
        Submission.user_id == user.id, Submission.kind == "evaluation", or_(
            and_(Submission.deleted.is_(False), Submission.status.in_(RUNNING_STATES)),
            held))) or 0)


def check_evaluation_slots(session, settings: InstanceSettings, user: User) -> None:
    """Refuse one more evaluation of a user whose queued and running ones are at the limit."""
    if not user.is_admin and evaluations_waiting(session, user) >= settings.evaluations_per_user:
        raise TooManyEvaluations(
            f"{settings.evaluations_per_user} of your evaluations are queued or running (this "
            f"instance's limit): submit this one when one of them has finished")
