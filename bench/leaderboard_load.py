"""Leaderboard load and scoring cost.

1. Scoring: a USB-test-sized submission (non-neural baseline predictions of all eight tasks on
   a synthetic corpus with as many test articles as USB's `all` split) scored the server's way
   (validate against the manifest, join onto the gold, score) vs `sumbench score` on the same
   files (which carry the gold fields). Arms alternate, repeated; both must give identical
   scores. Goal: server / score <= 1.5.
2. Page latency: a SQLite board with ENTRIES scored and analysed entries (one real entry,
   cloned with jittered headlines and distributions), served by `sumbench leaderboard serve`
   on 127.0.0.1; p50/p95 of GET /track/usb and /api/v1/leaderboard/usb (alternating).
   Goal: p95 < 100 ms.
3. Rebuild: the seconds one rebuild of that board takes (snapshot, ranks, intervals, chart,
   page, documents): min and median of `--repeat` rebuilds, and the median seconds of it that
   its write transactions (ticket, store) held SQLite's write lock, when other writers wait.
4. Keeping up: `--burst` (20) submissions sent at once to `sumbench leaderboard serve
   --workers W` on SQLite (a new instance's defaults); for each, the seconds from its score
   row's commit to the first board document that lists it (polled every 50 ms). Goal: p95
   within 5 s.
5. Upload bombs: three 61 KB `.tgz` archives of 60 MiB of newlines sent at once to `serve`
   (an ordinary participant's token); the server's peak resident memory (sampled every 5 ms)
   over its idle, and the answers and their seconds. Goal: within 100 MiB of idle, 4xx.

    python bench/leaderboard_load.py [--entries 1000] [--requests 200] [--docs 4000]
                                     [--burst 20] [--workers 2] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from harness import add_options, compare_arms, machine, timings  # noqa: E402


def build_corpus(root: Path, docs: int) -> tuple[Path, list[Path]]:
    from benchmark.synthetic import SyntheticSpec, generate_corpus
    from tasks import get_task, task_names
    from tasks.plumbing.io import write_jsonl
    from tasks.usb.derive import build_task_datasets
    from trainers.inference.baselines import baseline_records

    generate_corpus(root / "raw", SyntheticSpec(seed=0, docs=docs))
    build_task_datasets(root / "raw", root / "data", variants=["all"], progress=False)
    files = []
    for name in task_names("usb"):
        task = get_task(name)
        train = task.instances(task.load("train", "all", str(root / "data")))
        test = task.instances(task.load("test", "all", str(root / "data")))
        path = root / "predictions" / f"{name}.jsonl"
        write_jsonl(path, baseline_records(task, test, train_instances=train))
        files.append(path)
    return root / "data", files


def scoring_ratio(data: Path, files: list[Path], repeats: int) -> dict:
    from leaderboard.intake.validate import Limits, Upload, validate_submission
    from leaderboard.tracks.usb import UsbTrack
    from tasks.scoring import score_files

    track = UsbTrack()
    gold = track.load_gold(str(data))
    manifest = track.manifest(gold, "all")

    def server():
        uploads = [Upload(path.name, path.read_bytes()) for path in files]
        checked = validate_submission(track, uploads, manifest, Limits(), "all").checked
        return {name: part.result for name, part in track.score(checked, gold, "all").items()}

    def score():
        return score_files([str(path) for path in files])

    # "ours" is `sumbench score`, the "baseline" the server: the ratio is server / score
    result = compare_arms(score, server, repeat=repeats)
    return {"score": timings(result, "ours"), "server": timings(result, "baseline"),
            "identical": result["identical"], "scoring_ratio": result["ratio"],
            "records": sum(len(path.read_text().splitlines()) for path in files)}


def clone_entries(db: str, entries: int) -> None:
    """Copy the one scored entry ENTRIES-1 times with jittered numbers, then rebuild."""
    from sqlalchemy import select

    from leaderboard.service.db import Database, Material, Score, Submission
    from leaderboard.service.publish import rebuild_board

    database = Database(db)
    rng = np.random.default_rng(0)
    with database.write_session() as session:
        submission = session.scalars(select(Submission).filter_by(kind="submission")).one()
        score = session.scalars(select(Score).filter_by(submission_id=submission.id)).one()
        materials = session.scalars(select(Material).filter_by(score_id=score.id)).all()
        headlines = json.loads(score.headlines)
        for index in range(1, entries):
            shift = float(rng.normal(0, 5))
            copy = Submission(**{c: getattr(submission, c) for c in (
                "user_id", "kind", "track", "board", "card", "status", "parts", "n_records",
                "upload_sha256", "predictions")}, model=f"model {index:04d}")
            session.add(copy)
            session.flush()
            jittered = {part: value + shift for part, value in headlines.items()}
            clone = Score(**{c: getattr(score, c) for c in (
                "version_key", "versions", "results", "breakdown", "current", "analysed",
                "seconds")}, submission_id=copy.id, headlines=json.dumps(jittered))
            session.add(clone)
            session.flush()
            for material in materials:
                values = np.frombuffer(material.distribution, dtype="<f8") + shift
                session.add(Material(score_id=clone.id, part=material.part,
                                     examples=material.examples,
                                     distribution=values.astype("<f8").tobytes()))
    rebuild_board(database, "usb", "all")


def latency(db: str, requests: int) -> dict:
    import httpx

    sys.path.insert(0, str(REPO / "tests"))
    from servers import LeaderboardServer

    urls = {"/track/usb": "/track/usb?variant=all",
            "/api/v1/leaderboard/usb": "/api/v1/leaderboard/usb?variant=all"}
    times = {name: [] for name in urls}
    with LeaderboardServer(db, "--no-worker") as server, httpx.Client() as client:
        for url in urls.values():  # warm up
            client.get(server.url + url).raise_for_status()
        for _ in range(requests):
            for name, url in urls.items():
                started = time.perf_counter()
                client.get(server.url + url).raise_for_status()
                times[name].append(1000 * (time.perf_counter() - started))
    return {name: {"p50_ms": float(np.percentile(values, 50)),
                   "p95_ms": float(np.percentile(values, 95))}
            for name, values in times.items()}


def load_board(data: Path, files: list[Path], root: Path, entries: int) -> str:
    from leaderboard.intake.validate import Upload
    from leaderboard.service.auth import authenticate, create_token
    from leaderboard.service.db import Database
    from leaderboard.service.init import initialise
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    db = str(root / "load.sqlite")
    # an open instance (full test set, no Ladder): every entry has its intervals
    initialise(db, gold=str(data), settings={"n_resamples": "100", "keep_linked": "true",
                                             "private_fraction": "0", "ladder_step": "0"},
               computed_rows=False)
    database = Database(db)
    user = authenticate(database, create_token(database, "bench"))
    accept(database, load_settings(database), user, track_name="usb", board="all",
           model="model 0000", card={}, uploads=[Upload(p.name, p.read_bytes())
                                                  for p in files])
    Worker(database).drain()
    clone_entries(db, entries)
    return db


def rebuild_seconds(db: str, repeat: int) -> dict:
    """Seconds per rebuild, and of those the seconds its write transactions held SQLite's write
    lock (taking the ticket, storing), when other writers wait."""
    from leaderboard.service.db import Database
    from leaderboard.service.publish import rebuild_board

    database, times, locked = Database(db), [], []
    write_session = database.write_session

    @contextlib.contextmanager
    def timed_write_session():
        started = time.perf_counter()
        with write_session() as session:
            yield session
        locked[-1] += time.perf_counter() - started

    database.write_session = timed_write_session
    for _ in range(repeat):
        locked.append(0.0)
        started = time.perf_counter()
        rebuild_board(database, "usb", "all")
        times.append(time.perf_counter() - started)
    return {"min": min(times), "median": float(np.median(times)),
            "write_lock_median": float(np.median(locked))}


def burst_lines(data: Path, count: int) -> list[bytes]:
    """`count` different FAC prediction files over the board's inputs (constant levels)."""
    from leaderboard.tracks.usb import UsbTrack

    track = UsbTrack()
    records = track.load_gold(str(data))["all"]["factuality_classification"]["templates"]
    return [("".join(json.dumps({"task": "factuality_classification", "id": r["id"],
                                 "summ_idx": r["summ_idx"], "summary_sent": r["summary_sent"],
                                 "prediction": [0.5 + 0.4 * ((i * 7 + k) % 5 - 2) / 2]})
                      + "\n" for i, r in enumerate(records))).encode()
            for k in range(count)]


def keep_up(data: Path, root: Path, count: int, workers: int) -> dict:
    """Seconds from each submission's score commit to the first board document listing it."""
    import concurrent.futures
    import datetime as dt

    import httpx
    from sqlalchemy import select

    sys.path.insert(0, str(REPO / "tests"))
    from leaderboard.service.auth import create_token
    from leaderboard.service.db import Database, Score
    from leaderboard.service.init import initialise

    from servers import LeaderboardServer

    db = str(root / "burst.sqlite")
    initialise(db, gold=str(data), settings={"n_resamples": "1000"}, computed_rows=False)
    database = Database(db)
    token = create_token(database, "organiser", admin=True)  # no quota
    files = burst_lines(data, count)
    listed: dict[int, dt.datetime] = {}
    with LeaderboardServer(db, "--workers", str(workers)) as server, httpx.Client() as client:
        def send(index: int) -> int:
            response = client.post(f"{server.url}/api/v1/submissions",
                                   headers={"Authorization": f"Bearer {token}"},
                                   files=[("files", ("fac.jsonl", files[index]))],
                                   data={"model": f"burst {index}"}, timeout=300)
            if response.status_code != 202 and response.status_code >= 400:
                raise SystemExit(f"submission {index}: {response.status_code} {response.text}")
            return response.json()["id"]

        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            ids = list(pool.map(send, range(count)))
        deadline = time.monotonic() + 600
        while len(listed) < count and time.monotonic() < deadline:
            document = client.get(f"{server.url}/api/v1/leaderboard/usb").json()
            now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
            for entry in document["entries"]:
                listed.setdefault(entry["id"], now)
            time.sleep(0.05)
    with database.session() as session:
        scored = dict(session.execute(select(Score.submission_id, Score.created_at)).all())
    delays = [(listed[i] - scored[i]).total_seconds() for i in ids if i in listed]
    return {"submissions": count, "workers": workers, "listed": len(delays),
            "p50_s": float(np.percentile(delays, 50)), "p95_s": float(np.percentile(delays, 95)),
            "max_s": float(max(delays))}


def upload_bombs(data: Path, root: Path, count: int = 3) -> dict:
    """Peak RSS of the server over its idle while `count` newline archives arrive at once."""
    import concurrent.futures
    import threading

    import httpx
    import psutil

    sys.path.insert(0, str(REPO / "tests"))
    from leaderboard.service.auth import create_token
    from leaderboard.service.db import Database
    from leaderboard.service.init import initialise

    from lb_helpers import newline_archive
    from servers import LeaderboardServer

    db = str(root / "bombs.sqlite")
    initialise(db, gold=str(data), computed_rows=False)
    token = create_token(Database(db), "mallory")
    bomb = newline_archive(60 << 20)
    with LeaderboardServer(db, "--no-worker") as server, httpx.Client(timeout=300) as client:
        process = psutil.Process(server.process.pid)
        client.get(f"{server.url}/api/v1/manifest/usb").raise_for_status()  # warmed up
        idle, peak, done = process.memory_info().rss, 0, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, process.memory_info().rss)
                time.sleep(0.005)

        def send(index: int) -> tuple[int, float]:
            started = time.perf_counter()
            response = client.post(f"{server.url}/api/v1/submissions",
                                   headers={"Authorization": f"Bearer {token}"},
                                   files=[("files", (f"bomb{index}.tgz", bomb))],
                                   data={"model": f"bomb {index}"})
            return response.status_code, time.perf_counter() - started

        sampler = threading.Thread(target=sample)
        sampler.start()
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            answers = list(pool.map(send, range(count)))
        done.set()
        sampler.join()
    return {"uploads": count, "archive_bytes": len(bomb), "unpacked_bytes": 60 << 20,
            "statuses": [status for status, _ in answers],
            "max_s": round(max(seconds for _, seconds in answers), 3),
            "idle_rss_mib": round(idle / 2**20, 1),
            "peak_over_idle_mib": round((peak - idle) / 2**20, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--docs", type=int, default=4000,
                        help="synthetic documents (20%% are test: 4000 gives USB's ~800)")
    parser.add_argument("--burst", type=int, default=20,
                        help="submissions sent at once for the keeping-up measure")
    parser.add_argument("--workers", type=int, default=2,
                        help="`serve --workers` for the keeping-up measure")
    add_options(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, files = build_corpus(root, args.docs)
        scoring = scoring_ratio(data, files, args.repeat)
        db = load_board(data, files, root, args.entries)
        pages = latency(db, args.requests)
        rebuild = rebuild_seconds(db, args.repeat)
        burst = keep_up(data, root, args.burst, args.workers)
        bombs = upload_bombs(data, root)
    result = {"benchmark": "leaderboard_load", "entries": args.entries,
              "requests": args.requests, **scoring,
              "latency": pages, "rebuild_s": rebuild, "keep_up": burst, "bombs": bombs,
              "ratio": scoring["scoring_ratio"], "machine": machine()}
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"scoring {scoring['records']} records (median, min): sumbench score "
              f"{scoring['score']['median']:.2f} s, {scoring['score']['min']:.2f} s; server "
              f"{scoring['server']['median']:.2f} s, {scoring['server']['min']:.2f} s; ratio "
              f"{scoring['scoring_ratio']:.2f} (identical: {scoring['identical']})")
        for name, values in pages.items():
            print(f"GET {name} with {args.entries} entries: p50 {values['p50_ms']:.1f} ms, "
                  f"p95 {values['p95_ms']:.1f} ms")
        print(f"rebuild of the board with {args.entries} entries (median, min): "
              f"{rebuild['median']:.2f} s, {rebuild['min']:.2f} s, of which the write lock "
              f"was held {rebuild['write_lock_median']:.3f} s (median)")
        print(f"{burst['submissions']} submissions at once, {burst['workers']} workers: scored to "
              f"listed p50 {burst['p50_s']:.2f} s, p95 {burst['p95_s']:.2f} s, max "
              f"{burst['max_s']:.2f} s ({burst['listed']} listed)")
        print(f"{bombs['uploads']} archives of {bombs['archive_bytes']} bytes unpacking to "
              f"{bombs['unpacked_bytes']} at once: answers {bombs['statuses']} within "
              f"{bombs['max_s']:.2f} s, peak RSS {bombs['peak_over_idle_mib']:.1f} MiB over "
              f"idle ({bombs['idle_rss_mib']:.1f} MiB)")
        print(f"machine: {result['machine']['cpu']}, {result['machine']['cpus']} CPUs")
    return 0 if scoring["identical"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
