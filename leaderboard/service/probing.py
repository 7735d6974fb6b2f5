"""Telling probing apart from model development: each user's submission history for admins.

A probe is a file that differs from an earlier one of the same user and board in a few items:
it asks what those items' labels are (a crafted answer per submission, Whitehill 2016). At
accept time a submission keeps a short digest of each item's prediction (`item_digests`,
private, in manifest order); the admin listing compares every submission with the user's
earlier ones on the board, and a user with `PROBES_FLAGGED` or more near-identical
submissions (at most `near_limit(n)` items differ, at least one) is flagged "probing
suspected". Hidden and deleted submissions are listed and compared too.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from sqlalchemy import select

from leaderboard.service.db import Database, Submission, User, pack, unpack

#: near-identical submissions of one user that flag probing
PROBES_FLAGGED = 3


def item_digests(checked: Mapping[str, Sequence[dict]]) -> bytes:
    """Packed part -> [8-hex digest of each item's prediction] (manifest order)."""
    return pack({part: [hashlib.blake2b(json.dumps(record.get("prediction"), sort_keys=True)
                                        .encode(), digest_size=4).hexdigest()
                        for record in records] for part, records in checked.items()})


def near_limit(n_items: int) -> int:
    """At most this many differing items make two submissions near-identical."""
    return max(5, n_items // 100)


def differing_items(a: Mapping[str, list], b: Mapping[str, list]) -> int:
    """Items whose predictions differ; a part only one of them covers counts whole."""
    count = 0
    for part in set(a) | set(b):
        left, right = a.get(part), b.get(part)
        if left is None or right is None or len(left) != len(right):
            count += len(left or right or ())
        else:
            count += sum(x != y for x, y in zip(left, right))
    return count


def user_histories(database: Database) -> list[dict]:
    """Every user's submissions (oldest first), each with the fewest items it differs in from
    an earlier one of the same board, and the user's probing flag."""
    with database.session() as session:
        users = session.scalars(select(User).order_by(User.name)).all()
        rows = session.execute(select(
            Submission.id, Submission.user_id, Submission.kind, Submission.track,
            Submission.board, Submission.model, Submission.status, Submission.hidden,
            Submission.deleted, Submission.created_at, Submission.item_digests)
            .order_by(Submission.id)).all()
    histories = []
    for user in users:
        mine = [row for row in rows if row.user_id == user.id]
        entries, near = _compared(mine)
        histories.append({"user": user.name, "admin": user.is_admin, "submissions": entries,
                          "near_identical": near, "probing_suspected": near >= PROBES_FLAGGED})
    return histories


def _compared(rows) -> tuple[list[dict], int]:
    seen: dict[tuple, list[dict]] = {}
    entries, near = [], 0
    for row in rows:
        digests = unpack(row.item_digests) if row.item_digests else None
        earlier = seen.setdefault((row.track, row.board), [])
        closest = min((differing_items(digests, other) for other in earlier),
                      default=None) if digests is not None else None
        n_items = sum(len(values) for values in (digests or {}).values())
        is_near = closest is not None and 0 < closest <= near_limit(n_items)
        near += is_near
        if digests is not None:
            earlier.append(digests)
        entries.append({"id": row.id, "kind": row.kind, "track": row.track,
                        "board": row.board, "model": row.model, "status": row.status,
                        "hidden": row.hidden, "deleted": row.deleted,
                        "created": row.created_at.isoformat(timespec="seconds") + "Z",
                        "items": n_items, "fewest_items_differing": closest,
                        "near_identical": is_near})
    return entries, near
