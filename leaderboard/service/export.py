"""The public documents of a board (API JSON and CSV) and the static export of the whole site.

`export_site` writes the same pages as the live app (same templates, relative links), each
board's JSON, CSV and chart, and every visible entry's page and JSON, plus compare pages for
neighbours on each board, into a folder that any static host can serve. Like the live pages
it holds aggregates and intervals only.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any, Mapping

from sqlalchemy import select

from leaderboard.service.boards import all_boards, read_board
from leaderboard.service.db import AuditEntry, Database
from tasks.errors import SumbenchError
from tasks.io import atomic_directory

ENTRY_KEYS = ("id", "model", "kind", "badge", "card", "user", "created", "rank", "band",
              "aggregate", "aggregate_ci95", "ci95", "part_ranks")


def _public_entry(entry: Mapping[str, Any]) -> dict:
    data = {key: entry.get(key) for key in ENTRY_KEYS}
    data["scores"] = dict(entry["headlines"])
    return data


def board_document(snapshot: Mapping[str, Any]) -> dict:
    """GET /api/v1/leaderboard/{track}: scored entries (ranked first, then partial)."""
    return {"track": snapshot["track"], "variant": snapshot["board"],
            "parts": snapshot["parts"], "headline_names": snapshot["headline_names"],
            "entries": [_public_entry(e) for e in snapshot["ranked"] + snapshot["partial"]],
            "published": snapshot["published"], "rules": snapshot["rules"],
            "parameters": snapshot["parameters"], "version_key": snapshot["version_key"],
            "versions": snapshot["versions"], "computed": snapshot["computed"]}


def board_csv(snapshot: Mapping[str, Any]) -> str:
    """One row per scored entry: rank, band, model, aggregate (+ interval), part headlines."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    parts = list(snapshot["parts"])
    writer.writerow(["id", "model", "source", "rank", "band", "aggregate", "aggregate_low",
                     "aggregate_high", *parts])
    for entry in snapshot["ranked"] + snapshot["partial"]:
        ci = entry.get("aggregate_ci95") or [None, None]
        writer.writerow([entry["id"], _csv_text(entry["model"]), entry["badge"],
                         entry.get("rank"), entry.get("band"), entry.get("aggregate"), *ci,
                         *[entry["headlines"].get(part) for part in parts]])
    return buffer.getvalue()


def _csv_text(text: str) -> str:
    """Neutralise spreadsheet formulas in user text (a leading = + - @ is quoted away)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def audit_rows(database: Database, limit: int = 100) -> list[dict]:
    with database.session() as session:
        rows = session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit))
        return [{"id": row.id, "at": row.at.isoformat(timespec="seconds"), "actor": row.actor,
                 "action": row.action, "outcome": row.outcome,
                 "submission_id": row.submission_id, "detail": json.loads(row.detail),
                 "scorer_version": row.scorer_version} for row in rows]


def export_site(database: Database, out_dir: str | Path) -> dict:
    """Write the static site to `out_dir` (replaced as a whole); returns file counts."""
    from leaderboard.service.submissions import NotFound, public_view
    from leaderboard.service.views import (STATIC, Links, compare_view, entry_ranks, home_view,
                                           render)

    links, counts = Links(static=True), {"boards": 0, "entries": 0, "compare": 0}
    with atomic_directory(out_dir) as staging:
        shutil.copytree(STATIC, staging / "static")
        (staging / "index.html").write_text(render("index.html", links,
                                                   **home_view(database)), encoding="utf-8")
        for track, board in all_boards(database):
            snapshot, chart = read_board(database, track, board)
            counts["boards"] += 1
            (staging / links.track(track, board)).write_text(
                render("track.html", links, board=snapshot), encoding="utf-8")
            (staging / links.board_json(track, board)).write_text(
                json.dumps(board_document(snapshot), indent=1), encoding="utf-8")
            (staging / links.board_csv(track, board)).write_text(board_csv(snapshot),
                                                                 encoding="utf-8")
            if chart:
                (staging / links.chart(track, board)).write_bytes(chart)
            entries = snapshot["ranked"] + snapshot["partial"] + snapshot["pending"]
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
            for above, below in zip(snapshot["ranked"], snapshot["ranked"][1:]):
                try:
                    view = compare_view(database, public_view(database, above["id"]),
                                        public_view(database, below["id"]))
                except (NotFound, SumbenchError):
                    continue
                counts["compare"] += 1
                (staging / links.compare(above["id"], below["id"])).write_text(
                    render("compare.html", links, **view), encoding="utf-8")
    return counts
