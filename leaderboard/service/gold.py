"""Hidden gold in the database: loading, a per-process cache, the hosted view and version keys.

The stored gold is each part's full test set; what a board hosts (`gold_for`) is the track's
hosted view of it under the instance's settings and secret (leaderboard.tracks.hosting: linked
parts on disjoint articles, the private items). The version key of a board is the sha256 of what
decides its numbers: the scorer version, the track's version, the hosting settings, each part's
gold id and (USB) each task's implementation version. Gold ids are opaque (an HMAC of the
hosted part's sha256 with the instance's secret): stable and comparable, but no one can confirm
a guessed label set against them. Every score row stores the key and the full version record
(plus sumbench's version and git commit); a board shows only rows with its current key, and
`rescore` brings the others up.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from leaderboard.service.db import Database, GoldPart, Setting, pack, unpack
from leaderboard.service.settings import SCORER_VERSION, load_settings
from leaderboard.tracks.hosting import Hosting, opaque_id
from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.provenance import git_commit, package_versions

_cache_lock = threading.Lock()
_cache: dict[tuple, dict] = {}


def store_gold(database: Database, track: str, gold: Mapping[str, Mapping[str, dict]]
               ) -> list[dict]:
    """Insert or replace the gold parts of a track; returns what changed per part. The parts
    that differ from the stored ones are packed before the write lock is taken."""
    with database.session() as session:
        stored = {(board, part): sha for board, part, sha in session.execute(
            select(GoldPart.board, GoldPart.part, GoldPart.sha256).filter_by(track=track))}
    packed = {(board, part): pack(payload) for board, parts in gold.items()
              for part, payload in parts.items()
              if stored.get((board, part)) != payload["sha256"]}
    changes = []
    with database.write_session() as session:
        for board, parts in sorted(gold.items()):
            for part, payload in sorted(parts.items()):
                row = session.scalars(select(GoldPart).filter_by(
                    track=track, board=board, part=part)).one_or_none()
                sha = payload["sha256"]
                if row is None:
                    row = GoldPart(track=track, board=board, part=part)
                    session.add(row)
                elif row.sha256 == sha:
                    changes.append({"board": board, "part": part, "change": "unchanged"})
                    continue
                change = "new" if row.id is None else "replaced"
                row.sha256 = sha  # packed here only if another init changed it since the read
                row.payload = packed.get((board, part)) or pack(payload)
                row.n_items = count_items(payload)
                changes.append({"board": board, "part": part, "change": change})
    return changes


def count_items(payload: Mapping) -> int:
    for key in ("templates", "ids"):
        if key in payload:
            return len(payload[key])
    return 0


SECRET_KEY = "secret"


def instance_secret(session) -> str:
    """The instance's secret (created by migration 0004; never shown)."""
    row = session.get(Setting, SECRET_KEY)
    if row is None:
        raise SumbenchError("the leaderboard database has no secret: run `sumbench leaderboard "
                            "init --db ...` to upgrade it")
    return row.value


def gold_for(database: Database, track: str, session=None) -> dict[str, dict[str, dict]]:
    """board -> part -> hosted payload of a track (see `HostedGold`), cached per process until
    a part or the settings change; read in `session` when given (a board rebuild's snapshot),
    else in a transaction of its own."""
    return hosted_gold(database, track, session).gold


def gold_links(database: Database, track: str, session=None) -> list:
    """The linked parts found on the track's stored gold (leaderboard.tracks.hosting.Link)."""
    return hosted_gold(database, track, session).links


class HostedGold:
    """A track's hosted gold (`gold`), the linked parts found on its full test sets, the
    stored gold itself (`stored`: what a board leaves apart is known items, not unknown), and
    what its version record needs, all read in one snapshot: the instance's secret and the
    settings that decide what is published (`published`)."""

    def __init__(self, gold: dict[str, dict[str, dict]], links: list,
                 stored: dict[str, dict[str, dict]], secret: str = "",
                 published: Mapping | None = None):
        self.gold, self.links, self.stored = gold, links, stored
        self.secret, self.published = secret, dict(published or {})


def board_inputs(database: Database, track, board: str) -> dict:
    """The public inputs of a board: {"track", "variant", "parts": {part: [records]}}, every
    item a submission answers, no field that holds an answer."""
    gold = gold_for(database, track.name)
    require_board(gold, track.name, board)
    return {"track": track.name, "variant": board, "parts": track.inputs(gold, board)}


def tracks_and_boards(database: Database) -> dict[str, list[str]]:
    """track -> the boards it hosts (gold loaded)."""
    return {track: sorted(gold_for(database, track)) for track in sorted(boards_of(database))}


def board_manifest(database: Database, track, board: str) -> dict:
    """The board's manifest (`track.manifest` of the hosted gold) with the stored test items it
    does not host (`apart`: a submission may answer them; they are left out, not refused)."""
    hosted = hosted_gold(database, track.name)
    require_board(hosted.gold, track.name, board)
    manifest = track.manifest(hosted.gold, board)
    apart = track.apart(hosted.stored, hosted.gold, board)
    return {**manifest, "apart": apart} if apart else manifest


def hosted_gold(database: Database, track: str, session=None) -> HostedGold:
    if session is None:  # one view for the marks and the payloads (the cache is shared)
        with database.snapshot_session() as own:
            return hosted_gold(database, track, own)

    marks = tuple(session.execute(
        select(GoldPart.board, GoldPart.part, GoldPart.sha256)
        .filter_by(track=track).order_by(GoldPart.board, GoldPart.part)).all())
    settings = load_settings(database, session)
    hosting = Hosting(settings.keep_linked, settings.private_fraction,
                      instance_secret(session), settings.split_seed)
    key = (database.url, track, marks, hosting)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is None:
        stored: dict[str, dict[str, dict]] = {}
        for row in session.scalars(select(GoldPart).filter_by(track=track)):
            stored.setdefault(row.board, {})[row.part] = unpack(row.payload)
        cached = (*settings.track(track).hosted(stored, hosting), stored)
        with _cache_lock:
            for old in [k for k in _cache if k[:2] == key[:2]]:
                del _cache[old]
            _cache[key] = cached
    return HostedGold(*cached, hosting.secret, settings.published())


def boards_of(database: Database) -> dict[str, list[str]]:
    """track -> its boards that have gold."""
    with database.session() as session:
        rows = session.execute(select(GoldPart.track, GoldPart.board).distinct()).all()
    boards: dict[str, list[str]] = {}
    for track, board in rows:
        boards.setdefault(track, []).append(board)
    return {track: sorted(names) for track, names in boards.items()}


def require_board(gold: Mapping, track: str, board: str) -> Mapping[str, dict]:
    if board not in gold:
        known = ", ".join(sorted(gold)) or "none"
        raise SumbenchError(f"track {track!r} has no board {board!r} (boards: {known})")
    return gold[board]


def part_versions(track, board: str, hosted: HostedGold) -> dict[str, Any]:
    """What decides a board's numbers, per part: the gold as an opaque id (`opaque_id` of
    the hosted part's sha256), the task's version, and the settings that decide what is
    hosted and published."""
    parts = {}
    for part, payload in sorted(require_board(hosted.gold, track.name, board).items()):
        entry = {"gold": opaque_id(hosted.secret, "gold", payload["sha256"])}
        if track.name == "usb":
            entry["task_version"] = get_task(part).version
        parts[part] = entry
    return {"scorer": SCORER_VERSION, "track": track.name, "track_version": track.version,
            "hosting": hosted.published, "parts": parts}


def version_key(versions: Mapping) -> str:
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def sumbench_build() -> dict[str, Any]:
    """sumbench's version and the git commit of this process's source (read once)."""
    return {"sumbench": package_versions(("sumbench",))["sumbench"], "git": git_commit()}


def score_versions(track, board: str, hosted: HostedGold) -> tuple[str, dict]:
    """(version key, version record with sumbench's version and git commit) of a board of
    hosted gold (its gold, secret and settings from one snapshot)."""
    versions = part_versions(track, board, hosted)
    return version_key(versions), {**versions, **sumbench_build()}
