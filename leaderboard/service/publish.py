"""Rebuilding a board: its snapshot, chart, rendered page, API document and CSV, stored in one
row, so that page and API requests only read a stored text.

Only the final store holds the write lock. A rebuild first takes a ticket (a short write: ids
only grow), then reads everything it ranks in one snapshot transaction and renders outside any
transaction, then stores, in a write transaction that locks the board row, unless the row
already holds a snapshot of a newer ticket. A newer ticket was taken later, so its reads began
later and saw at least as much: a slow rebuild never replaces a newer snapshot with an older
one. The rebuild that took the newest ticket always stores, and every change is followed by a
rebuild that takes its ticket after the change committed, so the stored board ends up current.
"""
from __future__ import annotations

import json

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from leaderboard.service.boards import build_snapshot, chart_of
from leaderboard.service.db import Board, Database, RebuildTicket, utcnow
from leaderboard.service.documents import board_csv, board_document
from leaderboard.service.views import Links, render


def rebuild_board(database: Database, track: str, board: str) -> dict | None:
    """Recompute and store one board; returns the snapshot (None: the board has no gold).
    A snapshot that a newer rebuild already replaced is returned but not stored."""
    ticket = take_ticket(database)
    with database.snapshot_session() as session:
        snapshot = build_snapshot(database, track, board, session)
    if snapshot is None:
        return None
    store_board(database, track, board, ticket, render_outputs(snapshot))
    return snapshot


def take_ticket(database: Database) -> int:
    with database.write_session() as session:
        ticket = RebuildTicket()
        session.add(ticket)
        session.flush()
        return ticket.id


def render_outputs(snapshot: dict) -> dict:
    """What requests serve, rendered from the snapshot (pure: no database)."""
    return {"snapshot": json.dumps(snapshot), "version_key": snapshot["version_key"],
            "chart": chart_of(snapshot), "page": render("track.html", Links(static=False),
                                                        board=snapshot),
            "document": json.dumps(board_document(snapshot)), "csv": board_csv(snapshot)}


def store_board(database: Database, track: str, board: str, ticket: int,
                outputs: dict) -> bool:
    """Store the rendered outputs unless the board holds a newer ticket's; True when stored.
    Two first rebuilds of a board may both find no row on PostgreSQL: the one that inserts
    second fails on the unique key and compares tickets again."""
    for attempt in range(2):
        try:
            with database.write_session() as session:
                return _store(session, track, board, ticket, outputs)
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def board_row(session, track: str, board: str) -> Board | None:
    return session.scalars(select(Board).filter_by(track=track, board=board)
                           .with_for_update()).one_or_none()


def _store(session, track: str, board: str, ticket: int, outputs: dict) -> bool:
    row = board_row(session, track, board)
    if row is not None and (row.ticket or 0) > ticket:
        return False
    if row is None:
        row = Board(track=track, board=board)
        session.add(row)
    for name, value in outputs.items():
        setattr(row, name, value)
    row.ticket, row.computed_at = ticket, utcnow()
    session.flush()
    session.execute(delete(RebuildTicket).where(RebuildTicket.id < ticket))
    return True
