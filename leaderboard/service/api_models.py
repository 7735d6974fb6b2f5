"""The JSON API's answers as Pydantic models: what /api/v1/openapi.json documents and a
schemathesis run checks every answer against (tests/leaderboard/test_leaderboard_api_schema.py).

Open dictionaries (a task's metric dict, a card) stay dictionaries; the documents the workers
store (a board's JSON) are described here and served as stored.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Number = float | None


class Open(BaseModel):
    """A document that may grow fields: the documented ones are checked, others pass."""
    model_config = ConfigDict(extra="allow")


# ---- errors ---------------------------------------------------------------------------------
class ErrorItem(BaseModel):
    file: str | None = None
    line: int | None = None
    field: str | None = None
    message: str


class Rejection(BaseModel):
    """A submission (or request) refused: every problem found, each naming its place."""
    status: Literal["rejected"]
    errors: list[ErrorItem]


class Detail(BaseModel):
    """An HTTP error: its reason."""
    detail: str | list[Any]


ERRORS = {401: {"model": Detail, "description": "no valid API token"},
          403: {"model": Detail, "description": "not allowed to this user"},
          404: {"model": Detail, "description": "no such thing"},
          422: {"model": Rejection, "description": "the request was refused"}}
SUBMIT_ERRORS = {**ERRORS, 400: {"model": Rejection, "description": "unreadable form"},
                 413: {"model": Rejection, "description": "the upload is too large"},
                 429: {"model": Rejection, "description": "over the quota"}}


# ---- submissions ----------------------------------------------------------------------------
class Accepted(Open):
    """A submission stored and queued (202), or (200, `duplicate`) an earlier identical one."""
    id: int
    status: str
    duplicate: bool | None = None
    message: str | None = None
    ignored: list[str] | None = None
    not_hosted: int | None = Field(None, description="records of test items the board does "
                                   "not host, left out")


class LadderAnswer(BaseModel):
    value: Number
    improved: bool
    step: float
    note: str | None = None


class Cost(BaseModel):
    """What an evaluated entry cost, as the server measured it (GPU memory: None on a CPU);
    of a failed evaluation, what it spent up to the failure (generated tokens and the device:
    None when its process was ended before it could report them)."""
    seconds: float
    generated_tokens: int | None = None
    peak_rss_bytes: int
    peak_gpu_bytes: int | None = None
    device: str | None = None


class SubmissionView(BaseModel):
    """One submission as its viewer may see it (`scores` and `admin` for admins only); a
    field not declared here is not sent."""
    id: int
    model: str
    track: str
    variant: str
    kind: Literal["submission", "evaluation", "baseline", "reference", "builtin"]
    badge: str
    card: dict[str, Any]
    user: str | None
    status: Literal["queued", "evaluating", "scoring", "scored", "rejected", "failed"]
    errors: list[dict[str, Any]]
    parts: list[str]
    n_records: int
    hidden: bool
    created: str
    evaluation: dict[str, Any] | None = None
    laddered: bool | None = None
    headlines: dict[str, Number] | None = None
    ladder: dict[str, LadderAnswer] | None = None
    public_scores: dict[str, dict[str, Any] | None] | None = None
    breakdown: dict[str, dict[str, dict[str, Any]]] | None = None
    private_headlines: dict[str, Number] | None = None
    versions: dict[str, Any] | None = None
    card_badge: str | None = None
    analysed: bool | None = None
    scored: str | None = None
    scores: dict[str, dict[str, Any]] | None = None
    admin: dict[str, Any] | None = None
    gold_visibility: Literal["public", "private"] | None = None
    matches_public_gold: bool | None = None
    gold_match: dict[str, Any] | None = None
    cost: Cost | None = None


class Hidden(BaseModel):
    id: int
    hidden: bool


class Deleted(BaseModel):
    id: int
    deleted: bool


# ---- boards ---------------------------------------------------------------------------------
class BoardEntry(Open):
    id: int
    model: str
    kind: str
    badge: str
    scores: dict[str, Number]
    rank: int | None = None
    band: int | None = None
    aggregate: Number = None
    aggregate_ci95: list[float] | None = None
    ci95: dict[str, list[float] | None] | None = None
    analysis: str | None = None
    laddered: bool | None = None
    ladder: dict[str, str] | None = None
    private_scores: dict[str, Number] | None = None
    cost: Cost | None = None
    not_ranked: str | None = None
    matches_public_gold: bool | None = None


class BoardDocument(Open):
    """GET /leaderboard/{track}: the ranked and partial entries (`entries`), the listed but
    not ranked ones and, where the test gold is public, the self-reported predictions files
    (never ranked); rules and versions."""
    track: str
    variant: str
    gold_visibility: Literal["public", "private"] = "private"
    parts: list[str]
    entries: list[BoardEntry]
    not_ranked: list[BoardEntry] = []
    self_reported: list[BoardEntry] = []
    rules: dict[str, str]
    version_key: str
    public_items: dict[str, int] = {}
    linked: dict[str, dict[str, Any]] = {}
    revealed: bool = False


class Manifest(Open):
    """The items a submission answers (ids; FAC claims as digests) and how the instance
    validates them."""
    track: str
    board: str
    parts: dict[str, list[dict[str, Any]]]
    apart: dict[str, list[str]] | None = Field(None, description="per part, the articles "
                                              "the board does not host: records of them "
                                              "are left out")
    validation: dict[str, Any]


class Inputs(BaseModel):
    """The public inputs of a board: per part, the records to answer without gold fields."""
    track: str
    variant: str
    parts: dict[str, list[dict[str, Any]]]


class Tracks(BaseModel):
    tracks: dict[str, list[str]]


# ---- administration -------------------------------------------------------------------------
class Rescore(BaseModel):
    score: int
    analyse: int
    evaluate: int


class Revealed(BaseModel):
    revealed: bool
    changed: bool
    boards: int | None = None
    reason: str | None = None  # why nothing was revealed (a public-gold instance)


class AuditLog(BaseModel):
    entries: list[dict[str, Any]]


class UserHistory(Open):
    user: str
    admin: bool
    submissions: list[dict[str, Any]]
    near_identical: int
    probing_suspected: bool


class Users(BaseModel):
    users: list[UserHistory]
