"""Decisions only admins take: publishing the private part (`reveal`), audited."""
from __future__ import annotations

import dataclasses

from leaderboard.service.auth import audit
from leaderboard.service.db import Database
from leaderboard.service.gold import boards_of
from leaderboard.service.publish import rebuild_board
from leaderboard.service.settings import load_settings, save_settings

NOTHING_TO_REVEAL = ("the test gold is public: every test item is ranked already, and there is "
                     "no private part to reveal")


def reveal(database: Database, actor: str) -> dict:
    """Publish the private part's scores of every entry (the live boards keep ranking on the
    public part and show the private headlines beside); audited. Returns what changed."""
    settings = load_settings(database)
    if settings.gold_is_public:
        return {"revealed": False, "changed": False, "reason": NOTHING_TO_REVEAL}
    if settings.revealed:
        return {"revealed": True, "changed": False}
    save_settings(database, dataclasses.replace(settings, revealed=True))
    with database.write_session() as session:
        audit(session, actor, "reveal", "accepted",
              detail={"private_fraction": settings.private_fraction})
    boards = [(track, board) for track, names in boards_of(database).items()
              for board in names]
    for track, board in boards:
        rebuild_board(database, track, board)
    return {"revealed": True, "changed": True, "boards": len(boards)}
