"""The public documents of a board: the API's JSON and the CSV (pure functions of a
snapshot: aggregates, intervals and metadata only)."""
from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

ENTRY_KEYS = ("id", "model", "kind", "badge", "card", "user", "created", "rank", "band",
              "aggregate", "aggregate_ci95", "ci95", "part_ranks", "analysis", "laddered")


def _public_entry(entry: Mapping[str, Any]) -> dict:
    data = {key: entry.get(key) for key in ENTRY_KEYS}
    data["scores"] = dict(entry["headlines"])
    if entry.get("laddered"):  # which parts the Ladder released now, which kept the best
        data["ladder"] = {part: "improved" if improved else "no improvement"
                          for part, improved in entry.get("ladder", {}).items()}
    if "private" in entry:
        data["private_scores"] = entry["private"]
    return data


def board_document(snapshot: Mapping[str, Any]) -> dict:
    """GET /api/v1/leaderboard/{track}: scored entries (ranked first, then partial)."""
    return {"track": snapshot["track"], "variant": snapshot["board"],
            "parts": snapshot["parts"], "headline_names": snapshot["headline_names"],
            "entries": [_public_entry(e) for e in snapshot["ranked"] + snapshot["partial"]],
            "published": snapshot["published"], "rules": snapshot["rules"],
            "parameters": snapshot["parameters"], "version_key": snapshot["version_key"],
            "versions": snapshot["versions"], "computed": snapshot["computed"],
            "linked": snapshot.get("linked", {}), "public_items": snapshot.get("public_items", {}),
            "ladder": snapshot.get("ladder"), "revealed": snapshot.get("revealed", False)}


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
