"""Models the server evaluates itself (entries of kind "evaluation", badge "evaluated here").

`accept_evaluation` checks a submitted SOURCE (leaderboard.service.model_source), its quota
and duplicates (the same content digest and settings by the same user on the same board), and
queues an "evaluate" job. The job (`evaluate_job`) writes the board's public inputs to a
temporary folder and runs leaderboard.service.evaluate_child in a process of its own under the
instance's wall-clock (`evaluate_seconds`) and memory (`evaluate_memory_bytes`, resident, as
the worker polls it) limits; it then stores the predictions, checked like a file's but with
every label count accepted (they are scored by the official rule and counted), and queues the
ordinary score job, in one transaction, once (a job taken over after its worker died finds
the predictions stored and stops). A model that cannot be loaded, runs too long or out of
memory ends "failed" with the reason; so does a model whose content an earlier evaluation of
the user's on the board already had (found once a hub model's files are fetched).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from sqlalchemy import select

from leaderboard.card import check_card
from leaderboard.service.auth import audit
from leaderboard.service.db import Database, Job, Submission, User, pack
from leaderboard.service.gold import board_inputs, board_manifest, require_board, gold_for
from leaderboard.service.jobs import finish
from leaderboard.service.model_source import (content_digest, model_card, model_files,
                                              resolve_source)
from leaderboard.service.probing import item_digests
from leaderboard.service.settings import InstanceSettings, load_settings
from leaderboard.service.submissions import Identical, check_model_name, check_quota
from tasks.errors import DataError, SumbenchError

#: the tracks whose boards can evaluate a model (their parts are tasks `sumbench predict` runs)
EVALUATED_TRACKS = ("usb",)
POLL_SECONDS = 0.5


@dataclass(frozen=True)
class EvaluateOptions:
    """A worker's options for evaluate jobs: where model folders are, the device to use."""
    model_root: str | None = None
    device: str = "auto"


def predict_settings(profile: str | None) -> dict:
    """The prediction settings of an evaluation: `sumbench predict`'s defaults (the USB
    release's), whatever the fine-tuning profile; `profile` is checked and recorded."""
    from trainers.predict import PredictSpec
    from trainers.profiles import get_profile

    if profile is not None:
        try:
            get_profile(profile)
        except SumbenchError as error:
            raise DataError(str(error), field="profile") from None
    return PredictSpec().result_fields()


def accept_evaluation(database: Database, settings: InstanceSettings, user: User, *,
                      track_name: str, board: str, model: Any, card: Mapping[str, Any],
                      source: str, revision: str | None, profile: str | None,
                      model_root: str | None) -> dict:
    """Check and queue a model for the server to evaluate; returns {"id", "status"} (or an
    earlier identical submission's answer). Raises DataError / QuotaExceeded (audited)."""
    detail = {"track": track_name, "board": board, "evaluate": str(source)[:200]}
    try:
        if track_name not in EVALUATED_TRACKS:
            raise DataError(f"track {track_name!r} evaluates no models (tracks that do: "
                            f"{', '.join(EVALUATED_TRACKS)})", field="track")
        require_board(gold_for(database, track_name), track_name, board)
        model = check_model_name(model)
        card = check_card({k: v for k, v in card.items() if v not in (None, "")})
        evaluation = describe(resolve_source(source, model_root, revision or None), profile,
                              settings)
        identity = hashlib.sha256(json.dumps(
            {key: evaluation[key] for key in ("content", "predict")}, sort_keys=True).encode())
        identical = Identical(user, "evaluation", track_name, board, model,
                              identity.hexdigest(), card)
        answer = identical.earlier_answer(database, detail)
        if answer is not None:
            return answer
        return _queue(database, settings, user, identical, card, evaluation, detail)
    except (SumbenchError, ValueError) as error:
        with database.write_session() as session:
            audit(session, user.name, "submit", "rejected",
                  detail={**detail, "error": str(error)[:2000]})
        raise


def describe(source, profile: str | None, settings: InstanceSettings) -> dict:
    """What an evaluation records: its source, content (a folder's digest now; a hub
    model's name and revision until its files are fetched), card and predict settings."""
    evaluation = {"source": source.name, "revision": source.revision, "profile": profile,
                  "predict": predict_settings(profile), "resolved": source.to_dict()}
    if source.kind == "folder":
        folder = Path(source.path)
        evaluation["digest"] = content_digest(folder, model_files(folder),
                                              settings.max_model_bytes)
        evaluation["content"] = evaluation["digest"]
        evaluation["model_card"] = model_card(folder)
    else:
        evaluation["content"] = f"hub:{source.name}@{source.revision or 'main'}"
    return evaluation


def _queue(database: Database, settings: InstanceSettings, user: User, identical: Identical,
           card: dict, evaluation: dict, detail: dict) -> dict:
    with database.write_session() as session:
        session.execute(select(User.id).where(User.id == user.id).with_for_update())
        earlier = identical.earlier(session)
        if earlier is not None:
            return identical.answer(session, earlier, detail)
        if not user.is_admin:
            check_quota(session, settings, user)
        submission = Submission(
            user_id=user.id, kind="evaluation", track=identical.track, board=identical.board,
            model=identical.model, card=json.dumps(card, sort_keys=True), status="queued",
            parts="[]", n_records=0, upload_sha256=identical.sha256,
            evaluation=json.dumps(evaluation, sort_keys=True))
        session.add(submission)
        session.flush()
        session.add(Job(submission_id=submission.id, kind="evaluate"))
        audit(session, user.name, "submit", "accepted", submission_id=submission.id,
              detail={**detail, "model": identical.model, "content": evaluation["content"]})
        return {"id": submission.id, "status": submission.status}


# ---- the job -------------------------------------------------------------------------------
class EvaluationFailed(SumbenchError):
    """The model could not be evaluated: the reason a participant reads."""


def evaluate_job(database: Database, job, options: EvaluateOptions) -> None:
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        if submission.deleted or submission.predictions is not None:
            finish(session, job.id)  # deleted, or stored by a run of this job that died later
            return
        submission.status = "evaluating"
        track_name, board = submission.track, submission.board
        evaluation = json.loads(submission.evaluation)
    settings = load_settings(database)
    track = settings.track(track_name)
    try:
        with tempfile.TemporaryDirectory(prefix="sumbench-evaluate-") as folder:
            outcome = run_child(database, track, board, evaluation, settings, options,
                                Path(folder))
            predictions = read_predictions(Path(folder) / "run")
        store_evaluation(database, job, track, board, evaluation, outcome, predictions)
    except EvaluationFailed as error:
        fail(database, job, str(error))


def run_child(database: Database, track, board: str, evaluation: dict,
              settings: InstanceSettings, options: EvaluateOptions, folder: Path) -> dict:
    """Write the board's inputs and the request, run the child under the limits; its
    evaluation.json, or EvaluationFailed."""
    inputs = board_inputs(database, track, board)
    for task, records in inputs["parts"].items():
        path = folder / "inputs" / board / task / "test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                        encoding="utf-8")
    request = {"source": evaluation["resolved"], "model_root": options.model_root,
               "inputs": str(folder / "inputs"), "board": board,
               "tasks": sorted(inputs["parts"]), "out": str(folder / "run"),
               "spec": {**evaluation["predict"], "device": options.device},
               "max_model_bytes": settings.max_model_bytes}
    (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
    code = supervise([sys.executable, "-m", "leaderboard.service.evaluate_child",
                      str(folder / "request.json")], settings)
    run = folder / "run"
    if code != 0:
        error = run / "error.json"
        reason = json.loads(error.read_text())["reason"] if error.is_file() else \
            f"the evaluation process failed (exit status {code})"
        raise EvaluationFailed(reason)
    return json.loads((run / "evaluation.json").read_text())


def supervise(command: list[str], settings: InstanceSettings) -> int:
    """Run `command`, killing it past `evaluate_seconds` or when its resident memory (with
    its children's) passes `evaluate_memory_bytes`; its exit status, or EvaluationFailed."""
    import psutil

    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + settings.evaluate_seconds
    try:
        while process.poll() is None:
            if time.monotonic() > deadline:
                raise EvaluationFailed(f"the evaluation timed out after "
                                       f"{settings.evaluate_seconds} s")
            if resident_bytes(psutil, process.pid) > settings.evaluate_memory_bytes:
                raise EvaluationFailed(f"the evaluation ran out of memory (over "
                                       f"{settings.evaluate_memory_bytes} bytes resident)")
            time.sleep(POLL_SECONDS)
        return process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()


def resident_bytes(psutil, pid: int) -> int:
    try:
        parent = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])
    except psutil.Error:  # it ended between the poll and now
        return 0


def read_predictions(run: Path) -> list:
    from leaderboard.service.validate import Upload

    return [Upload(path.name, path.read_bytes())
            for path in sorted((run / "predictions").glob("*.jsonl"))]


def store_evaluation(database: Database, job, track, board: str, evaluation: dict,
                     outcome: dict, uploads: list) -> None:
    """Check the predictions (every label count accepted), then store them with the job that
    scores them, once; a model whose content the user's earlier evaluation on the board had
    is failed as a duplicate."""
    from leaderboard.service.system_rows import TRUSTED_LIMITS
    from leaderboard.service.validate import validate_submission
    from leaderboard.tracks.usb import UsbTrack

    result = validate_submission(UsbTrack(strict_lengths=False), uploads,
                                 board_manifest(database, track, board), TRUSTED_LIMITS, board)
    evaluation = {**evaluation, "digest": outcome["digest"], "content": outcome["digest"],
                  "model_fingerprint": outcome["model_fingerprint"],
                  "counts": outcome["counts"]}
    predictions, digests = pack(result.checked), item_digests(result.checked)
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        if submission.predictions is not None:  # stored by an earlier run of this job
            finish(session, job.id)
            return
        earlier = _same_content(session, submission, evaluation)
        if earlier is not None:
            raise EvaluationFailed(f"submission {earlier} already evaluated this model (the "
                                   f"same content and settings)")
        submission.predictions, submission.item_digests = predictions, digests
        submission.parts = json.dumps(sorted(result.checked))
        submission.n_records, submission.status = result.n_records, "queued"
        submission.evaluation = json.dumps(evaluation, sort_keys=True)
        session.add(Job(submission_id=submission.id, kind="score"))
        finish(session, job.id)


def _same_content(session, submission: Submission, evaluation: dict) -> int | None:
    for other in session.scalars(select(Submission).where(
            Submission.user_id == submission.user_id, Submission.kind == "evaluation",
            Submission.track == submission.track, Submission.board == submission.board,
            Submission.id != submission.id, Submission.deleted.is_(False),
            Submission.status.in_(("queued", "evaluating", "scoring", "scored")))):
        stored = json.loads(other.evaluation or "{}")
        if stored.get("content") == evaluation["content"] and \
                stored.get("predict") == evaluation["predict"] and other.id < submission.id:
            return other.id
    return None


def fail(database: Database, job, reason: str) -> None:
    """End the job and its submission "failed" with the reason (no retry: the same model
    would fail the same way)."""
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        submission.status = "failed"
        submission.errors = json.dumps([{"file": None, "line": None, "field": None,
                                         "message": reason}])
        finish(session, job.id, "failed", reason)
