"""One task (part) of a board: its ranking, each entry's full metric dict and per-domain
results where the board publishes them (a heatmap), rendered on request from the stored
snapshot and each entry's public view.

What an entry shows is what its own page shows (leaderboard.service.entry_view.public_view):
a laddered entry its released headline only; the others their public part's metric dict and
per-domain breakdown, a domain's result withheld where a domain is too small to publish.
"""
from __future__ import annotations

from typing import Any

from leaderboard.service.boards import SELF_REPORTED
from leaderboard.service.db import Database
from leaderboard.service.entry_view import public_view
from leaderboard.service.submissions import NotFound

#: snapshot groups, as the board page lists them: ranked on the part, then listed apart
RANKED_GROUPS = ("ranked", "partial")
LISTED_GROUPS = ("not_ranked", "self_reported")
HEAT_LEVELS = 8


def part_view(database: Database, snapshot: dict, part: str) -> dict[str, Any]:
    """The page's context: the board, the part, its ranked and listed rows, the metric
    names and domains of the table and heatmap."""
    if part not in snapshot["parts"]:
        raise NotFound(f"board {snapshot['track']}/{snapshot['board']} has no part {part!r}")
    rows = {group: [] for group in RANKED_GROUPS + LISTED_GROUPS}
    for group in rows:
        for entry in snapshot.get(group, []):
            if entry["headlines"].get(part) is None:
                continue
            try:
                view = public_view(database, entry["id"])
            except NotFound:  # hidden or deleted since the snapshot
                continue
            rows[group].append(part_row(entry, view, part, group))
    ranked = sorted(rows["ranked"] + rows["partial"], key=lambda row: -row["headline"])
    for row in ranked:
        row["rank"] = 1 + sum(other["headline"] > row["headline"] for other in ranked)
    listed = sorted(rows["not_ranked"] + rows["self_reported"], key=lambda r: -r["headline"])
    shown = ranked + listed
    domains = sorted({domain for row in shown for domain in row["domains"]})
    add_heat(shown, domains)
    titles = {name: snapshot.get("part_titles", {}).get(name, name)
              for name in snapshot["parts"]}
    return {"board": snapshot, "part": part, "titles": titles, "title": titles[part],
            "help": snapshot.get("part_help", {}).get(part, part), "ranked": ranked,
            "listed": listed,
            "metrics": sorted({name for row in shown for name, value in
                               (row["metrics"] or {}).items()
                               if _is_number(value) and name != "headline"}),
            # the unit kind of each Pyramid column (the summaries track records it)
            "metric_units": {name: kind for row in shown
                             for name, kind in ((row["metrics"] or {}).get("units") or {}).items()
                             if isinstance(kind, str)},
            "domains": domains}


def part_row(entry: dict, view: dict, part: str, group: str) -> dict[str, Any]:
    """One entry's row: headline and interval from the snapshot; metric dict and domains as
    its public view publishes them (none for a laddered entry)."""
    breakdown = view.get("breakdown") or {}
    return {"id": entry["id"], "model": entry["model"], "user": entry.get("user"),
            "badge": entry.get("badge"), "group": group,
            "headline": entry["headlines"][part],
            "ci95": (entry.get("ci95") or {}).get(part),
            "laddered": bool(entry.get("laddered")),
            "improved": (entry.get("ladder") or {}).get(part),
            "not_ranked": entry.get("not_ranked") or (
                SELF_REPORTED if group == "self_reported" else None),
            "metrics": None if entry.get("laddered") else
            (view.get("public_scores") or {}).get(part),
            "domains": {domain: results[part] for domain, results in breakdown.items()
                        if part in results}}


def add_heat(rows: list[dict], domains: list[str]) -> None:
    """Each published domain value's heat level (0..HEAT_LEVELS-1) on one scale over the
    table: `row["heat"][domain]`."""
    values = [result["headline"] for row in rows for result in row["domains"].values()
              if _is_number(result.get("headline"))]
    low, high = (min(values), max(values)) if values else (0.0, 0.0)
    for row in rows:
        row["heat"] = {}
        for domain in domains:
            value = row["domains"].get(domain, {}).get("headline")
            if _is_number(value):
                share = 0.0 if high == low else (value - low) / (high - low)
                row["heat"][domain] = min(HEAT_LEVELS - 1, int(share * HEAT_LEVELS))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
