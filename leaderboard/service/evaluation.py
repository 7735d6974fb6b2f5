"""Models the server evaluates itself (entries of kind "evaluation", badge "evaluated here").

`accept_evaluation` checks a submitted SOURCE by name (leaderboard.service.model_source), its
quota, the user's waiting evaluations (leaderboard.service.compute) and a plain resubmission
(the same source, revision and settings), and queues an
"evaluate" job. The job (`evaluate_job`) copies the model into the worker's scratch folder,
checked and hashed as it is copied (leaderboard.service.model_fetch); fails it as a duplicate
of an earlier evaluation on the board of the same model
(leaderboard.service.same_model); writes the
board's public inputs; and runs leaderboard.service.evaluate_child in a process of its own
(no network, none of the worker's credentials; leaderboard.service.evaluation_process) under
the board's wall-clock and token budget (leaderboard.service.compute) and the instance's
memory limit (`evaluate_memory_bytes`, resident, as the worker polls it). It then stores
the predictions, checked like a file's but with every label count accepted (they are scored
by the official rule and counted), and queues the ordinary score job, in one transaction,
once (a job taken over after its worker died finds the predictions
stored and stops). A model that cannot be fetched, loaded or evaluated, runs too long or out
of memory ends "failed" with the reason, without a retry. An evaluation whose submission is
deleted or hidden while it runs is stopped (leaderboard.service.jobs.request_stop): the worker
polls for it, kills the model's process and waits until it is gone, then ends the job
"failed" with the reason, and stores nothing.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from leaderboard.card import check_card
from leaderboard.intake.inputs import write_inputs
from leaderboard.intake.validate import Upload, validate_submission
from leaderboard.service.auth import audit
from leaderboard.service.compute import check_evaluation_slots, evaluation_budget
from leaderboard.service.db import Database, Job, Submission, User, pack
from leaderboard.service.encoder_models import (
    encoder_budget,
    encoder_predict_settings,
    evaluated_tasks,
    fetch_encoder_models,
    is_encoder_evaluation,
    submitted_listing,
)
from leaderboard.service.evaluate_child import board_instances, planned_generations
from leaderboard.service.evaluation_process import (
    EvaluationFailed,
    EvaluationStopped,
    supervise,
)
from leaderboard.service.gold import board_inputs, board_manifest, gold_for, require_board
from leaderboard.service.jobs import fail_job, finish, stop_requested
from leaderboard.service.model_fetch import fetch_model
from leaderboard.service.model_source import (
    ModelLimits,
    open_source,
    plan_folder,
    resolve_source,
)
from leaderboard.service.probing import item_digests
from leaderboard.service.same_model import claim_content
from leaderboard.service.settings import InstanceSettings, load_settings
from leaderboard.service.submissions import (
    Identical,
    check_model_name,
    check_quota,
    check_rejections,
    refusal_outcome,
)
from leaderboard.service.system_rows import TRUSTED_LIMITS
from leaderboard.tracks.usb import UsbTrack
from tasks import get_task
from tasks.plumbing.errors import DataError, SumbenchError
from trainers.encoders.pipeline import is_encoder_profile
from trainers.finetuning.profiles import get_profile
from trainers.inference.predict import PredictSpec

#: the tracks whose boards can evaluate a model (their parts are tasks `sumbench predict` runs)
EVALUATED_TRACKS = ("usb",)


@dataclass(frozen=True)
class EvaluateOptions:
    """A worker's options for evaluate jobs: where model folders are, the device to use."""
    model_root: str | None = None
    device: str = "auto"


def predict_settings(profile: str | None) -> dict:
    """The prediction settings of an evaluation: `sumbench predict`'s defaults (the USB
    release's), whatever the seq2seq fine-tuning profile; an encoder profile's own
    (leaderboard.service.encoder_models); `profile` is checked and recorded."""
    if is_encoder_profile(profile):
        return encoder_predict_settings(profile)
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
        if not user.is_admin:
            with database.session() as session:
                check_rejections(session, settings, user)  # before reading the model
        model = check_model_name(model)
        card = check_card({k: v for k, v in card.items() if v not in (None, "")})
        resolved = resolve_source(source, model_root, revision or None)
        if resolved.kind == "folder" and revision:
            raise DataError("a revision names a version of a hub model; a folder is "
                            "evaluated as it is now", field="revision")
        listing = None
        if is_encoder_profile(profile):
            listing = submitted_listing(resolved, model_root, model_limits(settings))
        elif resolved.kind == "folder":  # what can be seen without reading the weights
            with open_source(resolved.name, model_root) as folder:
                listing = plan_folder(folder, model_limits(settings)).listing_key
        evaluation = describe(resolved, profile)
        identity = hashlib.sha256(json.dumps(
            {**{key: evaluation[key] for key in ("source", "revision", "predict")},
             **({"listing": listing} if listing else {})}, sort_keys=True).encode())
        identical = Identical(user, "evaluation", track_name, board, model,
                              identity.hexdigest(), card)
        answer = identical.earlier_answer(database, detail)
        if answer is not None:
            return answer
        return _queue(database, settings, user, identical, card, evaluation, detail)
    except OSError:  # what the checks above did not foresee: still a 4xx, never a path
        error = DataError("the model folder cannot be read", field="evaluate")
        _audit_rejection(database, user, detail, error)
        raise error from None
    except (SumbenchError, ValueError) as error:
        _audit_rejection(database, user, detail, error)
        raise


def _audit_rejection(database: Database, user: User, detail: dict, error: Exception) -> None:
    with database.write_session() as session:
        audit(session, user.name, "submit", refusal_outcome(error),
              detail={**detail, "error": str(error)[:2000]})


def model_limits(settings: InstanceSettings) -> ModelLimits:
    return ModelLimits(settings.max_model_bytes, settings.max_model_files)


def describe(source, profile: str | None) -> dict:
    """What an evaluation records when it is submitted: the source as named, its revision,
    the profile and the predict settings (the content digest and card once it is fetched)."""
    return {"source": source.name, "kind": source.kind, "revision": source.revision,
            "profile": profile, "predict": predict_settings(profile)}


def _queue(database: Database, settings: InstanceSettings, user: User, identical: Identical,
           card: dict, evaluation: dict, detail: dict) -> dict:
    with database.write_session() as session:
        session.execute(select(User.id).where(User.id == user.id).with_for_update())
        earlier = identical.earlier(session)
        if earlier is not None:
            return identical.answer(session, earlier, detail)
        if not user.is_admin:
            check_quota(session, settings, user)
            check_evaluation_slots(session, settings, user)
        submission = Submission(
            user_id=user.id, kind="evaluation", track=identical.track, board=identical.board,
            model=identical.model, card=json.dumps(card, sort_keys=True), status="queued",
            parts="[]", n_records=0, upload_sha256=identical.sha256,
            evaluation=json.dumps(evaluation, sort_keys=True))
        session.add(submission)
        session.flush()
        session.add(Job(submission_id=submission.id, kind="evaluate"))
        audit(session, user.name, "submit", "accepted", submission_id=submission.id,
              detail={**detail, "model": identical.model, "revision": evaluation["revision"]})
        return {"id": submission.id, "status": submission.status}


# ---- the job -------------------------------------------------------------------------------
def evaluate_job(database: Database, job, options: EvaluateOptions) -> None:
    with database.write_session() as session:
        submission = session.get(Submission, job.submission_id)
        stopped = session.get(Job, job.id)
        if stopped.state == "stopping":  # stopped while its worker died
            fail_job(session, job.id, job.submission_id, stopped.error)
            return
        if submission.deleted or submission.predictions is not None:
            finish(session, job.id)  # deleted, or stored by a run of this job that died later
            return
        submission.status = "evaluating"
        track_name, board = submission.track, submission.board
        evaluation = json.loads(submission.evaluation)
    settings = load_settings(database)
    track = settings.track(track_name)
    try:
        with tempfile.TemporaryDirectory(prefix="sumbench-evaluate-") as scratch:
            folder = Path(scratch)
            fetched = fetch_checked(evaluation, options, settings, folder)
            evaluation = {**evaluation, "digest": fetched.digest, "weights": fetched.weights,
                          "files_key": fetched.files_key, "model_card": fetched.card,
                          "removed_fields": list(fetched.removed)}
            claim_content(database, job, evaluation)
            outcome = run_child(database, track, board, evaluation, settings, options,
                                folder, fetched.folder, lambda: stop_requested(database, job.id))
            predictions = read_predictions(folder / "run")
            store_evaluation(database, job, track, board, {**evaluation, **outcome},
                             predictions)
    except EvaluationFailed as error:
        fail(database, job, str(error), error.cost)


def fetch_checked(evaluation: dict, options: EvaluateOptions, settings: InstanceSettings,
                  scratch: Path):
    """The model copied into `scratch`, or EvaluationFailed (once: the same files would fail
    again). An evaluation run again (a rescore) must find the files it evaluated before."""

    fetch = fetch_encoder_models if is_encoder_evaluation(evaluation.get("predict")) else \
        fetch_model
    try:
        fetched = fetch(evaluation["source"], evaluation["revision"], options.model_root,
                        model_limits(settings), scratch / "fetched", kind=evaluation.get("kind"))
    except DataError as error:  # about the model's own files, named as submitted
        raise EvaluationFailed(f"the model cannot be fetched: {error.reason}") from None
    except OSError as error:
        raise EvaluationFailed("the model cannot be fetched: " + redact(
            first_line(error), str(scratch), options.model_root)) from None
    except (ValueError, TypeError, KeyError, RecursionError) as error:  # its files' content
        raise EvaluationFailed(f"the model cannot be fetched: {type(error).__name__}: "
                               + redact(first_line(error), str(scratch),
                                        options.model_root)) from None
    if evaluation.get("digest") not in (None, fetched.digest):
        raise EvaluationFailed("the model's files changed since this entry was evaluated "
                               "(another content digest): submit them again to evaluate them")
    return fetched


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:500]


def redact(text: str, scratch: str, model_root: str | None) -> str:
    """`text` without the server's own paths (the scratch folder, the model root)."""
    for path, shown in ((scratch, "<scratch>"), (model_root, "<model root>")):
        for spelling in {path, str(Path(path).resolve())} if path else ():
            text = text.replace(spelling, shown)
    return text


def run_child(database: Database, track, board: str, evaluation: dict,
              settings: InstanceSettings, options: EvaluateOptions, folder: Path,
              model: Path, stop) -> dict:
    """Write the board's inputs and the request, run the child under the limits (and until
    `stop()` gives a reason); its evaluation.json, or EvaluationFailed."""
    inputs = board_inputs(database, track, board)
    write_inputs(folder / "inputs", inputs)
    tasks = {name: get_task(name) for name in sorted(inputs["parts"])}
    if is_encoder_evaluation(evaluation.get("predict")):
        try:
            tasks = {name: tasks[name] for name in evaluated_tasks(tasks, model)}
        except DataError as error:
            raise EvaluationFailed(f"the model cannot be evaluated: {error.reason}") from None
        budget = encoder_budget(settings, sum(map(len, board_instances(
            tasks, board, folder / "inputs").values())))
    else:
        budget = evaluation_budget(settings, planned_generations(
            tasks, board_instances(tasks, board, folder / "inputs"), None,
            PredictSpec.from_dict(evaluation["predict"])),
            int(evaluation["predict"]["max_new_tokens"]))
    request = {"model": str(model), "inputs": str(folder / "inputs"), "board": board,
               "tasks": list(tasks), "out": str(folder / "run"),
               "spec": {**evaluation["predict"], "device": options.device},
               "scratch": str(folder),
               # None: the process plans its budget with the model's own tokenizer
               "max_generated_tokens": settings.evaluate_token_budget or None}
    (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
    started = time.monotonic()
    try:
        code, peak_rss = supervise([sys.executable, "-m", "leaderboard.service.evaluate_child",
                                    str(folder / "request.json")], budget.seconds,
                                   settings.evaluate_memory_bytes, folder / "stderr.log",
                                   folder, stop)
    except EvaluationFailed as error:  # a limit, or stopped: the process is gone
        error.cost = evaluation_cost(None, time.monotonic() - started, error.peak_rss_bytes)
        raise
    seconds = time.monotonic() - started
    run = folder / "run"
    if code != 0:
        error = run / "error.json"
        failure = json.loads(error.read_text()) if error.is_file() else {
            "reason": f"the evaluation process failed (exit status {code})"}
        raise EvaluationFailed(failure["reason"], cost=evaluation_cost(
            failure.get("measured"), seconds, peak_rss))
    outcome = json.loads((run / "evaluation.json").read_text())
    return {**outcome, "cost": evaluation_cost(outcome.pop("measured"), seconds, peak_rss)}


def evaluation_cost(measured: dict | None, seconds: float, polled_rss: int) -> dict:
    """The entry's `cost`: wall seconds of the evaluation process as the worker timed it,
    generated tokens, peak resident memory (the process's own peak, or the worker's polls
    of it with its children, whichever is higher), peak GPU memory and the device; of a
    process that ended before it could report (`measured` None), what the worker saw."""
    measured = measured or {"generated_tokens": None, "peak_rss_bytes": 0,
                            "peak_gpu_bytes": None, "device": None}
    tokens = measured["generated_tokens"]
    return {"seconds": round(seconds, 3),
            "generated_tokens": None if tokens is None else int(tokens),
            "peak_rss_bytes": max(int(measured["peak_rss_bytes"]), polled_rss),
            "peak_gpu_bytes": measured["peak_gpu_bytes"], "device": measured["device"]}


def read_predictions(run: Path) -> list:
    return [Upload(path.name, path.read_bytes())
            for path in sorted((run / "predictions").glob("*.jsonl"))]


def store_evaluation(database: Database, job, track, board: str, evaluation: dict,
                     uploads: list) -> None:
    """Check the predictions (every label count accepted), then store them with the job that
    scores them, once."""
    try:
        result = validate_submission(UsbTrack(strict_lengths=False), uploads,
                                     board_manifest(database, track, board), TRUSTED_LIMITS,
                                     board)
    except DataError as error:  # e.g. the board's gold changed while the model ran
        raise EvaluationFailed(f"the model's predictions could not be checked: "
                               f"{first_line(error)}") from None
    predictions, digests = pack(result.checked), item_digests(result.checked)
    with database.write_session() as session:
        submission = session.scalars(select(Submission).where(
            Submission.id == job.submission_id).with_for_update()).one()
        row = session.get(Job, job.id)
        if row.state == "stopping":  # stopped as the process ended: nothing is stored
            raise EvaluationStopped(row.error)
        if submission.predictions is not None:  # stored by an earlier run of this job
            finish(session, job.id)
            return
        submission.predictions, submission.item_digests = predictions, digests
        submission.parts = json.dumps(sorted(result.checked))
        submission.n_records, submission.status = result.n_records, "queued"
        submission.evaluation = json.dumps(evaluation, sort_keys=True)
        session.add(Job(submission_id=submission.id, kind="score"))
        finish(session, job.id)


def fail(database: Database, job, reason: str, cost: dict | None = None) -> None:
    """End the job and its submission "failed" with the reason (no retry: the same model
    would fail the same way), and what the evaluation cost up to the failure when it ran."""
    with database.write_session() as session:
        fail_job(session, job.id, job.submission_id, reason)
        if cost is not None:
            submission = session.get(Submission, job.submission_id)
            submission.evaluation = json.dumps({**json.loads(submission.evaluation or "{}"),
                                                "cost": cost}, sort_keys=True)
