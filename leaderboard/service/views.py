"""What the HTML pages show, shared by the live app and the static export.

`Links` makes every URL a page uses: live routes, or relative file names of an exported site.
`render` fills a Jinja2 template (autoescape on: names and free text always appear as text).
The view builders read stored snapshots and public views only.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np
from sqlalchemy import select

from leaderboard.ranking import compare, mean_distribution, mean_of
from leaderboard.service.boards import SELF_REPORTED, all_boards, read_board, small_parts
from leaderboard.service.db import Database, Material, Score
from leaderboard.service.documents import entry_source, entry_training
from leaderboard.service.gold import gold_for
from leaderboard.service.safe_markdown import markdown_html
from leaderboard.service.settings import load_settings
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.kept import Kept

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"


class Links:
    """URLs of the pages: live (`static=False`) or files of an exported site; `visibility`:
    the instance's gold visibility, which every page states (None: a page that claims
    nothing about it)."""

    def __init__(self, static: bool = False, visibility: str | None = None):
        self.static, self.visibility = static, visibility

    def home(self) -> str:
        return "index.html" if self.static else "/"

    def track(self, track: str, board: str) -> str:
        return f"track-{track}-{board}.html" if self.static else \
            f"/track/{track}?{urlencode({'variant': board})}"

    def submission(self, entry_id: int) -> str:
        return f"submission-{entry_id}.html" if self.static else f"/submission/{entry_id}"

    def compare(self, a: int, b: int) -> str:
        return f"compare-{a}-{b}.html" if self.static else f"/compare?{urlencode({'a': a, 'b': b})}"

    def part(self, track: str, board: str, part: str) -> str:
        return f"task-{track}-{board}-{part}.html" if self.static else \
            f"/track/{track}/task/{quote(part)}?{urlencode({'variant': board})}"

    @property
    def offers_items(self) -> bool:
        """Whether pages link to item pages: live, where the test gold is public."""
        return not self.static and self.visibility == "public"

    def items(self, entry_id: int, part: str, versus: int | None = None) -> str:
        """An entry's item page (live only: where the test gold is public)."""
        query = {"task": part, **({"b": versus} if versus is not None else {})}
        return f"/items/{entry_id}?{urlencode(query)}"

    def chart(self, track: str, board: str) -> str:
        return f"chart-{track}-{board}.png" if self.static else \
            f"/chart/{track}.png?{urlencode({'variant': board})}"

    def cost_chart(self, track: str, board: str) -> str:
        return f"cost-chart-{track}-{board}.png" if self.static else \
            f"/cost-chart/{track}.png?{urlencode({'variant': board})}"

    def board_json(self, track: str, board: str) -> str:
        return f"leaderboard-{track}-{board}.json" if self.static else \
            f"/api/v1/leaderboard/{track}?{urlencode({'variant': board})}"

    def board_csv(self, track: str, board: str) -> str:
        return f"leaderboard-{track}-{board}.csv" if self.static else \
            f"/api/v1/leaderboard/{track}.csv?{urlencode({'variant': board})}"

    def asset(self, name: str) -> str:
        return f"static/{name}" if self.static else f"/static/{name}"


def environment():
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)),
                      autoescape=select_autoescape(["html"], default=True))
    env.filters["num"] = format_number
    env.filters["entry_source"] = entry_source  # the board page filters as the API does
    env.filters["entry_training"] = entry_training
    env.filters["markdown"] = markdown_html  # a track's description: escaped, then marked up
    return env


_ENVIRONMENT = Kept(1)  # the templates' environment, made on first use


def render(template: str, links: Links, **context: Any) -> str:
    env = _ENVIRONMENT.get_or_build("templates", environment)
    return env.get_template(template).render(links=links, **context)


def format_number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}"
    return str(value)


def home_view(database: Database) -> dict:
    boards = {}
    for track, board in all_boards(database):
        stored = read_board(database, track, board)
        if stored is None:
            continue
        snapshot = stored[0]
        boards.setdefault(track, {"title": snapshot["title"],
                                  "description": snapshot["description"], "boards": []})
        boards[track]["boards"].append({
            "board": board, "ranked": len(snapshot["ranked"]),
            "partial": len(snapshot["partial"]),
            "leader": snapshot["ranked"][0] if snapshot["ranked"] else None})
    return {"tracks": boards}


def distributions_of(database: Database, score_id: int) -> dict[str, np.ndarray]:
    with database.session() as session:
        return {m.part: np.frombuffer(m.distribution, dtype="<f8")
                for m in session.scalars(select(Material).filter_by(score_id=score_id))
                if m.distribution is not None}


def comparable_score(database: Database, view: Mapping) -> int:
    with database.session() as session:
        score = session.scalars(select(Score).filter_by(
            submission_id=view["id"], current=True)).first()
        if score is None or not score.analysed or view["status"] != "scored":
            raise SumbenchError(f"entry {view['id']} is not scored and analysed yet")
        return score.id


def compare_view(database: Database, a: Mapping, b: Mapping) -> dict:
    """Paired comparisons of two entries of one board: per part and of the mean."""
    if (a["track"], a["variant"]) != (b["track"], b["variant"]):
        raise SumbenchError("entries of different boards cannot be compared")
    for view in (a, b):
        if view.get("laddered"):
            raise SumbenchError(f"entry {view['id']} is laddered (a participant's entry on "
                                f"hidden gold): it publishes no intervals or paired tests")
    dist_a = distributions_of(database, comparable_score(database, a))
    dist_b = distributions_of(database, comparable_score(database, b))
    if a["versions"].get("parts") != b["versions"].get("parts"):
        raise SumbenchError("the entries were scored under different data or metric versions")
    parts = sorted(set(dist_a) & set(dist_b))
    small = withheld_parts(database, a["track"], a["variant"])
    rows = [compare(part, a["headlines"].get(part), b["headlines"].get(part), dist_a[part],
                    dist_b[part]).to_dict() for part in parts]
    for row in rows:
        if row["scope"] in small:
            row["ci95"] = None  # endpoints over so few items could be per-item differences
    mean = compare("mean", mean_of(a["headlines"], parts), mean_of(b["headlines"], parts),
                   mean_distribution(dist_a, parts), mean_distribution(dist_b, parts))
    return {"a": a, "b": b, "rows": rows, "mean": mean.to_dict(), "parts": parts,
            "withheld": sorted(small & set(parts)),
            "only_a": sorted(set(dist_a) - set(dist_b)),
            "only_b": sorted(set(dist_b) - set(dist_a))}


def withheld_parts(database: Database, track: str, board: str) -> set[str]:
    """Parts of a board too small to publish intervals for (see boards.small_parts)."""
    settings = load_settings(database)
    if settings.gold_is_public:  # nothing hidden: every interval is published
        return set()
    return small_parts(gold_for(database, track).get(board, {}), settings.min_public_items)


def entry_ranks(database: Database, view: Mapping) -> dict | None:
    """The entry's place on its board (rank, band, per-part ranks) from the snapshot."""
    stored = read_board(database, view["track"], view["variant"])
    if stored is None:
        return None
    snapshot = stored[0]
    for group in ("ranked", "partial", "not_ranked", "self_reported"):
        for entry in snapshot.get(group, []):
            if entry["id"] == view["id"]:
                return {"rank": entry.get("rank"), "band": entry.get("band"),
                        "of": len(snapshot["ranked"]), "part_ranks": entry.get("part_ranks", {}),
                        "ci95": entry.get("ci95", {}), "aggregate": entry.get("aggregate"),
                        "aggregate_ci95": entry.get("aggregate_ci95"),
                        "not_ranked": entry.get("not_ranked") or (
                            SELF_REPORTED if group == "self_reported" else None)}
    return None
