"""`sumbench leaderboard serve` and `worker`: the web app and the processes that do the work
(evaluating submitted models, scoring, analysing), and the database every hosting command
opens (their options are declared in benchmark.commands.leaderboard)."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from benchmark.commands.leaderboard import JOB_KINDS
from benchmark.commands.options import given_or_default
from leaderboard.service.app import create_app
from leaderboard.service.db import Database, database_url
from leaderboard.service.evaluation import EvaluateOptions
from leaderboard.service.evaluation_process import die_with_parent
from leaderboard.service.schema import check_schema
from leaderboard.service.worker import Worker
from tasks.plumbing.errors import SumbenchError


def _database(db: str, check: bool = True):
    """The leaderboard database `--db` names; with `check`, it must exist (a mistyped SQLite
    name is refused, never created empty) and be at the code's schema revision."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url(db))
    if check and url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not Path(url.database).is_file():
        raise SumbenchError(f"no leaderboard database at {url.database}; create one with "
                            f"'sumbench leaderboard init --db {db}'")
    database = Database(db)
    if check:
        check_schema(database)
    return database


def evaluate_options(args):
    root = args.model_root
    if root is not None and not Path(root).is_dir():
        raise SumbenchError(f"--model-root {root}: no such folder")
    return EvaluateOptions(str(Path(root).resolve()) if root else None,
                           given_or_default(args, "device"))


def _log_jobs() -> None:
    """Worker job lines (ids and kinds only, never data) on stderr."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    logger = logging.getLogger("sumbench.leaderboard")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def shown_host(host: str) -> str:
    return f"[{host}]" if ":" in host else (host or "0.0.0.0")


def check_address(host: str, port: int) -> None:
    """Bind (host, port) as uvicorn will (asyncio's `create_server`: every address of the
    host), then let it go: a port in use or a host not of this machine is an OSError naming
    the address before the worker or the server starts."""
    import asyncio
    import os
    import socket

    async def probe() -> None:
        server = await asyncio.get_running_loop().create_server(asyncio.Protocol, host, port)
        server.close()
        await server.wait_closed()

    try:
        asyncio.run(probe())
    except OSError as error:
        reason = error.strerror if isinstance(error, socket.gaierror) or not error.errno \
            else os.strerror(error.errno)
        raise OSError(error.errno, f"cannot listen on {shown_host(host)}:{port} ({reason})") \
            from None


def run_serve(args) -> int:
    import signal

    import uvicorn

    database = _database(args.db)
    options = evaluate_options(args)
    check_address(args.host, args.port)
    app = create_app(args.db, options.model_root)
    _log_jobs()
    stop = threading.Event()
    threads, processes = [], []
    # SIGTERM stops the server as Ctrl-C does: uvicorn shuts down, then raises the signal
    # again, and this handler turns it into an exit that stops the workers first
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        if not args.no_worker:
            threads, processes = start_workers(args, database, options, stop)
        print(f"sumbench leaderboard: serving http://{shown_host(args.host)}:{args.port} "
              f"(Ctrl-C stops)", file=sys.stderr, flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    except SystemExit as exiting:  # uvicorn's exit when the server did not start, or SIGTERM
        if exiting.code not in (0, None):
            raise OSError(None, f"the server could not start on {shown_host(args.host)}:"
                                f"{args.port} (its log above says why)") from None
    finally:
        stop.set()
        stop_processes(processes)
        for thread in threads:
            thread.join(timeout=30)
    return 0


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(0)


#: the jobs of the server's scoring workers: evaluations always have a worker of their own,
#: so a predictions file is scored while any number of models are evaluated
SCORING_KINDS = tuple(kind for kind in JOB_KINDS if kind != "evaluate")


def start_workers(args, database, options, stop: threading.Event) -> tuple[list, list]:
    """The server's workers: `--workers` for scoring and analysis (1: a thread of the server's
    process; more: processes of their own, which stop when the server does), and unless
    `--no-evaluate` one for evaluations, a thread (the model runs in a process it watches)."""
    threads, processes = [], []
    plan = [] if args.no_evaluate else [("evaluate",)]
    workers = args.workers or 1
    if workers == 1:
        plan.append(SCORING_KINDS)
    else:
        processes = [worker_process(args.db, SCORING_KINDS, options) for _ in range(workers)]
    for kinds in plan:
        worker = Worker(database, kinds=kinds, evaluate=options)
        threads.append(threading.Thread(target=worker.run, args=(stop,), daemon=True,
                                        name=f"worker-{'-'.join(kinds)}"))
        threads[-1].start()
    return threads, processes


def worker_process(db: str, kinds: tuple[str, ...], options):
    """A `sumbench leaderboard worker` in a process of its own (its log on this stderr) that
    stops when this process does, however it ends: Linux signals it when its parent dies,
    and it watches its parent's id everywhere else."""
    import os
    import subprocess

    command = [sys.executable, "-m", "benchmark", "leaderboard", "worker", "--db", db,
               "--kinds", ",".join(kinds), "--device", options.device,
               "--server-pid", str(os.getpid())]
    if options.model_root:
        command += ["--model-root", options.model_root]
    return subprocess.Popen(command, preexec_fn=_terminate_with_parent)


def _terminate_with_parent() -> None:
    import signal

    die_with_parent(signal.SIGTERM)


def stop_processes(processes) -> None:
    """SIGTERM each worker process (a job it is on is taken over after its lease), then wait."""
    import subprocess

    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def watch_server(server_pid: int, poll_seconds: float = 1.0) -> None:
    """A worker the server started ends when the server has: its parent's id changes when
    its parent dies (where no signal from the kernel came first)."""
    import os
    import signal

    def watch() -> None:
        while os.getppid() == server_pid:
            time.sleep(poll_seconds)
        print("sumbench leaderboard worker: the server that started it is gone; stopping",
              file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != server_pid:  # the server died before this process ran
        raise SumbenchError(f"the server (process {server_pid}) that started this worker "
                            f"is gone")
    threading.Thread(target=watch, daemon=True, name="watch-server").start()


def run_worker(args) -> int:
    if args.server_pid is not None:
        watch_server(args.server_pid)
    worker = Worker(_database(args.db), lease_seconds=args.lease, hold=args.hold,
                    kinds=args.kinds, evaluate=evaluate_options(args))
    _log_jobs()
    if args.once:
        print(f"{worker.drain()} job(s) done", file=sys.stderr)
        return 0
    stop = threading.Event()
    try:
        worker.run(stop)
    except KeyboardInterrupt:
        stop.set()
    return 0


