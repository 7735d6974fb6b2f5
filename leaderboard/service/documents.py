"""The public documents of a board: the API's JSON and the CSV (pure functions of a
snapshot: aggregates, intervals and metadata only)."""
from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Mapping
from typing import Any

ENTRY_KEYS = ("id", "model", "kind", "badge", "card", "user", "created", "rank", "band",
              "aggregate", "aggregate_ci95", "ci95", "part_ranks", "analysis", "laddered",
              "cost")
#: the cost fields of an evaluated entry, as the server measured them
COST_FIELDS = ("seconds", "generated_tokens", "peak_rss_bytes", "peak_gpu_bytes", "device")


def _public_entry(entry: Mapping[str, Any]) -> dict:
    data = {key: entry.get(key) for key in ENTRY_KEYS}
    data["scores"] = dict(entry["headlines"])
    if "not_ranked" in entry:
        data["not_ranked"] = entry["not_ranked"]
    if "gold_match" in entry:
        data["matches_public_gold"] = entry["gold_match"]["matches_public_gold"]
        data["gold_match"] = entry["gold_match"]
    if entry.get("laddered"):  # which parts the Ladder released now, which kept the best
        data["ladder"] = {part: "improved" if improved else "no improvement"
                          for part, improved in entry.get("ladder", {}).items()}
    if "private" in entry:
        data["private_scores"] = entry["private"]
    return data


def board_document(snapshot: Mapping[str, Any]) -> dict:
    """GET /api/v1/leaderboard/{track}: scored entries (ranked first, then partial)."""
    return {"track": snapshot["track"], "variant": snapshot["board"],
            "gold_visibility": snapshot.get("gold_visibility", "private"),
            "parts": snapshot["parts"], "headline_names": snapshot["headline_names"],
            "entries": [_public_entry(e) for e in snapshot["ranked"] + snapshot["partial"]],
            "not_ranked": [_public_entry(e) for e in snapshot.get("not_ranked", [])],
            "self_reported": [_public_entry(e) for e in snapshot.get("self_reported", [])],
            "published": snapshot["published"], "rules": snapshot["rules"],
            "parameters": snapshot["parameters"], "version_key": snapshot["version_key"],
            "versions": snapshot["versions"], "computed": snapshot["computed"],
            "linked": snapshot.get("linked", {}), "public_items": snapshot.get("public_items", {}),
            "ladder": snapshot.get("ladder"), "revealed": snapshot.get("revealed", False)}


#: the CSV's lists, in order: (snapshot key, what the `list` column says)
CSV_LISTS = (("ranked", "ranked"), ("partial", "partial"), ("not_ranked", "not ranked"),
             ("self_reported", "self-reported"))


def board_csv(snapshot: Mapping[str, Any]) -> str:
    """One row per scored entry: its list, rank, band, model, aggregate (+ interval), part
    headlines, the board's gold visibility, the declared training data, whether it copies
    the public gold, and the cost the server measured.

    Rows end with CRLF (RFC 4180) and a cell holding a line break is quoted, so no cell can
    end its row or start another; user text has its carriage returns and other control
    characters replaced and no line of it starts a formula (see `csv_text`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    parts = list(snapshot["parts"])
    writer.writerow(["id", "model", "source", "list", "rank", "band", "aggregate",
                     "aggregate_low", "aggregate_high", *parts, "gold_visibility",
                     "training_data", "usb_test_seen", "matches_public_gold",
                     *(f"cost_{name}" for name in COST_FIELDS)])
    visibility = snapshot.get("gold_visibility", "private")
    for key, listed in CSV_LISTS:
        for entry in snapshot.get(key, []):
            ci = entry.get("aggregate_ci95") or [None, None]
            card, cost = entry.get("card") or {}, entry.get("cost") or {}
            matches = (entry.get("gold_match") or {}).get("matches_public_gold")
            writer.writerow([entry["id"], csv_text(entry["model"]), entry["badge"], listed,
                             entry.get("rank"), entry.get("band"), entry.get("aggregate"), *ci,
                             *[entry["headlines"].get(part) for part in parts], visibility,
                             csv_text(str(card.get("training_data", ""))),
                             _csv_boolean(card.get("usb_test_seen")), _csv_boolean(matches),
                             *[cost.get(name) for name in COST_FIELDS]])
    return buffer.getvalue()


#: what makes a spreadsheet read a cell as a formula (or a command) at its start, ASCII and
#: full-width; OWASP's list, with the full-width forms some spreadsheets also accept
FORMULA_STARTS = frozenset("=+-@\uff1d\uff0b\uff0d\uff20")


def csv_text(text: str) -> str:
    """User text made safe for a CSV cell: CR and CRLF become a line feed, other control
    characters (tab included) a space, and a line whose first character after leading
    white space and invisible format characters (a byte-order mark, zero-width and bidi
    marks) is a formula start (= + - @) gets a leading apostrophe, the spreadsheets' own
    sign for literal text, on every line of the cell."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(" " if _control(char) else char for char in text)
    return "\n".join("'" + line if _first_visible(line) in FORMULA_STARTS else line
                     for line in text.split("\n"))


def _control(char: str) -> bool:
    return char != "\n" and unicodedata.category(char) in ("Cc", "Zl", "Zp")


def _first_visible(line: str) -> str:
    """The first character of a line that is neither white space nor an invisible format
    character (Unicode's Cf: U+FEFF, U+200B-U+200F, U+202A-U+202E, U+2060-U+2069, ...),
    which a spreadsheet may skip before it reads a formula; '' when there is none."""
    for char in line:
        if not char.isspace() and unicodedata.category(char) != "Cf":
            return char
    return ""


def _csv_boolean(value: Any) -> str:
    """true / false as JSON writes them (empty when unknown), never Python's True/False."""
    return "" if value is None else "true" if value else "false"


#: the board filters the page and the API share: source values, training values
SOURCES = ("evaluated", "computed", "predictions")
TRAINING = ("declared", "test-seen", "undeclared")


def entry_source(entry: Mapping[str, Any]) -> str:
    kind = entry.get("kind")
    return "evaluated" if kind == "evaluation" else "predictions" if kind == "submission" \
        else "computed"


def entry_training(entry: Mapping[str, Any]) -> str:
    card = entry.get("card") or {}
    if card.get("usb_test_seen") is True:
        return "test-seen"
    return "declared" if card.get("training_data") and card.get("usb_test_seen") is False \
        else "undeclared"


def entry_matches(entry: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether an entry of a board document passes the filters (as the board page's own:
    q in the model or user, one of the sources, the training declaration, the device)."""
    query = (filters.get("q") or "").strip().lower()
    if query and query not in f"{entry.get('model', '')} {entry.get('user', '')}".lower():
        return False
    if filters.get("source") is not None and entry_source(entry) not in filters["source"]:
        return False
    if filters.get("training") and entry_training(entry) != filters["training"]:
        return False
    device = (entry.get("cost") or {}).get("device") or ""
    return not filters.get("device") or device == filters["device"]


def filtered_document(document: dict, filters: Mapping[str, Any]) -> dict:
    """The board document with only the entries that pass the filters (ranks kept)."""
    lists = ("entries", "not_ranked", "self_reported")
    return {**document, **{key: [entry for entry in document.get(key, [])
                                 if entry_matches(entry, filters)] for key in lists},
            "filters": {key: value for key, value in filters.items() if value is not None}}
