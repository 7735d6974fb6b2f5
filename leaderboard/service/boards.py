"""Board snapshots: what the pages and the API read, computed by workers, never in a request.

`build_snapshot` reads every visible, scored entry of a board whose current score row has the
board's version key and ranks those that cover every part (leaderboard.ranking: aggregate
over all parts, 95% intervals, paired tests against the entry above, rank bands); an entry
whose analysis is pending is ranked by its points, its intervals and band marked pending, and
a laddered entry (a participant's file or evaluated model on private gold) by what the Ladder
released to it, with no interval or band (leaderboard.service.ladder). Partial entries are
listed apart. Where the gold is public, only what the server computed ranks: predictions
files are listed as self-reported and evaluated entries without a clean training-data
declaration as not ranked (`split_public_entries`). It adds the published reference rows and
renders the per-part bar chart, reading settings, gold and entries in the one transaction it
is given;
leaderboard.service.publish gives it a snapshot transaction, renders outside any transaction
and stores the result with the page, API document and CSV in ONE row (rebuild tickets keep a
snapshot read earlier from replacing one read later). A snapshot holds aggregates and
intervals only, of the public test items: never a per-example score, reference or label.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
from sqlalchemy import select

from leaderboard.charts import cost_chart, task_bar_chart
from leaderboard.published import published_usb_rows
from leaderboard.ranking import (
    BoardEntry,
    aggregate_rule,
    intervals,
    per_part_ranks,
    rank_entries,
)
from leaderboard.service.db import Board, Database, Material, Score, Submission, User, utcnow
from leaderboard.service.gold import count_items, hosted_gold, score_versions
from leaderboard.service.ladder import released_headlines, rounded
from leaderboard.service.settings import InstanceSettings, load_settings
from leaderboard.tracks.base import copy_reason

BADGES = {"submission": "scored here from predictions",
          "evaluation": "evaluated here",
          "baseline": "computed here (baseline)",
          "reference": "computed here (human-judged system)",
          "builtin": "computed here (built-in evaluator)"}
CARD_BADGE = "self-reported metadata"
SELF_REPORTED = "self-reported predictions (the test gold is public)"
CHART_ROWS = 10


def _entry(submission: Submission, user: User, score: Score, revealed: bool) -> dict[str, Any]:
    released = json.loads(score.released) if score.released else None
    entry = {"id": submission.id, "model": submission.model, "kind": submission.kind,
             "badge": BADGES[submission.kind], "card": json.loads(submission.card),
             "user": user.name, "created": submission.created_at.isoformat(timespec="seconds"),
             "headlines": json.loads(score.headlines) if released is None else
             released_headlines(released), "score_id": score.id,
             "analysed": score.analysed, "laddered": released is not None}
    if released is not None:
        entry["ladder"] = {part: answer["improved"] for part, answer in released.items()}
    if revealed:
        entry["private"] = private_headlines(score, released)
    evaluation = json.loads(submission.evaluation) if submission.evaluation else {}
    if evaluation.get("cost"):
        entry["cost"] = evaluation["cost"]
    if score.gold_match:
        entry["gold_match"] = json.loads(score.gold_match)
    return entry


def not_ranked_reason(entry: dict) -> str | None:
    """Why a public-gold board lists an entry without ranking it; None when it ranks. It
    ranks what the server computed: models evaluated here that declare their training data
    and no USB test data, and computed rows (baselines, references)."""
    if entry["kind"] == "submission":
        return SELF_REPORTED
    if entry["kind"] != "evaluation":
        return None
    copied = copy_reason(entry.get("gold_match"))
    if copied:
        return copied
    card = entry["card"]
    if card.get("usb_test_seen") is True:
        return "declares USB test data among its training data"
    if not card.get("training_data") or card.get("usb_test_seen") is not False:
        return "declares no training data (submit --training-data TEXT --usb-test-seen no)"
    return None


def split_public_entries(entries: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(rankable, not ranked with their reason, self-reported predictions files) of a
    public-gold board's entries, each in submission order."""
    rankable, not_ranked, self_reported = [], [], []
    for entry in sorted(entries, key=lambda e: int(e["id"])):
        reason = not_ranked_reason(entry)
        if reason is None:
            rankable.append(entry)
        elif reason == SELF_REPORTED:
            self_reported.append(entry)
        else:
            not_ranked.append({**entry, "not_ranked": reason})
    return rankable, not_ranked, self_reported


def private_headlines(score: Score, released: dict | None) -> dict[str, float | None]:
    """The private part's headlines (published after `reveal`); a laddered entry's rounded
    to its parts' steps."""
    results = json.loads(score.private_results) if score.private_results else {}
    headlines = {part: None if result is None else result["headline"]
                 for part, result in results.items()}
    if released is None:
        return headlines
    return {part: None if value is None else rounded(value, released[part]["step"],
                                                     released[part].get("range"))
            for part, value in headlines.items()}


def _distributions(session, score_ids: list[int], n_resamples: int) -> dict[int, dict]:
    found: dict[int, dict] = {}
    for material in session.scalars(select(Material).where(Material.score_id.in_(score_ids))):
        if material.distribution is not None:
            values = np.frombuffer(material.distribution, dtype="<f8")
            if len(values) == n_resamples:
                found.setdefault(material.score_id, {})[material.part] = values
    return found


def collect_entries(session, track: str, board: str, key: str, n_resamples: int,
                    revealed: bool = False):
    """(entries, distributions by score id) of the board's visible scored entries; a
    laddered entry's distributions are not read (nothing of them is published)."""
    rows = session.execute(
        select(Submission, User, Score).join(User, User.id == Submission.user_id)
        .join(Score, Score.submission_id == Submission.id)
        .where(Submission.track == track, Submission.board == board,
               Submission.status == "scored", Submission.hidden.is_(False),
               Submission.deleted.is_(False), Score.current.is_(True),
               Score.version_key == key)).all()
    entries = [_entry(*row, revealed) for row in rows]
    return entries, _distributions(session, [e["score_id"] for e in entries
                                             if not e["laddered"]], n_resamples)


def rank_board(entries: list[dict], distributions: dict[int, dict], parts: list[str],
               alpha: float, small_parts: set[str] = frozenset(), bands: str = "adjacent"
               ) -> tuple[list[dict], list[dict]]:
    """(ranked, partial) entries with intervals, bands and per-part ranks; the intervals of
    `small_parts` (too few items to publish one) are withheld (None). An entry whose analysis
    has not landed is ranked by its points, its `analysis` "pending"."""
    for e in entries:
        e["analysis"] = "pending" if _pending(e, distributions, parts) else "done"
        if e.get("laddered"):
            e["analysis"] = "not published (laddered)"
    # integer ids: an exact tie ranks the earlier submission first (as text, id 5 came after 49)
    board_entries = [BoardEntry(int(e["id"]), e["headlines"],
                                {} if e["analysis"] == "pending" else
                                distributions.get(e["score_id"], {})) for e in entries]
    ranked, partial_ids = rank_entries(board_entries, parts, alpha=alpha, bands=bands)
    ranks = per_part_ranks({int(e["id"]): e["headlines"] for e in entries})
    by_id = {int(e["id"]): e for e in entries}
    published = [e for e in entries if e["analysis"] == "done"]
    shown = [(e, part) for e in published for part in distributions.get(e["score_id"], {})
             if part not in small_parts]  # every interval of the board in one call
    bounds = iter(intervals([distributions[e["score_id"]][part] for e, part in shown]))
    for e in entries:
        e["ci95"] = dict.fromkeys(distributions.get(e["score_id"], {})
                                  if e["analysis"] == "done" else ())
        e["part_ranks"] = ranks[int(e["id"])]
    for e, part in shown:
        e["ci95"][part] = next(bounds)
    ranked_rows = []
    for row in ranked:
        entry = by_id[row.entry_id]
        entry.update(aggregate=row.score, aggregate_ci95=row.ci95, rank=row.rank, band=row.band,
                     versus_above=None if row.versus_above is None else row.versus_above.to_dict(),
                     versus_id=row.above_id)
        ranked_rows.append(entry)
    partial = sorted((by_id[i] for i in partial_ids), key=lambda e: e["id"])
    return ranked_rows, partial


def _pending(entry: dict, distributions: dict, parts: list[str]) -> bool:
    """Whether an entry still waits for the distributions of a part it has a headline for."""
    have = set(distributions.get(entry["score_id"], {}))
    return not have >= {part for part in parts if entry["headlines"].get(part) is not None}


def build_snapshot(database: Database, track_name: str, board: str, session) -> dict | None:
    settings = load_settings(database, session)
    track = settings.track(track_name)
    hosted = hosted_gold(database, track.name, session)
    gold = hosted.gold
    if board not in gold:
        return None
    key, versions = score_versions(track, board, hosted)
    parts = track.parts(gold, board)
    entries, distributions = collect_entries(session, track.name, board, key,
                                             settings.n_resamples, settings.revealed)
    not_ranked, self_reported = [], []
    if settings.gold_is_public:  # nothing hidden: every interval is published
        entries, not_ranked, self_reported = split_public_entries(entries)
        small = set()
    else:
        small = small_parts(gold[board], settings.min_public_items)
    ranked, partial = rank_board(entries, distributions, parts, settings.alpha, small,
                                 track.band_method)
    published = published_usb_rows() if track.name == "usb" and board == "all" else []
    return {"track": track.name, "title": track.title, "description": track.description,
            "board": board, "boards": track.boards(gold), "parts": parts,
            "part_kind": track.part_kind,
            "headline_names": {part: track.headline_name(part) for part in parts},
            "part_titles": {part: track.part_title(part) for part in parts},
            "part_help": {part: track.part_help(part) for part in parts},
            "version_key": key, "versions": versions,
            "rules": {"aggregate": aggregate_rule(parts, track.part_kind),
                      "bands": track.band_rule(settings.n_resamples, settings.alpha,
                                               settings.seed)},
            "parameters": {"n_resamples": settings.n_resamples, "seed": settings.seed,
                           "alpha": settings.alpha,
                           "min_public_items": settings.min_public_items},
            "withheld_intervals": sorted(small), "settings_sha256": settings_sha256(settings),
            "linked": {part: payload["linked"] for part, payload in gold[board].items()
                       if "linked" in payload},
            "public_items": {part: public_count(payload)
                             for part, payload in gold[board].items()},
            "ladder": {"step": settings.ladder_step, "on": settings.ladder_step > 0},
            "revealed": settings.revealed, "gold_visibility": settings.gold_visibility,
            "ranked": ranked, "partial": partial, "not_ranked": not_ranked,
            "self_reported": self_reported, "published": published,
            "cost_points": len(cost_points({"ranked": ranked})),
            "devices": sorted({e["cost"]["device"] for e in ranked + partial + not_ranked
                               if (e.get("cost") or {}).get("device")}),
            "computed": utcnow().isoformat(timespec="seconds") + "Z"}


def settings_sha256(settings: InstanceSettings) -> str:
    """The fingerprint of the settings a snapshot was built under."""
    import hashlib

    text = json.dumps(settings.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def public_count(payload: dict) -> int:
    """The part's public test items (hosted, not private)."""
    return count_items(payload) - len(payload.get("private", ()))


def small_parts(parts: dict[str, dict], min_items: int) -> set[str]:
    """Parts with fewer public test items than `min_items`: no interval is published for
    them."""
    return {part for part, payload in parts.items() if public_count(payload) < min_items}


def chart_of(snapshot: dict) -> bytes:
    rows = [{"label": f"#{e['rank']} {e['model']}", "values": e["headlines"],
             "ci95": e.get("ci95", {})} for e in snapshot["ranked"][:CHART_ROWS]]
    return task_bar_chart(rows, snapshot["parts"],
                          title=f"{snapshot['track']} / {snapshot['board']}: top "
                                f"{len(rows)} entries (95% intervals)")


def cost_points(snapshot: dict) -> list[dict]:
    """The ranked entries with a measured cost: label, aggregate and seconds."""
    return [{"label": f"#{e['rank']} {e['model']}", "score": e["aggregate"],
             "seconds": max(float(e["cost"]["seconds"]), 1e-3), "id": e["id"]}
            for e in snapshot["ranked"]
            if e.get("aggregate") is not None and (e.get("cost") or {}).get("seconds")]


def cost_chart_of(snapshot: dict) -> bytes | None:
    """Aggregate against seconds with the Pareto front; None when no entry has a cost."""

    points = cost_points(snapshot)
    if not points:
        return None
    return cost_chart(points, title=f"{snapshot['track']} / {snapshot['board']}: aggregate "
                                    f"against the seconds of its evaluation")


def read_board(database: Database, track: str, board: str) -> tuple[dict, bytes | None] | None:
    """(snapshot, chart PNG) as last stored; None when the board was never built."""
    with database.session() as session:
        row = session.execute(select(Board.snapshot, Board.chart).filter_by(
            track=track, board=board)).one_or_none()
        return None if row is None else (json.loads(row.snapshot), row.chart)


def stored_output(database: Database, track: str, board: str, name: str) -> str | bytes | None:
    """One stored output of a board ("page", "document", "csv", "chart" or "cost_chart"),
    read alone."""
    column = {"page": Board.page, "document": Board.document, "csv": Board.csv,
              "chart": Board.chart, "cost_chart": Board.cost_chart}[name]
    with database.session() as session:
        return session.scalar(select(column).filter_by(track=track, board=board))


def all_boards(database: Database) -> list[tuple[str, str]]:
    with database.session() as session:
        return [tuple(row) for row in session.execute(
            select(Board.track, Board.board).order_by(Board.track, Board.board)).all()]
