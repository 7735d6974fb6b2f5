"""The submission client (httpx): collect files, check them with the server's validator,
submit, and wait for the score.

PATH arguments are prediction files (as `sumbench predict`/`run` write them), archives
(.tar.gz, .tgz, .zip) or run folders: a run folder contributes `predictions/*.jsonl` and its
`results.json`, from which the model card is filled (self-reported metadata).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leaderboard.intake.validate import RESULTS_NAME, Limits, Upload, validate_submission
from leaderboard.tracks import make_track
from tasks.plumbing.errors import DataError, SumbenchError

DEFAULT_TIMEOUT = 60.0


def collect_uploads(paths: Sequence[str | Path]) -> list[Upload]:
    """Files to send: each file as is; a run folder's predictions/*.jsonl and results.json."""
    uploads: list[Upload] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            predictions = sorted((path / "predictions").glob("*.jsonl"))
            if not predictions:
                raise DataError("a run folder needs predictions/*.jsonl", path=str(path))
            files = predictions + ([path / RESULTS_NAME] if (path / RESULTS_NAME).is_file()
                                   else [])
            uploads.extend(Upload(f.name, f.read_bytes()) for f in files)
        elif path.is_file():
            uploads.append(Upload(path.name, path.read_bytes()))
        else:
            raise DataError("no such file or folder", path=str(path))
    if not uploads:
        raise SumbenchError("no files to submit")
    return uploads


def _client(server: str, timeout: float):
    import httpx

    return httpx.Client(base_url=server.rstrip("/"), timeout=timeout)


def _answer(response) -> dict:
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:500]}
    if not isinstance(body, dict):
        body = {"answer": body}
    body.setdefault("http_status", response.status_code)
    return body


def fetch_manifest(server: str, track: str, variant: str,
                   timeout: float = DEFAULT_TIMEOUT) -> dict:
    import httpx

    try:
        with _client(server, timeout) as client:
            response = client.get(f"/api/v1/manifest/{track}", params={"variant": variant})
    except httpx.HTTPError as error:
        raise SumbenchError(f"cannot reach {server}: {error}") from None
    if response.status_code != 200:
        raise SumbenchError(f"{server}: no manifest for {track}/{variant} "
                            f"({_answer(response).get('detail', response.status_code)})")
    return response.json()


def _get_json(server: str, path: str, params: Mapping | None = None,
              timeout: float = DEFAULT_TIMEOUT) -> dict:
    """A GET answered 200 with JSON; any other answer names the server and the reason."""
    import httpx

    try:
        with _client(server, timeout) as client:
            response = client.get(path, params=dict(params or {}))
    except httpx.HTTPError as error:
        raise SumbenchError(f"cannot reach {server}: {error}") from None
    if response.status_code != 200:
        reason = _answer(response).get("detail", response.status_code)
        raise SumbenchError(f"{server}{path}: {reason}")
    return response.json()


def boards(server: str, track: str) -> list[str]:
    """The boards of a track on a server."""
    tracks = _get_json(server, "/api/v1/tracks")["tracks"]
    if track not in tracks:
        raise SumbenchError(f"{server}: no track {track!r} (tracks: {', '.join(tracks)})")
    return tracks[track]


def fetch_inputs(server: str, track: str, variant: str) -> dict:
    """A board's public inputs: {"track", "variant", "parts": {task: [records]}}."""
    return _get_json(server, f"/api/v1/inputs/{track}", {"variant": variant})


def stated_validation(manifest: Mapping | None) -> tuple[Limits, bool]:
    """(limits, strict_lengths) as a server's manifest states them; the defaults for what it
    does not state (no manifest, or a server from before `validation`)."""
    stated = (manifest or {}).get("validation")
    stated = stated if isinstance(stated, Mapping) else {}
    limits = stated.get("limits") if isinstance(stated.get("limits"), Mapping) else {}
    known = {field.name for field in dataclasses.fields(Limits)}
    values = {name: value for name, value in limits.items() if name in known
              and isinstance(value, int) and not isinstance(value, bool) and value > 0}
    return Limits(**values), stated.get("strict_lengths") is not False


def check(uploads: Sequence[Upload], track: str, variant: str,
          manifest: Mapping | None = None) -> dict:
    """Run the server's validator here, with the limits and length rule the manifest states;
    with the server's manifest it also checks that every test item is present once.
    Returns a report; raises SubmissionErrors."""
    limits, strict_lengths = stated_validation(manifest)
    result = validate_submission(make_track(track, strict_lengths=strict_lengths), uploads,
                                 manifest, limits, variant)
    return {"status": "valid", "track": track, "variant": variant,
            "coverage_checked": manifest is not None, "records": result.n_records,
            "parts": {part: len(records) for part, records in result.checked.items()},
            **({"ignored": list(result.ignored)} if result.ignored else {})}


def submit(server: str, token: str, uploads: Sequence[Upload], *, model: str,
           track: str = "usb", variant: str = "all", card: Mapping[str, Any] | None = None,
           evaluate: Mapping[str, str | None] | None = None,
           timeout: float = DEFAULT_TIMEOUT) -> dict:
    """POST the files, or (`evaluate`: {"evaluate", "revision", "profile"}) name a model for
    the server to evaluate; returns the server's JSON answer (with "http_status")."""
    import json

    import httpx

    files = [("files", (upload.name, upload.data)) for upload in uploads]
    data = {"model": model, "track": track, "variant": variant,
            "card": json.dumps(dict(card or {})),
            **{key: value for key, value in (evaluate or {}).items() if value}}
    try:
        with _client(server, timeout) as client:
            response = client.post("/api/v1/submissions", files=files, data=data,
                                   headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as error:
        raise SumbenchError(f"cannot reach {server}: {error}") from None
    return _answer(response)


def status(server: str, submission_id: int, token: str | None = None,
           timeout: float = DEFAULT_TIMEOUT) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with _client(server, timeout) as client:
            return _answer(client.get(f"/api/v1/submissions/{submission_id}", headers=headers))
    except httpx.HTTPError as error:
        raise SumbenchError(f"cannot reach {server}: {error}") from None


def wait_for(server: str, submission_id: int, token: str | None = None,
             timeout: float = 600.0, poll: float = 1.0) -> dict:
    """Poll until the submission is rejected, failed, or scored and analysed (intervals and
    rank known), or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        answer = status(server, submission_id, token)
        state = answer.get("status")
        if state in ("rejected", "failed") or (state == "scored" and answer.get("analysed")) \
                or time.monotonic() > deadline:
            return answer
        time.sleep(poll)


def submit_run_folder(server: str, token: str, model: str, run_dir: str | Path, *,
                      track: str = "usb", variant: str = "all") -> dict:
    """Submit one `sumbench run` folder (used by experiments' --submit)."""
    return submit(server, token, collect_uploads([run_dir]), model=model, track=track,
                  variant=variant)
