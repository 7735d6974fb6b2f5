"""Users, API tokens (only their sha256 is stored), quotas and the append-only audit log."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import secrets
from typing import Any

from sqlalchemy import func, select

from leaderboard.service.db import AuditEntry, Database, Submission, Token, User, utcnow
from leaderboard.service.settings import SCORER_VERSION
from tasks.plumbing.errors import SumbenchError

TOKEN_PREFIX = "sb_"
#: the answer (401) to a request that needs a token and has no valid one
TOKEN_REQUIRED = "a valid API token is required (Authorization: Bearer ...)"
SYSTEM_USER = "sumbench"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def ensure_user(session, name: str, admin: bool = False) -> User:
    user = session.scalars(select(User).filter_by(name=name)).one_or_none()
    if user is None:
        user = User(name=name, is_admin=admin)
        session.add(user)
        session.flush()
    elif admin and not user.is_admin:
        user.is_admin = True
    return user


def check_user_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > 100 or any(not ch.isprintable() for ch in name):
        raise SumbenchError("a user name is 1-100 printable characters")
    if name == SYSTEM_USER:
        raise SumbenchError(f"the user name {SYSTEM_USER!r} is reserved for rows the server "
                            f"computes itself")
    return name


def create_token(database: Database, user_name: str, admin: bool = False) -> str:
    """A new token for the user (created when new); shown once, only its hash is kept."""
    name = check_user_name(user_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with database.write_session() as session:
        user = ensure_user(session, name, admin)
        session.add(Token(user_id=user.id, token_hash=token_hash(token)))
        audit(session, name, "token", "accepted", detail={"admin": bool(user.is_admin)})
    return token


def revoke_tokens(database: Database, user_name: str) -> int:
    """Revoke every token of the user (audited); returns how many were live."""
    name = check_user_name(user_name)
    with database.write_session() as session:
        user = session.scalars(select(User).filter_by(name=name)).one_or_none()
        if user is None:
            raise SumbenchError(f"no user {name!r}")
        live = session.scalars(select(Token).filter_by(user_id=user.id, revoked=False)).all()
        for token in live:
            token.revoked = True
        audit(session, name, "revoke", "accepted", detail={"tokens": len(live)})
    return len(live)


def authenticate(database: Database, token: str | None) -> User | None:
    """The user of a valid, unrevoked token; None otherwise."""
    if not token:
        return None
    with database.session() as session:
        return session.scalars(
            select(User).join(Token, Token.user_id == User.id)
            .where(Token.token_hash == token_hash(token), Token.revoked.is_(False))
        ).one_or_none()


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


#: the kinds a user's quota counts: predictions files and models to evaluate
QUOTA_KINDS = ("submission", "evaluation")


def submissions_since(session, user: User, days: int) -> int:
    """The user's submissions of the last `days` days, hidden and deleted ones included (a
    hidden probe is still an answer received)."""
    since = utcnow() - _dt.timedelta(days=days)
    return int(session.scalar(select(func.count(Submission.id)).where(
        Submission.user_id == user.id, Submission.created_at >= since,
        Submission.kind.in_(QUOTA_KINDS))) or 0)


def rejections_since(session, user: User, hours: int) -> int:
    """The user's rejected submissions (audit rows) of the last `hours` hours."""
    since = utcnow() - _dt.timedelta(hours=hours)
    return int(session.scalar(select(func.count(AuditEntry.id)).where(
        AuditEntry.actor == user.name, AuditEntry.action == "submit",
        AuditEntry.outcome == "rejected", AuditEntry.at >= since)) or 0)


def audit(session, actor: str | None, action: str, outcome: str, *,
          submission_id: int | None = None, detail: Any = None) -> None:
    """Append one audit row (in the caller's transaction)."""
    session.add(AuditEntry(actor=actor, action=action, outcome=outcome,
                           submission_id=submission_id,
                           detail=json.dumps(detail or {}, sort_keys=True, default=str),
                           scorer_version=SCORER_VERSION))


def system_user(session) -> User:
    return ensure_user(session, SYSTEM_USER, admin=True)


def audit_rows(database: Database, limit: int = 100) -> list[dict]:
    with database.session() as session:
        rows = session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit))
        return [{"id": row.id, "at": row.at.isoformat(timespec="seconds"), "actor": row.actor,
                 "action": row.action, "outcome": row.outcome,
                 "submission_id": row.submission_id, "detail": json.loads(row.detail),
                 "scorer_version": row.scorer_version} for row in rows]
