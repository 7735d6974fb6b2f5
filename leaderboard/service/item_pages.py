"""Item-by-item pages of entries, served only where every item may be published: on an
instance whose test gold is public (`gold_visibility = public`: anyone may hold the test
labels, and the whole test set is hosted). There, `/items/{id}?task=` shows one entry's
records of one task (`&b=` a second entry's beside it) in the viewer of `sumbench view`
(tasks.item_view): inputs, references, predictions and per-item values from the scoring code.

Where the gold is hidden nothing of this is served, not even after `reveal` (which publishes
the private part's scores, not its references): an item page would hand out the gold. A
page is assembled on request for entries anyone may see, from what the worker stored when it
scored the entry: the predictions, joined onto the hosted gold, the score's results and each
record's material. Nothing is scored in a request.

What one entry's task brings to a page is built once and kept (per entry and task, as last
scored), so a page of two entries reuses each; the finished pages are kept too. Building
takes a lock of that entry and task alone: a page kept already is answered at once, however
many others are being built. A prediction longer than MAX_SHOWN_CHARS is shown cut, marked
as such; `/items/{id}/predictions.jsonl` downloads the entry's predictions whole.
"""
from __future__ import annotations

import json

from sqlalchemy import select

from leaderboard.service.db import Database, Material, Score, Submission, unpack
from leaderboard.service.entry_view import public_view
from leaderboard.service.gold import hosted_gold, score_versions
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import NotFound
from tasks import get_task
from tasks.item_values import item_kind, item_values
from tasks.item_view import render_view, view_data
from tasks.plumbing.kept import Kept

#: the most characters of a prediction a page shows (a page stays a bounded size, however
#: large the upload was); the rest is in the entry's predictions download
MAX_SHOWN_CHARS = 4000
KEPT_RUNS, KEPT_PAGES = 32, 8
ASSET_PATH = "/view-assets/"


_runs, _pages = Kept(KEPT_RUNS), Kept(KEPT_PAGES)


def item_pages_offered(database: Database) -> bool:
    """Whether this instance publishes items: its test gold is public."""
    return load_settings(database).gold_is_public


def item_page(database: Database, entry_id: int, task: str, versus: int | None = None) -> str:
    """The viewer page of one entry's records of `task` (with `versus`, two entries'); a
    NotFound where the gold is hidden, for an entry no one may see, or a task it lacks."""
    if not item_pages_offered(database):
        raise NotFound("item pages are served only where the test gold is public")
    ids = (entry_id,) if versus is None or versus == entry_id else (entry_id, versus)
    views = [public_view(database, entry) for entry in ids]
    for view in views:
        if view["status"] != "scored" or task not in (view.get("headlines") or {}):
            raise NotFound(f"submission {view['id']} has no scored task {task!r}")
    if len({(view["track"], view["variant"]) for view in views}) != 1:
        raise NotFound("the two entries are on different boards")
    key = (database.url, ids, task, tuple(view["scored"] for view in views))
    return _pages.get_or_build(key, lambda: _render(database, views, task))


def _render(database: Database, views: list[dict], task: str) -> str:
    runs = [(f"#{view['id']} {view['model']}", {task: _run(database, view, task)})
            for view in views]
    title = " vs ".join(name for name, _ in runs) + f": {task}, item by item"
    return render_view(view_data(runs), title=title,
                       asset_urls={name: ASSET_PATH + name for name in ("view.js", "view.css")})


def _run(database: Database, view: dict, task: str) -> tuple[list[dict], dict, list[dict]]:
    """One entry's task as a page shows it (kept per entry and task, as last scored)."""
    def build():
        track = load_settings(database).track(view["track"])
        if not hasattr(track, "joined_records"):  # USB: records by task
            raise NotFound(f"track {track.name} has no item pages")
        hosted, board = hosted_gold(database, track.name), view["variant"]
        key = score_versions(track, board, hosted)[0]
        records, result, values = _scored_records(database, track, hosted.gold, board, key,
                                                  view["id"], task)
        return [shown_record(record, view["id"]) for record in records], result, values

    return _runs.get_or_build((database.url, view["id"], task, view["scored"]), build)


def shown_record(record: dict, entry_id: int) -> dict:
    """The record with a prediction over MAX_SHOWN_CHARS cut, and marked where it was."""
    prediction = record.get("prediction")
    if not isinstance(prediction, str) or len(prediction) <= MAX_SHOWN_CHARS:
        return record
    left = len(prediction) - MAX_SHOWN_CHARS
    return {**record, "prediction": f"{prediction[:MAX_SHOWN_CHARS]} … [cut here: {left} more "
                                    f"characters; /items/{entry_id}/predictions.jsonl holds "
                                    f"the whole prediction]"}


def predictions_download(database: Database, entry_id: int) -> bytes:
    """The entry's stored predictions (every task, as submitted records' ids and
    predictions), JSON Lines; NotFound as for its pages."""
    if not item_pages_offered(database):
        raise NotFound("predictions are served only where the test gold is public")
    view = public_view(database, entry_id)
    if view["status"] != "scored":
        raise NotFound(f"submission {entry_id} is not scored")
    with database.session() as session:
        stored = session.get(Submission, entry_id).predictions
    parts = unpack(stored) if stored is not None else {}
    return "".join(json.dumps(record, ensure_ascii=False) + "\n"
                   for task in sorted(parts) for record in parts[task]).encode("utf-8")


def _scored_records(database: Database, track, gold, board: str, key: str, entry_id: int,
                    task: str) -> tuple[list[dict], dict, list[dict]]:
    """(records, result, item values) of an entry's task as the worker scored it: the stored
    predictions joined onto the gold, the score's results, the values of its stored material
    (nothing is scored in a request)."""
    with database.session() as session:
        stored = session.get(Submission, entry_id).predictions
        score = session.scalars(select(Score).filter_by(
            submission_id=entry_id, current=True).order_by(Score.id.desc())).first()
        material = None if score is None or score.version_key != key else session.scalar(
            select(Material.examples).filter_by(score_id=score.id, part=task))
        results = json.loads(score.public_results or score.results) if score else {}
    records = unpack(stored).get(task) if stored is not None else None
    if records is None or material is None:
        raise NotFound(f"submission {entry_id} has no {task!r} records scored under the "
                       f"board's current version")
    kind = item_kind(get_task(task))
    values = [item_values(kind, example) for example in unpack(material)]
    return track.joined_records(task, records, gold, board), results[task], values
