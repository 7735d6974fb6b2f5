"""`sumbench leaderboard init`: migrate, configure, load hidden gold, add computed-here rows.

Re-running it is safe: migrations only move forward, unchanged gold parts are kept, a changed
part is replaced (its board's version key changes, so existing entries wait for `rescore`),
and computed rows are added once.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from leaderboard.service.auth import QUOTA_KINDS
from leaderboard.service.boards import read_board, settings_sha256
from leaderboard.service.db import Database, Score, Submission
from leaderboard.service.gold import boards_of, gold_links, store_gold
from leaderboard.service.publish import rebuild_board
from leaderboard.service.schema import migrate
from leaderboard.service.settings import (
    PUBLIC_GOLD_SETTINGS,
    InstanceSettings,
    load_settings,
    save_settings,
)
from leaderboard.service.system_rows import add_baseline_rows, add_builtin_rows, add_reference_rows
from leaderboard.service.worker import Worker
from leaderboard.tracks.summaries import parse_evaluators
from tasks.plumbing.errors import SumbenchError
from tasks.usb.archive import release_info

VISIBILITY_REQUIRED = (
    "--gold-visibility is required with --gold: public (participants can hold the test "
    "labels, as with the USB release: entries rank on the whole test set and only models "
    "evaluated here are ranked) or private (only this instance holds them: a private part, "
    "hosting apart and the Ladder keep them hidden)")


def configure(database: Database, changes: Mapping[str, str], evaluators: Sequence[str],
              gold_visibility: str | None = None):
    """Store the settings with `changes` applied (and evaluator specs, when given). What is
    hosted and kept private cannot change under published entries before `reveal`: items
    private under the new split would have public numbers from the old one. Public gold
    takes the settings that hide nothing (PUBLIC_GOLD_SETTINGS); it cannot become private."""
    before = load_settings(database)
    changes = dict(changes)
    if gold_visibility is not None:
        changes["gold_visibility"] = gold_visibility
    if str(changes.get("gold_visibility", before.gold_visibility)).strip('"') == "public":
        for name, value in PUBLIC_GOLD_SETTINGS.items():
            changes.setdefault(name, json.dumps(value))
    settings = before.with_changes(changes)
    if settings.gold_visibility != before.gold_visibility and boards_of(database):
        raise SumbenchError(
            f"this instance's gold is {before.gold_visibility}: a gold's visibility is chosen "
            f"when it is first loaded, and changing it would publish what was hidden or hide "
            f"what is public; start a new instance for {settings.gold_visibility} gold")
    if settings.hosting() != before.hosting() and not before.revealed and \
            not settings.gold_is_public:
        check_nothing_published(database, before, settings)
    if evaluators:
        parsed = parse_evaluators(evaluators)
        settings = InstanceSettings.from_dict(
            {**settings.to_dict(), "summary_evaluators": [e.to_dict() for e in parsed]})
    save_settings(database, settings)
    return settings


def check_nothing_published(database: Database, before, after) -> None:
    """Refuse a new split (private part, linked parts) while participants' entries are
    scored under the old one."""
    from sqlalchemy import func, select

    with database.session() as session:
        scored = session.scalar(select(func.count(Score.id.distinct())).join(
            Submission, Submission.id == Score.submission_id).where(
            Submission.kind.in_(QUOTA_KINDS)))
    if scored:
        changed = sorted(key for key, value in after.hosting().items()
                         if before.hosting()[key] != value)
        raise SumbenchError(
            f"{', '.join(changed)} cannot change: {scored} participants' scores were published "
            f"under the current split, and items private under a new one would have public "
            f"numbers already; publish the private part first (`sumbench leaderboard reveal`) "
            f"or start a new instance")


def pyramid_sources(pyramids: Sequence[str], units: Mapping[str, Mapping[str, str]]):
    """Each folder with the unit files given for its name; a name that is no folder's is
    an error."""
    names = {Path(folder).resolve().name for folder in pyramids}
    unknown = sorted(set(units) - names)
    if unknown:
        raise SumbenchError(f"--pyramid-units names {unknown[0]!r}, which is none of the "
                            f"--pyramid folders ({', '.join(sorted(names)) or 'none'})")
    return [(folder, dict(units.get(Path(folder).resolve().name, {}))) for folder in pyramids]


def load_all_gold(database: Database, settings, gold: str | None,
                  pyramids: Sequence[str],
                  pyramid_units: Mapping[str, Mapping[str, str]] | None = None) -> list[dict]:
    changes = []
    if gold:
        usb = settings.track("usb")
        changes += [{"track": "usb", **c} for c in store_gold(database, "usb",
                                                               usb.load_gold(gold))]
    if pyramids:
        for name in ("summaries", "evaluators"):
            track = settings.track(name)
            changes += [{"track": name, **c} for c in store_gold(
                database, name, track.load_gold(pyramid_sources(pyramids,
                                                                pyramid_units or {})))]
    return changes


def add_computed_rows(database: Database, settings) -> dict[str, int]:
    tracks = boards_of(database)
    added = {"baseline": 0, "reference": 0, "builtin": 0}
    if "usb" in tracks:
        added["baseline"] = len(add_baseline_rows(database, settings))
    if "summaries" in tracks:
        added["reference"] = len(add_reference_rows(database, settings))
    if "evaluators" in tracks:
        added["builtin"] = len(add_builtin_rows(database, settings))
    return added


def linked_report(database: Database) -> list[dict]:
    """The linked parts found on the usb track's stored gold (what `keep_linked` decides): on
    the `all` board when there is one (it holds every domain's articles), else on each."""
    if "usb" not in boards_of(database):
        return []
    links = gold_links(database, "usb")
    if any(link.board == "all" for link in links):
        links = [link for link in links if link.board == "all"]
    return [link.to_dict() for link in links]


def built_with(database: Database, track: str, board: str, settings) -> bool:
    """Whether the board's stored snapshot was built under these settings (an init that failed
    after saving new settings, run again, still rebuilds the boards)."""
    stored = read_board(database, track, board)
    return stored is not None and stored[0].get("settings_sha256") == settings_sha256(settings)


def gold_visibility_of(database: Database, gold: str | None, given: str | None,
                       required: bool) -> str | None:
    """The visibility `init` stores: public for the official release (`sumbench data fetch`
    output, by its archive_info.json; private is refused), else the one given; None keeps
    the stored one. `required`: --gold of a new instance must say which (a SumbenchError)."""

    release = release_info(gold) if gold else None
    if release is not None:
        if given == "private":
            raise SumbenchError(f"--gold-visibility private: {gold} is the public USB release "
                                f"(`sumbench data fetch` wrote it; see its archive_info.json), "
                                f"so its test labels cannot be kept private")
        return "public"
    if given is None and gold and required and Path(gold).is_dir() and \
            "usb" not in boards_of(database):  # (a missing folder: load_gold says so)
        raise SumbenchError(VISIBILITY_REQUIRED)
    return given


def initialise(db: str, *, gold: str | None = None, pyramids: Sequence[str] = (),
               pyramid_units: Mapping[str, Mapping[str, str]] | None = None,
               settings: Mapping[str, str] | None = None, evaluators: Sequence[str] = (),
               computed_rows: bool = True, score: bool = True,
               gold_visibility: str | None = None, require_visibility: bool = False) -> dict:
    """Everything `leaderboard init` does; returns a report. The board columns are checked
    before anything is written."""
    parse_evaluators(evaluators)
    database = Database(db)
    try:
        revision = migrate(database)
        visibility = gold_visibility_of(database, gold, gold_visibility, require_visibility)
        instance = configure(database, settings or {}, evaluators, visibility)
        changes = load_all_gold(database, instance, gold, pyramids, pyramid_units)
        added = add_computed_rows(database, instance) if computed_rows else {}
        jobs = 0
        if score:  # the server's own rows; submitted models wait for the workers
            jobs = Worker(database, kinds=("score", "analyse")).drain()
        boards = boards_of(database)
        stale = {(c["track"], c["board"]) for c in changes if c["change"] != "unchanged"}
        for track, names in boards.items():
            for board in names:
                if (track, board) in stale or not built_with(database, track, board, instance):
                    rebuild_board(database, track, board)
        return {"database": database.url.split("@")[-1], "revision": revision,
                "gold_visibility": instance.gold_visibility, "settings": instance.to_dict(),
                "gold": changes, "computed_rows": added, "jobs_run": jobs, "boards": boards,
                "linked_parts": linked_report(database)}
    finally:
        database.dispose()
