"""The read-only board routes and the admin routes of the JSON API (/api/v1).

Boards: GET /leaderboard/{track}?variant= and /leaderboard/{track}.csv (stored outputs),
/manifest/{track}?variant= (item keys, what a board leaves apart, how this instance
validates), /inputs/{track}?variant= (the public inputs a submission answers, no gold field)
and /tracks (track -> boards). Admins: POST /admin/rescore and /admin/reveal, GET /admin/audit
and /admin/users (every user's submission history with the probing flag; audited).
"""
from __future__ import annotations

import json

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import JSONResponse, Response

from leaderboard.service.admin import reveal
from leaderboard.service.api_models import (
    ERRORS,
    AuditLog,
    BoardDocument,
    Inputs,
    Manifest,
    Rescore,
    Revealed,
    Tracks,
    Users,
)
from leaderboard.service.auth import TOKEN_REQUIRED, audit, audit_rows, authenticate, bearer_token
from leaderboard.service.boards import stored_output
from leaderboard.service.db import Database
from leaderboard.service.documents import SOURCES, TRAINING, filtered_document
from leaderboard.service.gold import board_inputs, tracks_and_boards
from leaderboard.service.probing import user_histories
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import manifest
from leaderboard.service.worker import queue_rescore
from tasks.plumbing.errors import SumbenchError


def request_user(database: Database, authorization: str | None, required: bool = True):
    """The user of the request's bearer token; 401 when `required` and there is none."""
    user = authenticate(database, bearer_token(authorization))
    if user is None and required:
        raise HTTPException(401, TOKEN_REQUIRED, headers={"WWW-Authenticate": "Bearer"})
    return user


def require_admin(database: Database, authorization: str | None):
    user = request_user(database, authorization)
    if not user.is_admin:
        raise HTTPException(403, "admins only")
    return user


def stored(database: Database, track: str, variant: str, name: str) -> str:
    """A board's stored output (rebuilt by the workers); 404 when the board does not exist."""
    text = stored_output(database, track, variant, name)
    if text is None:
        raise HTTPException(404, f"no board {track}/{variant}")
    return text


def board_filters(q: str | None, source: str | None, training: str | None,
                  device: str | None) -> dict:
    """The filters a board request asks for ({} when none); 422 for a value not known."""
    filters: dict = {}
    if q:
        filters["q"] = q
    if source is not None:
        chosen = [name for name in source.split(",") if name and name != "none"]
        unknown = [name for name in chosen if name not in SOURCES]
        if unknown:
            raise HTTPException(422, f"unknown source {unknown[0]!r} (sources: "
                                     f"{', '.join(SOURCES)})")
        filters["source"] = chosen
    if training:
        if training not in TRAINING:
            raise HTTPException(422, f"unknown training filter {training!r} (one of "
                                     f"{', '.join(TRAINING)})")
        filters["training"] = training
    if device:
        filters["device"] = device
    return filters


def board_routes(router: APIRouter, database: Database) -> None:

    @router.get("/leaderboard/{track}.csv", summary="A board as CSV, one row per entry",
                response_class=Response, responses={
        200: {"content": {"text/csv": {"schema": {"type": "string"}}},
              "description": "one row per entry"}, 404: ERRORS[404]})
    def leaderboard_csv(track: str, variant: str = "all"):
        return Response(stored(database, track, variant, "csv"), media_type="text/csv")

    @router.get("/leaderboard/{track}",
                summary="A board: entries, ranks, intervals, rules and versions",
                response_class=Response, responses={
        200: {"model": BoardDocument, "description": "the board as last rebuilt"},
        404: ERRORS[404]})
    def leaderboard(track: str, variant: str = "all",
                    q: str | None = Query(None, max_length=200,
                                          description="text in the model or user name"),
                    source: str | None = Query(None, description="comma-separated: evaluated, "
                                                                 "computed, predictions"),
                    training: str | None = Query(None, description="declared, test-seen or "
                                                                   "undeclared"),
                    device: str | None = Query(None, max_length=200,
                                               description="the device an entry was "
                                                           "evaluated on")):
        text = stored(database, track, variant, "document")
        filters = board_filters(q, source, training, device)
        if not filters:
            return Response(text, media_type="application/json")
        return JSONResponse(filtered_document(json.loads(text), filters))

    @router.get("/manifest/{track}",
                summary="The items a submission answers, and how they are checked",
                response_model=Manifest, response_model_exclude_unset=True,
                responses=ERRORS)
    def manifest_route(track: str, variant: str = "all"):
        try:
            return manifest(database, load_settings(database), track, variant)
        except SumbenchError as error:
            raise HTTPException(404, str(error)) from None

    @router.get("/inputs/{track}", summary="The public inputs of a board, without gold fields",
                response_model=Inputs, responses=ERRORS)
    def inputs_route(track: str, variant: str = "all"):
        try:
            return board_inputs(database, load_settings(database).track(track), variant)
        except SumbenchError as error:
            raise HTTPException(404, str(error)) from None
        except NotImplementedError as error:
            raise HTTPException(404, str(error)) from None

    @router.get("/tracks", summary="Every track and its boards",
                response_model=Tracks)
    def tracks_route():
        return {"tracks": tracks_and_boards(database)}


def admin_routes(router: APIRouter, database: Database) -> None:
    @router.post("/admin/rescore",
                 summary="Queue every entry not scored under the current versions (admins)",
                 status_code=202, response_model=Rescore, responses=ERRORS)
    def rescore(authorization: str | None = Header(None)):
        require_admin(database, authorization)
        return queue_rescore(database)

    @router.post("/admin/reveal", summary="Publish the private part's scores (admins, audited)",
                 response_model=Revealed, responses=ERRORS)
    def reveal_route(authorization: str | None = Header(None)):
        return reveal(database, require_admin(database, authorization).name)

    @router.get("/admin/audit", summary="The append-only audit log (admins)",
                response_model=AuditLog, responses=ERRORS)
    def audit_log(authorization: str | None = Header(None), limit: int = 100):
        require_admin(database, authorization)
        return {"entries": audit_rows(database, max(1, min(limit, 1000)))}

    @router.get("/admin/users",
                summary="Every user's submission history with the probing flag (admins, audited)",
                response_model=Users, responses=ERRORS)
    def users(authorization: str | None = Header(None)):
        return {"users": admin_user_histories(database, authorization)}


def admin_user_histories(database: Database, authorization: str | None) -> list[dict]:
    """Every user's submission history (admins only; the read is audited)."""
    admin = require_admin(database, authorization)
    with database.write_session() as session:
        audit(session, admin.name, "read", "accepted", detail={"what": "user histories"})
    return user_histories(database)
