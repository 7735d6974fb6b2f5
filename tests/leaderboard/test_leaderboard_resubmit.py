"""Sending the same submission again (a retry after a lost answer) stores nothing and counts
no quota: the answer is the earlier submission's (real SQLite file, the app through ASGI)."""
from __future__ import annotations

import json
import shutil

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from leaderboard.service.auth import audit_rows, create_token
from leaderboard.service.db import Database, Job, Submission
from leaderboard.service.settings import load_settings, save_settings

from lb_helpers import make_database, minimal_lines


@pytest.mark.slow
def test_a_retried_submission_answers_the_earlier_one(tmp_path, data_dir, usb_fixture_dir):
    from leaderboard.service.app import create_app

    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    url = make_database(tmp_path / "lb.sqlite", usb_data=tmp_path / "gold")
    database = Database(url)
    headers = {"Authorization": f"Bearer {create_token(database, 'dana')}"}
    client = TestClient(create_app(url))
    fix = minimal_lines(usb_fixture_dir / "predictions" / "fixing_factuality.jsonl")

    def submit(model: str, data: bytes = fix):
        return client.post("/api/v1/submissions", headers=headers,
                           files=[("files", ("fix.jsonl", data))], data={"model": model})

    def stored() -> tuple[int, int]:
        with database.session() as session:
            return (session.scalar(select(func.count(Submission.id))),
                    session.scalar(select(func.count(Job.id))))

    before = stored()  # the instance's own rows (system baselines)
    first = submit("retry-me")
    assert first.status_code == 202, first.text
    number = first.json()["id"]
    save_settings(database, load_settings(database).with_changes({"quota_per_day": "1"}))
    again = submit("retry-me")  # at the quota limit: a retry is still answered
    assert again.status_code == 200, again.text
    assert again.json() == {
        "id": number, "status": "queued", "duplicate": True,
        "message": f"these files were already submitted as submission {number} "
                   f"(model 'retry-me'); nothing new was stored"}
    assert stored() == (before[0] + 1, before[1] + 1)
    row = audit_rows(database, limit=1)[0]
    assert (row["actor"], row["action"], row["outcome"], row["submission_id"]) == \
        ("dana", "submit", "duplicate", number)
    assert submit("another name").status_code == 429  # not identical: a new submission
    save_settings(database, load_settings(database).with_changes({"quota_per_day": "10"}))
    assert submit("another name").status_code == 202
    edited = fix.replace(b'"prediction": "', b'"prediction": "Edited. ', 1)
    assert submit("retry-me", edited).status_code == 202  # other files: a new submission
    assert stored() == (before[0] + 3, before[1] + 3)
    assert client.delete(f"/api/v1/submissions/{number}", headers=headers).status_code == 200
    resent = submit("retry-me")  # the earlier one was deleted: stored anew
    assert resent.status_code == 202 and resent.json()["id"] not in (number,)
    assert "duplicate" not in resent.json()
    assert json.loads(client.get(f"/api/v1/submissions/{resent.json()['id']}").text)[
        "status"] == "queued"
    with database.session() as session:  # as if its scoring failed: a retry is stored anew
        session.get(Submission, resent.json()["id"]).status = "failed"
    again = submit("retry-me")
    assert again.status_code == 202 and again.json()["id"] != resent.json()["id"]


@pytest.mark.slow
def test_a_retry_is_answered_when_another_write_comes_between(tmp_path, data_dir,
                                                               usb_fixture_dir, monkeypatch):
    """The duplicate's audit row is written in a write transaction: a read transaction that
    then writes fails on SQLite ("database is locked") when another request wrote meanwhile."""
    from leaderboard.intake.validate import Upload
    from leaderboard.service import submissions
    from leaderboard.service.auth import audit, authenticate

    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    database = Database(make_database(tmp_path / "lb.sqlite", usb_data=tmp_path / "gold",
                                      computed_rows=False))
    user = authenticate(database, create_token(database, "dana"))
    uploads = [Upload("fix.jsonl", minimal_lines(
        usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"))]

    def send() -> dict:
        return submissions.accept(database, load_settings(database), user, track_name="usb",
                                  board="all", model="retry-me", card={}, uploads=uploads)

    number = send()["id"]
    earlier, writes = submissions.Identical.earlier, []

    def earlier_then_another_write(self, session):
        found = earlier(self, session)
        if not writes:  # another request's write, committed after this read
            with database.session() as other:
                audit(other, "eve", "login", "accepted")
            writes.append(1)
        return found

    monkeypatch.setattr(submissions.Identical, "earlier", earlier_then_another_write)
    assert send() == {"id": number, "status": "queued", "duplicate": True, "message": (
        f"these files were already submitted as submission {number} (model 'retry-me'); "
        f"nothing new was stored")}
    assert audit_rows(database, limit=1)[0]["outcome"] == "duplicate"


@pytest.mark.slow
def test_concurrent_identical_submissions_store_one_on_postgres(tmp_path, data_dir,
                                                                usb_fixture_dir, monkeypatch,
                                                                postgres_server):
    """On PostgreSQL the owner's row is locked before the identical check in the write
    transaction, for an admin (no quota) too: two requests that both validated store one."""
    import threading

    from leaderboard.intake.validate import Upload
    from leaderboard.service import submissions
    from leaderboard.service.auth import authenticate, ensure_user
    from leaderboard.service.init import initialise

    from servers import fresh_database

    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    uploads = [Upload("fix.jsonl", minimal_lines(
        usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"))]
    earlier, calls = submissions.Identical.earlier, threading.local()
    both_checked = threading.Barrier(2, timeout=3)

    def earlier_then_wait(self, session):  # the second call: the check before storing
        found = earlier(self, session)
        calls.n = getattr(calls, "n", 0) + 1
        if calls.n == 2:
            try:
                both_checked.wait()  # unlocked, both would find nothing and store
            except threading.BrokenBarrierError:  # the other request waits for the lock
                pass
        return found

    monkeypatch.setattr(submissions.Identical, "earlier", earlier_then_wait)
    with fresh_database(postgres_server) as url:
        initialise(url, gold=str(tmp_path / "gold"), computed_rows=False)
        database = Database(url)
        with database.session() as session:
            ensure_user(session, "root", admin=True)
        admin = authenticate(database, create_token(database, "root"))
        answers = []

        def send():
            answers.append(submissions.accept(
                database, load_settings(database), admin, track_name="usb", board="all",
                model="same", card={}, uploads=uploads))

        threads = [threading.Thread(target=send) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with database.session() as session:
            stored = session.scalar(select(func.count(Submission.id)))
        database.dispose()
    assert stored == 1
    assert sorted(answer.get("duplicate", False) for answer in answers) == [False, True]
