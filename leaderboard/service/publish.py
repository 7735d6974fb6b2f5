"""Rebuilding a board: its snapshot, chart, rendered page, API document and CSV, stored in one
row, so that page and API requests only read a stored text.

Only the final store holds the write lock. A rebuild first takes a ticket (a short write;
ticket ids only grow), then reads settings, gold and entries in one snapshot transaction,
together with the newest ticket that snapshot sees (its horizon), renders outside any
transaction, and stores in a write transaction that locks the board row, only if its horizon
is higher than the stored snapshot's. Snapshots only grow, and each holds every ticket
committed before it, so a snapshot of a lower horizon was read earlier (of an equal one,
perhaps earlier): a slow rebuild never replaces a board read later than its own. A change (a
new score, hiding, deleting, new gold or settings) commits before its rebuild takes a ticket,
so a snapshot without the change has a horizon below that ticket and one whose horizon reaches
it holds the change: once the change's own rebuild has stored (or a later one, in its stead),
no store takes the board back past it.
"""
from __future__ import annotations

import json

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError

from leaderboard.service.boards import build_snapshot, chart_of, cost_chart_of
from leaderboard.service.db import Board, Database, RebuildTicket, utcnow
from leaderboard.service.documents import board_csv, board_document
from leaderboard.service.views import Links, render


def rebuild_board(database: Database, track: str, board: str) -> dict | None:
    """Recompute and store one board; returns the snapshot (None: the board has no gold).
    A snapshot older than the stored one is returned but not stored."""
    take_ticket(database)
    with database.snapshot_session() as session:
        horizon = newest_ticket(session)
        snapshot = build_snapshot(database, track, board, session)
    if snapshot is None:
        return None
    store_board(database, track, board, horizon, render_outputs(snapshot))
    return snapshot


def newest_ticket(session) -> int:
    """The horizon of a snapshot: the newest ticket it sees."""
    return session.scalar(select(func.max(RebuildTicket.id))) or 0


def take_ticket(database: Database) -> int:
    with database.write_session() as session:
        ticket = RebuildTicket()
        session.add(ticket)
        session.flush()
        return ticket.id


def render_outputs(snapshot: dict) -> dict:
    """What requests serve, rendered from the snapshot (pure: no database)."""
    links = Links(static=False, visibility=snapshot.get("gold_visibility"))
    return {"snapshot": json.dumps(snapshot), "version_key": snapshot["version_key"],
            "chart": chart_of(snapshot), "cost_chart": cost_chart_of(snapshot),
            "page": render("track.html", links, board=snapshot),
            "document": json.dumps(board_document(snapshot)), "csv": board_csv(snapshot)}


def store_board(database: Database, track: str, board: str, horizon: int,
                outputs: dict) -> bool:
    """Store the rendered outputs if their horizon is higher than the stored snapshot's; True
    when stored. Two first rebuilds of a board may both find no row on PostgreSQL: the one
    that inserts second fails on the unique key and compares horizons again."""
    for attempt in range(2):
        try:
            with database.write_session() as session:
                return _store(session, track, board, horizon, outputs)
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def board_row(session, track: str, board: str) -> Board | None:
    return session.scalars(select(Board).filter_by(track=track, board=board)
                           .with_for_update()).one_or_none()


def _store(session, track: str, board: str, horizon: int, outputs: dict) -> bool:
    row = board_row(session, track, board)
    if row is not None and row.ticket is not None and row.ticket >= horizon:
        return False  # read no later than the stored one (an equal horizon may be earlier)
    if row is None:
        row = Board(track=track, board=board)
        session.add(row)
    for name, value in outputs.items():
        setattr(row, name, value)
    row.ticket, row.computed_at = horizon, utcnow()
    session.flush()  # older tickets go; the newest stays, so the horizon never goes back
    session.execute(delete(RebuildTicket).where(RebuildTicket.id < horizon))
    return True
