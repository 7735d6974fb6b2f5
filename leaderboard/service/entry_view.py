"""What anyone may see of one submission (`public_view`): its status and card, and once
scored what its kind may publish. A laddered entry (a participant's predictions file or
evaluated model, on private gold) shows only what the Ladder released
(leaderboard.service.ladder); the server's own entries their public part's metric
dicts and breakdown; admins also the whole test set's, each such read audited.
"""
from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from leaderboard.service.auth import audit
from leaderboard.service.boards import BADGES, CARD_BADGE, private_headlines
from leaderboard.service.db import Database, Score, User
from leaderboard.service.ladder import released_headlines
from leaderboard.service.settings import InstanceSettings, load_settings
from leaderboard.service.submissions import NotFound, stored_submission


def public_view(database: Database, submission_id: int, viewer: User | None = None) -> dict:
    """What anyone may see of a submission: status, errors, card and, once scored, what its
    kind may publish (`score_view`). Hidden submissions are visible to their owner and admins
    only; deleted ones to none. An admin also sees the whole test set's metric dicts
    (`scores`) and the public part's exact detail (`admin`); each such read is audited."""
    with database.session() as session:
        submission = stored_submission(session, submission_id)
        visible = submission is not None and not submission.deleted and (
            not submission.hidden or (viewer is not None and (
                viewer.is_admin or viewer.id == submission.user_id)))
        if not visible:
            raise NotFound(f"no submission {submission_id}")
        owner = session.get(User, submission.user_id)
        score = session.scalars(select(Score).filter_by(
            submission_id=submission.id, current=True).order_by(Score.id.desc())).first()
        view = {"id": submission.id, "model": submission.model, "track": submission.track,
                "variant": submission.board, "kind": submission.kind,
                "badge": BADGES[submission.kind], "card": json.loads(submission.card),
                "card_badge": CARD_BADGE, "user": owner.name if owner else None,
                "status": submission.status,
                "errors": json.loads(submission.errors) if submission.errors else [],
                "parts": json.loads(submission.parts), "n_records": submission.n_records,
                "hidden": submission.hidden,
                "created": submission.created_at.isoformat(timespec="seconds") + "Z"}
        if submission.evaluation:
            view["evaluation"] = json.loads(submission.evaluation)
            if view["evaluation"].get("cost"):
                view["cost"] = view["evaluation"]["cost"]
        admin = viewer is not None and viewer.is_admin
        settings = load_settings(database, session)
        view["gold_visibility"] = settings.gold_visibility
        if score is not None and submission.status == "scored":
            view.update(score_view(score, settings, admin))
    if admin and "admin" in view:
        with database.write_session() as session:
            audit(session, viewer.name, "read", "accepted", submission_id=submission_id,
                  detail={"what": "whole test set scores and exact public detail"})
    return view


def score_view(score: Score, settings: InstanceSettings, admin: bool) -> dict:
    """What a scored entry publishes: an entry the Ladder answers (a predictions file of a
    user who is not an admin) shows the released headlines only (`ladder` says which part
    improved), never a metric dict, count, interval or per-domain score; the others their
    public part's headlines, metric dicts (`public_scores`) and per-domain breakdown. After
    `reveal`, the private part's headlines too."""
    released = json.loads(score.released) if score.released else None
    breakdown = json.loads(score.breakdown) if score.breakdown else None
    view: dict[str, Any] = {"versions": json.loads(score.versions), "analysed": score.analysed,
                            "scored": score.created_at.isoformat(timespec="seconds") + "Z",
                            "laddered": released is not None}
    public = json.loads(score.public_results or score.results)  # rows from before the split
    if released is None:
        view.update(headlines=json.loads(score.headlines), public_scores=public,
                    breakdown=breakdown)
    else:  # no per-domain breakdown: each domain's score would be one more question
        view.update(headlines=released_headlines(released), ladder=released)
    if settings.revealed:
        view["private_headlines"] = private_headlines(score, released)
    if score.gold_match:
        view["gold_match"] = json.loads(score.gold_match)
        view["matches_public_gold"] = view["gold_match"]["matches_public_gold"]
    if admin:
        view["scores"] = json.loads(score.results)
        view["admin"] = {"public_headlines": json.loads(score.headlines),
                         "public_scores": public, "breakdown": breakdown,
                         "private_scores": json.loads(score.private_results or "{}")}
    return view
