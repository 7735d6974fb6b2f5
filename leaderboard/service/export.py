"""The static export of the whole site.

`export_site` writes the same pages as the live app (same templates, relative links), each
board's JSON, CSV and chart, and every visible entry's page and JSON, plus compare pages for
neighbours on each board, into a folder that any static host can serve. Like the live pages
it holds aggregates and intervals only.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from leaderboard.service.boards import all_boards, read_board, stored_output
from leaderboard.service.db import Database
from leaderboard.service.documents import board_csv, board_document
from leaderboard.service.entry_view import public_view
from leaderboard.service.part_page import part_view
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import NotFound
from leaderboard.service.views import STATIC, Links, compare_view, entry_ranks, home_view, render
from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError


def export_site(database: Database, out_dir: str | Path) -> dict:
    """Write the static site to `out_dir` (replaced as a whole); returns file counts."""
    links = Links(static=True, visibility=load_settings(database).gold_visibility)
    counts = {"boards": 0, "tasks": 0, "entries": 0, "compare": 0}
    with atomic_directory(out_dir) as staging:
        shutil.copytree(STATIC, staging / "static")
        (staging / "index.html").write_text(render("index.html", links,
                                                   **home_view(database)), encoding="utf-8")
        for track, board in all_boards(database):
            snapshot, chart = read_board(database, track, board)
            counts["boards"] += 1
            (staging / links.track(track, board)).write_text(
                render("track.html", links, board=snapshot), encoding="utf-8")
            for part in snapshot["parts"]:
                (staging / links.part(track, board, part)).write_text(
                    render("part.html", links, **part_view(database, snapshot, part),
                           item_view=None), encoding="utf-8")
                counts["tasks"] += 1
            (staging / links.board_json(track, board)).write_text(
                json.dumps(board_document(snapshot), indent=1), encoding="utf-8")
            (staging / links.board_csv(track, board)).write_text(board_csv(snapshot),
                                                                 encoding="utf-8")
            if chart:
                (staging / links.chart(track, board)).write_bytes(chart)
            cost = stored_output(database, track, board, "cost_chart")
            if cost:
                (staging / links.cost_chart(track, board)).write_bytes(cost)
            entries = [entry for key in ("ranked", "partial", "not_ranked", "self_reported")
                       for entry in snapshot.get(key, [])]  # pending ones are ranked
            for entry in entries:
                try:
                    view = public_view(database, entry["id"])
                except NotFound:
                    continue
                counts["entries"] += 1
                (staging / links.submission(entry["id"])).write_text(
                    render("submission.html", links, entry=view,
                           place=entry_ranks(database, view)), encoding="utf-8")
                (staging / f"submission-{entry['id']}.json").write_text(
                    json.dumps(view, indent=1), encoding="utf-8")
            for below in snapshot["ranked"]:
                if below.get("versus_id") is None:
                    continue
                above = {"id": below["versus_id"]}
                try:
                    view = compare_view(database, public_view(database, above["id"]),
                                        public_view(database, below["id"]))
                except (NotFound, SumbenchError):
                    continue
                counts["compare"] += 1
                (staging / links.compare(above["id"], below["id"])).write_text(
                    render("compare.html", links, **view), encoding="utf-8")
    return counts
