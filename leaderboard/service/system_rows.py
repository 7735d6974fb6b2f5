"""Rows the server computes itself ("computed here"), submitted through the normal pipeline
(validated, scored by a worker, ranked) under the reserved user `sumbench`:

- summaries boards: the human-judged systems of the set (kind "reference"), with their human
  Pyramid score in the card (`human_pyramid`) beside the automatic scores;
- evaluators boards: built-in metrics (kind "builtin"): ROUGE-1/2/L recall, lexical Pyramid
  over SCUs, STUs, sentences and QA units;
- usb boards: non-neural baselines (kind "baseline", trainers.inference.baselines) on the test
inputs.

A row already present (same kind, board and name) is not added again.
"""
from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import select

from leaderboard.intake.validate import Limits, Upload, validate_submission
from leaderboard.service.auth import system_user
from leaderboard.service.db import Database, Job, Submission, pack
from leaderboard.service.gold import board_manifest, gold_for
from leaderboard.service.settings import InstanceSettings
from leaderboard.tracks.evaluators import builtin_metric_records
from tasks import get_task
from trainers.inference.baselines import BASELINES, baseline_records


def _jsonl(records: Iterable[dict]) -> bytes:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records).encode()


#: computed-here rows come from the server itself: the limits that protect it from submitters
#: do not apply to them (a small `max_line_bytes` or `max_upload_bytes` must not fail `init`)
TRUSTED_LIMITS = Limits(max_bytes=1 << 62, max_records=1 << 62, max_files=1 << 10,
                        max_line_bytes=1 << 62)


def add_system_row(database: Database, settings: InstanceSettings, *, kind: str, track: str,
                   board: str, model: str, records: list[dict], card: dict) -> int | None:
    """Validate and queue one computed-here row; None when it exists already."""
    track_object = settings.track(track)
    upload = Upload(f"{model}.jsonl", _jsonl(records))
    result = validate_submission(track_object, [upload],
                                 board_manifest(database, track_object, board),
                                 TRUSTED_LIMITS, board)
    predictions = pack(result.checked)  # compressed before the write lock is taken
    with database.write_session() as session:
        exists = session.scalars(select(Submission.id).filter_by(
            kind=kind, track=track, board=board, model=model, deleted=False)).first()
        if exists:
            return None
        owner = system_user(session)
        row = Submission(user_id=owner.id, kind=kind, track=track, board=board, model=model,
                         card=json.dumps(card, sort_keys=True),
                         parts=json.dumps(sorted(result.checked)),
                         n_records=result.n_records, upload_sha256=result.sha256,
                         predictions=predictions)
        session.add(row)
        session.flush()
        session.add(Job(submission_id=row.id, kind="score"))
        return row.id


def add_reference_rows(database: Database, settings: InstanceSettings) -> list[int]:
    track = settings.track("summaries")
    gold = gold_for(database, "summaries")
    added = []
    for board in track.boards(gold):
        for system, info in track.reference_systems(gold, board).items():
            records = [{"dataset": board, "id": example_id, "summary": summary}
                       for example_id, summary in zip(gold[board][board]["ids"],
                                                      info["summaries"])]
            card = {"method": "human-judged system of the set",
                    "human_pyramid": round(info["human"], 6)}
            added.append(add_system_row(database, settings, kind="reference",
                                        track="summaries", board=board, model=system,
                                        records=records, card=card))
    return [row for row in added if row]


def add_builtin_rows(database: Database, settings: InstanceSettings) -> list[int]:
    gold = gold_for(database, "evaluators")
    added = []
    for board in sorted(gold):
        for name, records in builtin_metric_records(gold[board][board]).items():
            added.append(add_system_row(database, settings, kind="builtin", track="evaluators",
                                        board=board, model=name, records=records,
                                        card={"method": "built-in evaluator"}))
    return [row for row in added if row]


def add_baseline_rows(database: Database, settings: InstanceSettings) -> list[int]:
    """Non-neural baselines on every usb board (trainers.inference.baselines)."""
    gold = gold_for(database, "usb")
    added = []
    for board in sorted(gold):
        records = []
        for name, payload in sorted(gold[board].items()):
            task = get_task(name)
            instances = [dict(template) for template in payload["templates"]]
            records.extend(baseline_records(task, instances))
        added.append(add_system_row(
            database, settings, kind="baseline", track="usb", board=board,
            model="non-neural baselines", records=records,
            card={"method": "; ".join(f"{task}: {name}" for task, name in sorted(
                BASELINES.items()) if task in gold[board])}))
    return [row for row in added if row]
