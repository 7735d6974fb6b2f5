"""Hidden gold in the database: loading, a per-process cache, manifests and version keys.

The version key of a board is the sha256 of what decides its numbers: the scorer version,
the track's version, each part's gold sha256 and (USB) each task's implementation version.
Every score row stores the key and the full version record (plus sumbench's version and git
commit); a board shows only rows with its current key, and `rescore` brings the others up.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from typing import Any, Mapping

from sqlalchemy import func, select

from leaderboard.service.db import Database, GoldPart, pack, unpack
from leaderboard.service.settings import SCORER_VERSION
from tasks.errors import SumbenchError

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


def gold_for(database: Database, track: str, session=None) -> dict[str, dict[str, dict]]:
    """board -> part -> payload of a track, cached per process until a part changes; read in
    `session` when given (a board rebuild's snapshot), else in a transaction of its own."""
    if session is None:  # one view for the marks and the payloads (the cache is shared)
        with database.snapshot_session() as own:
            return gold_for(database, track, own)
    marks = tuple(session.execute(
        select(GoldPart.board, GoldPart.part, GoldPart.sha256)
        .filter_by(track=track).order_by(GoldPart.board, GoldPart.part)).all())
    key = (database.url, track, marks)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    gold: dict[str, dict[str, dict]] = {}
    for row in session.scalars(select(GoldPart).filter_by(track=track)):
        gold.setdefault(row.board, {})[row.part] = unpack(row.payload)
    with _cache_lock:
        for old in [k for k in _cache if k[:2] == key[:2]]:
            del _cache[old]
        _cache[key] = gold
    return gold


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


def part_versions(track, board: str, gold: Mapping) -> dict[str, Any]:
    """What decides a board's numbers, per part."""
    from tasks import get_task

    parts = {}
    for part, payload in sorted(require_board(gold, track.name, board).items()):
        entry = {"gold_sha256": payload["sha256"]}
        if track.name == "usb":
            entry["task_version"] = get_task(part).version
        parts[part] = entry
    return {"scorer": SCORER_VERSION, "track": track.name, "track_version": track.version,
            "parts": parts}


def version_key(versions: Mapping) -> str:
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def sumbench_build() -> dict[str, Any]:
    """sumbench's version and the git commit of this process's source (read once)."""
    from tasks.provenance import git_commit, package_versions

    return {"sumbench": package_versions(("sumbench",))["sumbench"], "git": git_commit()}


def score_versions(track, board: str, gold: Mapping) -> tuple[str, dict]:
    """(version key, version record with sumbench's version and git commit)."""
    versions = part_versions(track, board, gold)
    return version_key(versions), {**versions, **sumbench_build()}


def gold_count(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count(GoldPart.id))) or 0)
