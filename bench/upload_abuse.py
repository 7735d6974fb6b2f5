"""What hostile uploads cost a running leaderboard server: peak memory over idle and seconds to
its refusal, each attack alone and three at once.

A benchmark, not a test. It builds a board from the shared fixture, starts `sumbench
leaderboard serve` on 127.0.0.1, and posts (every request bounded in time):

  bzip2.zip      a zip member whose headers declare 10 bytes and whose bzip2 stream holds
                 256 MiB of newlines (about 1 KB)
  deflate.zip    the same with deflate (256 MiB of newlines: about 250 KB)
  lists.jsonl    60 lines of 1 MB, each `{"prediction": [[], [], ...]}` (333,000 lists)
  lists.zip      the same lines, zipped, padded to stay under the 100x ratio
  records.jsonl  500,000 FAC records of the right shape (the instance's record limit)

then each three at a time. The server's resident memory (with its children) is polled every
10 ms; seconds are the client's, from the request's start to its answer (the upload's
transfer included). Goals (docs/leaderboard.md): every attack refused (4xx), in under 1 s,
with peak RSS within 150 MiB of idle; the 500,000 records answered within the same memory
line (their seconds are reported apart).

    python3 bench/upload_abuse.py [--json]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))
from harness import machine  # noqa: E402
from lb_helpers import lying_zip, nested_lists_line  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
MIB = 1 << 20
GOAL_MIB, GOAL_SECONDS = 150, 1.0
#: legal in shape, large: held to the memory line, not to the attacks' second
LARGE = "records.jsonl"


def padded_zip(content: bytes) -> bytes:
    """`content` deflated, with a stored member of random bytes so the archive stays under
    the 100x unpacking ratio."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("lists.jsonl", content)
        archive.writestr("pad.bin", os.urandom(len(content) // 90),
                         compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def fac_records(count: int) -> bytes:
    return b"".join(b'{"task": "FAC", "id": "doc%d", "summ_idx": 0, "prediction": [0.5]}\n'
                    % index for index in range(count))


def attacks() -> dict[str, tuple[str, bytes]]:
    declared = b'{"a": 1}\n\n'
    return {"bzip2.zip": ("bzip2.zip", lying_zip(zipfile.ZIP_BZIP2, b"\n" * (256 * MIB),
                                                  declared)),
            "deflate.zip": ("deflate.zip", lying_zip(zipfile.ZIP_DEFLATED,
                                                      declared + b"\n" * (256 * MIB), declared)),
            "lists.jsonl": ("lists.jsonl", nested_lists_line(MIB) * 60),
            "lists.zip": ("lists.zip", padded_zip(nested_lists_line(MIB) * 60)),
            "records.jsonl": ("records.jsonl", fac_records(500_000))}


class RssPoller:
    """Peak resident memory of a process and its children, polled every 10 ms."""

    def __init__(self, pid: int):
        import psutil

        self.process, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def rss(self) -> int:
        processes = [self.process, *self.process.children(recursive=True)]
        return sum(p.memory_info().rss for p in processes if p.is_running())

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.01)

    def __enter__(self):
        self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def post(url: str, token: str, name: str, data: bytes) -> tuple[int, float]:
    import httpx

    started = time.perf_counter()
    answer = httpx.post(url + "/api/v1/submissions", headers={"Authorization": f"Bearer {token}"},
                        data={"model": f"abuse {name}"}, files=[("files", (name, data))],
                        timeout=120)
    return answer.status_code, time.perf_counter() - started


def measure(server, token: str, batch: list[tuple[str, bytes]]) -> dict:
    idle = RssPoller(server.process.pid).rss()
    with RssPoller(server.process.pid) as poller, ThreadPoolExecutor(len(batch)) as pool:
        answers = list(pool.map(lambda item: post(server.url, token, *item), batch))
    return {"over_idle_mib": round((poller.peak - idle) / MIB, 1),
            "statuses": [status for status, _ in answers],
            "seconds": [round(seconds, 3) for _, seconds in answers]}


def run() -> dict:
    from leaderboard.service.auth import create_token
    from leaderboard.service.db import Database

    from lb_helpers import make_database
    from servers import LeaderboardServer

    uploads = attacks()
    with tempfile.TemporaryDirectory() as scratch:
        url = make_database(Path(scratch) / "abuse.sqlite",
                            SHARED / "fixtures" / "usb" / "task_datasets", computed_rows=False)
        token = create_token(Database(url), "mallory")
        with LeaderboardServer(url.removeprefix("sqlite:///"), "--no-worker") as server:
            idle = RssPoller(server.process.pid).rss()
            alone = {name: measure(server, token, [upload]) for name, upload in uploads.items()}
            names = list(uploads)
            together = {"+".join(names[i:i + 3]): measure(server, token,
                                                          [uploads[n] for n in names[i:i + 3]])
                        for i in range(0, len(names), 3)}
    rows = [*alone.values(), *together.values()]
    attack_seconds = [seconds for name, row in alone.items() if name != LARGE
                      for seconds in row["seconds"]] + [
        seconds for names, row in together.items()
        for name, seconds in zip(names.split("+"), row["seconds"]) if name != LARGE]
    return {"benchmark": "upload_abuse", "idle_mib": round(idle / MIB, 1), "alone": alone,
            "three_at_once": together, "sizes": {n: len(d) for n, (_, d) in uploads.items()},
            "refused": all(400 <= s < 500 for row in rows for s in row["statuses"]),
            "max_over_idle_mib": max(row["over_idle_mib"] for row in rows),
            "max_seconds": max(attack_seconds),  # the attacks'; the large legal upload's apart
            "large_seconds": max(alone[LARGE]["seconds"]),
            "goals": {"over_idle_mib": GOAL_MIB, "seconds": GOAL_SECONDS},
            "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    result = run() if not parser.parse_args().json else None
    if result is None:
        print(json.dumps(run(), sort_keys=True))
        return
    for label, rows in (("alone", result["alone"]), ("three at once", result["three_at_once"])):
        for name, row in rows.items():
            print(f"{label:14} {name:40} +{row['over_idle_mib']:7.1f} MiB  "
                  f"{', '.join(f'{s:.2f} s' for s in row['seconds'])}  {row['statuses']}")
    print(f"idle {result['idle_mib']} MiB; worst +{result['max_over_idle_mib']} MiB "
          f"(goal {GOAL_MIB}); slowest attack {result['max_seconds']:.2f} s (goal "
          f"{GOAL_SECONDS}); {LARGE} answered in {result['large_seconds']:.2f} s; "
          f"{'all refused' if result['refused'] else 'NOT ALL REFUSED'}")


if __name__ == "__main__":
    main()
