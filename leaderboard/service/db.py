"""The leaderboard's database: SQLAlchemy 2 models, engines for SQLite and PostgreSQL.

Any SQLAlchemy URL works; a plain path means a SQLite file. SQLite runs in WAL mode with a
busy timeout and foreign keys on; transactions that claim work take the write lock up front
(`BEGIN IMMEDIATE`, see `write_session`), which is SQLite's safe equivalent of PostgreSQL's
`SELECT ... FOR UPDATE SKIP LOCKED`. The schema is created and upgraded by Alembic migrations
(leaderboard/service/migrations), never by `create_all`.

Private columns (never rendered or exported): `GoldPart.payload`, `Submission.predictions`,
`Submission.item_digests`, `Score.results` and `Score.private_results` (admins only, audited;
private results also once `reveal`ed), `Material.*`, `Token.token_hash`, the `secret` setting.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

SUBMISSION_STATES = ("queued", "evaluating", "scoring", "scored", "rejected", "failed")
#: "stopping": its submission was deleted or hidden, its worker is ending its process
JOB_STATES = ("queued", "running", "stopping", "done", "failed")
#: who made an entry: a user's submission, or rows the server computes itself
ENTRY_KINDS = ("submission", "evaluation", "baseline", "reference", "builtin")


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def pack(obj: Any) -> bytes:
    """JSON, zlib-compressed (private blobs)."""
    return zlib.compress(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def unpack(blob: bytes | None) -> Any:
    return None if blob is None else json.loads(zlib.decompress(blob).decode())


class Base(DeclarativeBase):
    pass


class GoldPart(Base):
    """Hidden gold of one part (task / dataset) of one board of a track."""
    __tablename__ = "gold_parts"
    __table_args__ = (UniqueConstraint("track", "board", "part"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    track: Mapped[str] = mapped_column(String(32))
    board: Mapped[str] = mapped_column(String(64))
    part: Mapped[str] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64))
    n_items: Mapped[int] = mapped_column(Integer)
    payload: Mapped[bytes] = mapped_column(LargeBinary)
    loaded_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class Token(Base):
    """An API token: only the sha256 of the token is stored."""
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (Index("ix_submissions_board", "track", "board", "status"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    kind: Mapped[str] = mapped_column(String(16), default="submission")
    track: Mapped[str] = mapped_column(String(32))
    board: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200))
    card: Mapped[str] = mapped_column(Text, default="{}")        # JSON, self-reported
    status: Mapped[str] = mapped_column(String(16), default="queued")
    errors: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON list
    parts: Mapped[str] = mapped_column(Text, default="[]")       # JSON list of parts covered
    n_records: Mapped[int] = mapped_column(Integer, default=0)
    upload_sha256: Mapped[str] = mapped_column(String(64), default="")
    predictions: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # private
    #: a model the server evaluates (kind "evaluation"): JSON of its source, revision,
    #: profile, content digest and predict settings
    evaluation: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: private: per part, a short digest of each item's prediction (the probing check)
    item_digests: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class Job(Base):
    """Work for the workers: "evaluate" (run a submitted model on the hidden test inputs),
    "score" (join + official metrics) and "analyse" (bootstrap distributions, breakdown,
    board refresh) of a submission."""
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_state", "state", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_until: Mapped[float] = mapped_column(Float, default=0.0)   # epoch seconds
    worker: Mapped[str] = mapped_column(String(100), default="")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[_dt.datetime | None] = mapped_column(DateTime, nullable=True)


class Score(Base):
    """One scoring of a submission under one version set (unique: scored at most once)."""
    __tablename__ = "scores"
    __table_args__ = (UniqueConstraint("submission_id", "version_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    version_key: Mapped[str] = mapped_column(String(64))
    versions: Mapped[str] = mapped_column(Text)        # JSON: data sha256, metric versions, ...
    results: Mapped[str] = mapped_column(Text)         # JSON: part -> metric dict of the
    #                                                    whole test set (admins only)
    headlines: Mapped[str] = mapped_column(Text)       # JSON: part -> public part's x100
    public_results: Mapped[str | None] = mapped_column(Text, nullable=True)  # public part
    private_results: Mapped[str | None] = mapped_column(Text, nullable=True)  # private part
    #: the Ladder's answer for a predictions file: part -> {"value", "improved"} (None: the
    #: entry is not laddered)
    released: Mapped[str | None] = mapped_column(Text, nullable=True)
    breakdown: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: public gold only: how many of a predictions file's records copy the gold answer
    #: (leaderboard.tracks.base.gold_match_summary)
    gold_match: Mapped[str | None] = mapped_column(Text, nullable=True)
    current: Mapped[bool] = mapped_column(Boolean, default=True)
    analysed: Mapped[bool] = mapped_column(Boolean, default=False)
    seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class Material(Base):
    """Private per-example material of one part of a score, and its bootstrap distribution."""
    __tablename__ = "materials"
    __table_args__ = (UniqueConstraint("score_id", "part"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    score_id: Mapped[int] = mapped_column(ForeignKey("scores.id"))
    part: Mapped[str] = mapped_column(String(64))
    examples: Mapped[bytes] = mapped_column(LargeBinary)
    distribution: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class Board(Base):
    """The latest ranking snapshot of one board and what requests serve from it as stored:
    the chart, the rendered page, the API document and the CSV."""
    __tablename__ = "boards"
    __table_args__ = (UniqueConstraint("track", "board"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    track: Mapped[str] = mapped_column(String(32))
    board: Mapped[str] = mapped_column(String(64))
    version_key: Mapped[str] = mapped_column(String(64))
    snapshot: Mapped[str] = mapped_column(Text)
    chart: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    page: Mapped[str | None] = mapped_column(Text, nullable=True)        # rendered HTML
    document: Mapped[str | None] = mapped_column(Text, nullable=True)    # the API's JSON
    csv: Mapped[str | None] = mapped_column(Text, nullable=True)
    cost_chart: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # PNG
    computed_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    #: the horizon of the stored snapshot (the newest rebuild ticket its reads saw): a snapshot
    #: of a lower horizon was read earlier and never replaces it (None: stored before tickets)
    ticket: Mapped[int | None] = mapped_column(Integer, nullable=True)


class RebuildTicket(Base):
    """Tickets taken by board rebuilds before they read the database: ids only grow (SQLite:
    AUTOINCREMENT, so deleting old rows never lets an id be used again; PostgreSQL: a
    sequence). The newest ticket a snapshot sees orders snapshots (leaderboard.service.publish)."""
    __tablename__ = "rebuild_tickets"
    __table_args__ = {"sqlite_autoincrement": True}
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    taken_at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class Setting(Base):
    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class AuditEntry(Base):
    """Append-only record of every attempt (rows are never updated or deleted)."""
    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str | None] = mapped_column(String(100), nullable=True)
    action: Mapped[str] = mapped_column(String(32))
    outcome: Mapped[str] = mapped_column(String(16))
    submission_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="{}")
    scorer_version: Mapped[str] = mapped_column(String(32), default="")


@event.listens_for(AuditEntry, "before_update")
@event.listens_for(AuditEntry, "before_delete")
def _audit_is_append_only(mapper, connection, target) -> None:
    raise RuntimeError("the audit log is append-only")


# ---- engines and sessions -------------------------------------------------------------------
def database_url(db: str) -> str:
    """A SQLAlchemy URL; a plain path (or file name) means a SQLite file."""
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).resolve()}"


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, record) -> None:
        dbapi_connection.isolation_level = None    # SQLAlchemy emits BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "foreign_keys=ON", "busy_timeout=60000",
                       "synchronous=NORMAL"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection) -> None:
        immediate = connection.get_execution_options().get("write_lock", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_engine(db: str) -> Engine:
    url = database_url(db)
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    return create_engine(url, pool_pre_ping=True)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


class Database:
    """An engine and its session factory."""

    def __init__(self, db: str):
        self.url = database_url(db)
        self.engine = make_engine(db)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        with self.sessions() as session, session.begin():
            yield session

    @contextlib.contextmanager
    def snapshot_session(self) -> Iterator[Session]:
        """A read transaction whose statements all see one state of the database: SQLite in WAL
        mode keeps the snapshot of its first read, PostgreSQL runs it as REPEATABLE READ (its
        default, READ COMMITTED, gives each statement its own). It takes no write lock."""
        options = {} if is_sqlite(self.engine) else {"isolation_level": "REPEATABLE READ"}
        with self._transaction(options) as session:
            yield session

    @contextlib.contextmanager
    def write_session(self) -> Iterator[Session]:
        """A transaction that holds the write lock from its start on SQLite (BEGIN
        IMMEDIATE); on PostgreSQL row locks (FOR UPDATE SKIP LOCKED) do the claiming."""
        with self._transaction({"write_lock": True}) as session:
            yield session

    @contextlib.contextmanager
    def _transaction(self, options: dict) -> Iterator[Session]:
        """A session whose transaction begins at once with these connection options."""
        with self.sessions() as session:
            session.connection(execution_options=options)  # begins here
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        self.engine.dispose()
