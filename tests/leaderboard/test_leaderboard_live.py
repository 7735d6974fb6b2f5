"""The leaderboard under load and faults, against real uvicorn servers and worker processes on
127.0.0.1, with SQLite files and a throwaway PostgreSQL cluster: concurrent submissions are
stored and scored exactly once, a worker killed mid-job is replaced without double scoring,
a server restart loses nothing, and concurrent workers never claim the same job."""
from __future__ import annotations

import concurrent.futures
import json
import shutil
import signal
import subprocess
import time

import httpx
import pytest
from sqlalchemy import func, select

from leaderboard.service.auth import create_token
from leaderboard.service.db import Database, Job, Score, Submission
from leaderboard.service.init import initialise

from lb_helpers import (
    OPEN_INSTANCE,
    gold_strings,
    minimal_lines,
    sqlite_write_lock_is_free,
    wait_for_lapsed_leases,
)
from servers import LeaderboardServer, child_env, fresh_database, sumbench_command

N_SUBMISSIONS = 20


@pytest.fixture(scope="module")
def gold(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("gold")
    shutil.copytree(data_dir / "all", root / "all")
    return root


@pytest.fixture(scope="module")
def fix_lines(usb_fixture_dir) -> bytes:
    return minimal_lines(usb_fixture_dir / "predictions" / "fixing_factuality.jsonl")


def _prepare(db: str, gold) -> str:
    initialise(db, gold=str(gold), settings={**OPEN_INSTANCE, "n_resamples": "20",
                                             "quota_per_day": "100", "quota_per_week": "100",
                                             "lease_seconds": "3"}, computed_rows=False)
    return create_token(Database(db), "loadtester")


def _submit(url: str, token: str, data: bytes, model: str) -> httpx.Response:
    return httpx.post(url + "/api/v1/submissions", headers={"Authorization": f"Bearer {token}"},
                      files=[("files", ("fix.jsonl", data))], data={"model": model},
                      timeout=120)


def _wait_scored(database: Database, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with database.session() as session:
            done = session.scalar(select(func.count(Submission.id)).where(
                Submission.status == "scored"))
            pending = session.scalar(select(func.count(Job.id)).where(
                Job.state.in_(("queued", "running"))))
        if done >= count and not pending:
            return
        time.sleep(0.3)
    with database.session() as session:  # what the stragglers are doing, for the report
        statuses = session.execute(select(Submission.status, func.count(Submission.id))
                                   .group_by(Submission.status)).all()
        jobs = session.execute(select(Job.id, Job.kind, Job.state, Job.attempts, Job.error)
                               .where(Job.state != "done")).all()
    raise AssertionError(f"only {done} of {count} submissions scored in {timeout} s "
                         f"(submissions by status: {dict(statuses)}; jobs not done: "
                         f"{[tuple(job) for job in jobs]})")


def _board_entries(server_url: str, count: int, timeout: float = 60) -> dict:
    """The usb/all board once it lists `count` entries (the last analysis to finish rebuilds
    it just after marking its job done)."""
    deadline = time.monotonic() + timeout
    while True:
        board = httpx.get(server_url + "/api/v1/leaderboard/usb").json()
        if len(board["entries"]) >= count or time.monotonic() > deadline:
            return board
        time.sleep(0.2)


def _concurrent_submissions(server_url: str, token: str, data: bytes) -> list[int]:
    with concurrent.futures.ThreadPoolExecutor(N_SUBMISSIONS) as pool:
        responses = list(pool.map(lambda i: _submit(server_url, token, data, f"model-{i}"),
                                  range(N_SUBMISSIONS)))
    assert [r.status_code for r in responses] == [202] * N_SUBMISSIONS, \
        [r.text for r in responses if r.status_code != 202][:2]
    return [r.json()["id"] for r in responses]


def _scored_exactly_once(database: Database, ids: list[int]) -> None:
    with database.session() as session:
        assert session.scalar(select(func.count(Submission.id))) == N_SUBMISSIONS
        per_submission = dict(session.execute(
            select(Score.submission_id, func.count(Score.id)).group_by(Score.submission_id)
        ).all())
        jobs = session.scalars(select(Job)).all()
    assert sorted(per_submission) == sorted(ids) and set(per_submission.values()) == {1}
    assert len(set(ids)) == N_SUBMISSIONS
    assert all(job.state == "done" for job in jobs)


@pytest.mark.slow
def test_sqlite_concurrent_submissions_kill_and_restart(tmp_path, gold, fix_lines):
    db = str(tmp_path / "lb.sqlite")
    token = _prepare(db, gold)
    database = Database(db)
    with LeaderboardServer(db, "--workers", "2") as server:  # two worker processes
        ids = _concurrent_submissions(server.url, token, fix_lines)
        _wait_scored(database, N_SUBMISSIONS)
        before = _board_entries(server.url, N_SUBMISSIONS)
    _scored_exactly_once(database, ids)
    with database.session() as session:
        workers = {name.split(":")[1] for name in session.scalars(select(Job.worker))}
    assert len(workers) == 2  # both processes claimed jobs
    assert server.log.count(" claimed") >= 2 * N_SUBMISSIONS  # the worker logs its jobs
    assert not [s for s in gold_strings(gold) if s in server.log]  # and never gold
    assert len(before["entries"]) == N_SUBMISSIONS
    with LeaderboardServer(db, "--no-worker") as server:  # a restart loses nothing
        after = httpx.get(server.url + "/api/v1/leaderboard/usb").json()
        assert [e["id"] for e in after["entries"]] == [e["id"] for e in before["entries"]]
        answer = httpx.get(f"{server.url}/api/v1/submissions/{ids[0]}").json()
        assert answer["status"] == "scored" and "fixing_factuality" in answer["public_scores"]
        _killed_worker_is_replaced(server.url, token, db, database, fix_lines)


def _killed_worker_is_replaced(url: str, token: str, db: str, database: Database,
                               data: bytes) -> None:
    submission = _submit(url, token, data, "killed-mid-job").json()["id"]
    worker = subprocess.Popen(sumbench_command("leaderboard", "worker", "--db", db, "--hold",
                                               "30", "--lease", "2"),
                              env=child_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with database.session() as session:
                job = session.scalars(select(Job).filter_by(submission_id=submission,
                                                            kind="score")).one()
                if job.state == "running":
                    break
            time.sleep(0.1)
        assert job.state == "running"
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
    wait_for_lapsed_leases(database, submission)  # the dead worker's lease runs out
    subprocess.run(sumbench_command("leaderboard", "worker", "--db", db, "--once"),
                   env=child_env(), check=True, capture_output=True, timeout=300)
    with database.session() as session:
        scores = session.scalar(select(func.count(Score.id)).filter_by(
            submission_id=submission))
        job = session.scalars(select(Job).filter_by(submission_id=submission,
                                                    kind="score")).one()
        status = session.get(Submission, submission).status
    assert (scores, job.state, job.attempts, status) == (1, "done", 2, "scored")


@pytest.mark.slow
def test_postgres_migrations_concurrency_and_skip_locked_claims(gold, fix_lines, postgres_server):
    from leaderboard.service.schema import schema_differences

    with fresh_database(postgres_server) as url:
        token = _prepare(url, gold)
        database = Database(url)
        assert schema_differences(database) == []
        with LeaderboardServer(url, "--no-worker") as server:
            ids = _concurrent_submissions(server.url, token, fix_lines)
            # each claimed job is held 0.3 s, so one worker alone would need 12 s for the 40
            # jobs (scores and analyses): the others, started meanwhile, must compete for them
            workers = [subprocess.Popen(sumbench_command("leaderboard", "worker", "--db", url,
                                                         "--once", "--hold", "0.3"),
                                        env=child_env(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE) for _ in range(3)]
            for worker in workers:
                assert worker.wait(timeout=300) == 0, worker.stderr.read().decode()[-2000:]
            _wait_scored(database, N_SUBMISSIONS)
            board = _board_entries(server.url, N_SUBMISSIONS)
        _scored_exactly_once(database, ids)
        with database.session() as session:
            attempts = [job.attempts for job in session.scalars(select(Job))]
            claimed_by = {job.worker.rsplit(":", 1)[0] for job in session.scalars(select(Job))}
        assert set(attempts) == {1}  # no job was claimed twice
        assert len(claimed_by) >= 2  # the workers shared the queue
        assert len(board["entries"]) == N_SUBMISSIONS
        assert json.loads(json.dumps(board))["version_key"]
        database.dispose()


@pytest.mark.slow
def test_blobs_are_packed_and_unpacked_outside_the_write_lock(tmp_path, gold, fix_lines,
                                                              monkeypatch):
    """Compressing a submission's predictions or material, and reading them back, happens
    while other writers can write: every pack/unpack call finds SQLite's write lock free."""
    from fastapi.testclient import TestClient

    import leaderboard.service.gold as gold_module
    import leaderboard.service.probing as probing
    import leaderboard.service.scoring_jobs as worker
    import leaderboard.service.submissions as submissions
    import leaderboard.service.system_rows as system_rows
    from leaderboard.service.app import create_app
    from leaderboard.service.worker import Worker

    db = str(tmp_path / "lb.sqlite")
    seen: list[tuple[str, bool]] = []

    def watched(name, function):
        def call(value):
            seen.append((name, sqlite_write_lock_is_free(db)))
            return function(value)
        return call

    for module in (submissions, probing, worker, system_rows, gold_module):
        monkeypatch.setattr(module, "pack", watched(f"{module.__name__}.pack", module.pack))
    monkeypatch.setattr(worker, "unpack", watched("worker.unpack", worker.unpack))
    initialise(db, gold=str(gold), settings={"n_resamples": "20"})  # the baseline row
    token = create_token(Database(db), "watcher")
    response = TestClient(create_app(db)).post(
        "/api/v1/submissions", headers={"Authorization": f"Bearer {token}"},
        files=[("files", ("fix.jsonl", fix_lines))], data={"model": "watched"})
    assert response.status_code == 202, response.text
    Worker(Database(db)).drain()
    names = {name for name, _ in seen}
    assert names == {"leaderboard.service.submissions.pack",
                     "leaderboard.service.probing.pack",
                     "leaderboard.service.scoring_jobs.pack",
                     "leaderboard.service.system_rows.pack", "leaderboard.service.gold.pack",
                     "worker.unpack"}, seen
    assert all(free for _, free in seen), seen
