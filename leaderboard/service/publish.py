"""Rebuilding a board: its snapshot, chart, rendered page, API document and CSV, stored in one
row in one write transaction, so that page and API requests only read a stored text."""
from __future__ import annotations

import json

from sqlalchemy import select

from leaderboard.service.boards import build_snapshot, chart_of
from leaderboard.service.db import Board, Database, utcnow
from leaderboard.service.documents import board_csv, board_document
from leaderboard.service.views import Links, render


def rebuild_board(database: Database, track: str, board: str) -> dict | None:
    """Recompute and store one board; returns the snapshot (None: the board has no gold)."""
    with database.write_session() as session:
        snapshot = build_snapshot(database, track, board, session)
        if snapshot is None:
            return None
        row = session.scalars(select(Board).filter_by(track=track, board=board)).one_or_none()
        if row is None:
            row = Board(track=track, board=board)
            session.add(row)
        row.version_key, row.snapshot = snapshot["version_key"], json.dumps(snapshot)
        row.chart, row.computed_at = chart_of(snapshot), utcnow()
        row.page = render("track.html", Links(static=False), board=snapshot)
        row.document = json.dumps(board_document(snapshot))
        row.csv = board_csv(snapshot)
        return snapshot
