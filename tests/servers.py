"""Real servers for tests: a throwaway PostgreSQL cluster and `sumbench leaderboard serve`
subprocesses, each on a free 127.0.0.1 port and always stopped."""
from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_user() -> list[str]:
    """initdb and postgres refuse to run as root: run them as an unprivileged user."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
    pytest.skip("running as root and no unprivileged user to run PostgreSQL as")


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1; yields a SQLAlchemy URL of its database."""
    binaries = postgres_bin()
    if binaries is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    prefix = _as_user()
    root = Path(tempfile.mkdtemp(prefix="sumbench-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if prefix:
        user = prefix[2]
        subprocess.run(["chown", "-R", user, str(root)], check=True)
    else:
        user = pwd.getpwuid(os.geteuid()).pw_name
    port = free_port()
    run = dict(check=True, capture_output=True, text=True, timeout=120)
    try:
        subprocess.run([*prefix, str(binaries / "initdb"), "-D", str(data), "-U", user,
                        "--auth=trust", "-E", "UTF8", "--locale=C"], **run)
        subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-w", "-l",
                        str(root / "log"), "-o", f"-p {port} -k {sockets} -h 127.0.0.1 "
                        f"-c max_connections=100 -c fsync=off", "start"], **run)
        yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the PostgreSQL server of `server_url` (a SQLAlchemy URL of
    its maintenance database) for one test; yields its URL and drops it afterwards."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def sumbench_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmark", *args]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


class LeaderboardServer:
    """`sumbench leaderboard serve` in a subprocess; `url` once it answers."""

    def __init__(self, db: str, *extra: str):
        self.db, self.extra, self.port = db, extra, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = ""  # what the server wrote on stderr, once stopped

    def start(self) -> LeaderboardServer:
        import httpx

        self._log_file = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            sumbench_command("leaderboard", "serve", "--db", self.db, "--port",
                             str(self.port), *self.extra),
            env=child_env(), stdout=subprocess.DEVNULL, stderr=self._log_file)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._log_file.seek(0)
                raise RuntimeError("leaderboard server died: " +
                                   self._log_file.read().decode()[-2000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("leaderboard server did not answer within 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and not self._log_file.closed:
            self._log_file.seek(0)
            self.log = self._log_file.read().decode("utf-8", errors="replace")
            self._log_file.close()

    def __enter__(self) -> LeaderboardServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: bytes,
              headers: dict | None = None) -> None:
    """Answer a request with `payload` (JSON bytes unless a header says otherwise); a client
    that went away meanwhile is ignored."""
    try:
        handler.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) answering with `handler`; `url` is
    its /v1 address. Subclasses build their handler and call `start`."""

    def start(self, handler: type) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ChatServer(LocalServer):
    """Canned chat completions; every request body is recorded."""

    def __init__(self, answer):
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body})
                send_json(self, 200, json.dumps({"choices": [{"message": {
                    "role": "assistant", "content": answer(body["messages"])}}]}).encode())

            def log_message(self, *args):
                pass

        self.start(Handler)


class OpenAIServer(LocalServer):
    """An OpenAI-compatible server (as `vllm serve` speaks it) on 127.0.0.1:
    /v1/chat/completions and /v1/completions. `answer(prompt_text) -> (reply, p_yes)`: the
    reply is cut into tokens at spaces (" Yes" is one token); when the request asks for
    log-probabilities, every token comes with alternatives, and a yes/no token's are yes
    (p_yes) and no (1 - p_yes). `faults` holds (status, body, headers) answers sent first;
    `delay` seconds per request; `max_in_flight` counts requests served at once."""

    def __init__(self, answer, delay: float = 0.0):
        import math
        import re
        import time

        self.requests: list[dict] = []
        self.faults: list[tuple[int, bytes, dict]] = []
        self.in_flight = self.max_in_flight = 0
        lock, server = threading.Lock(), self

        def logprobs(reply: str, p_yes: float, chat: bool, top: int):
            tokens = re.findall(r"\s*\S+", reply)
            rows = []
            for token in tokens:
                word = token.strip().lower()
                if word in ("yes", "no"):
                    space = token[:len(token) - len(token.lstrip())]
                    alternatives = {space + "Yes": math.log(p_yes), space + "No":
                                    math.log(1 - p_yes)}
                else:
                    alternatives = {token: 0.0}
                rows.append((token, alternatives[token] if token in alternatives else 0.0,
                             dict(list(alternatives.items())[:top])))
            if chat:
                return {"content": [{"token": t, "logprob": lp, "top_logprobs": [
                    {"token": k, "logprob": v} for k, v in alts.items()]} for t, lp, alts in rows]}
            return {"tokens": [t for t, _, _ in rows], "token_logprobs": [lp for _, lp, _ in rows],
                    "top_logprobs": [alts for _, _, alts in rows]}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    server.requests.append({"path": self.path, "body": body})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    fault = server.faults.pop(0) if server.faults else None
                try:
                    time.sleep(delay)
                    self._answer(body, fault)
                finally:
                    with lock:
                        server.in_flight -= 1

            def _answer(self, body, fault):
                status, headers = 200, {}
                chat = self.path.endswith("/chat/completions")
                if fault is not None:
                    status, payload, headers = fault
                else:
                    prompt = body["messages"][-1]["content"] if chat else body["prompt"]
                    reply, p_yes = answer(prompt)
                    top = (body.get("top_logprobs") if chat else body.get("logprobs")) or 0
                    choice = {"message": {"role": "assistant", "content": reply}} if chat \
                        else {"text": reply}
                    if body.get("logprobs"):
                        choice["logprobs"] = logprobs(reply, p_yes, chat, max(1, int(top)))
                    payload = json.dumps({"choices": [choice]}).encode()
                send_json(self, status, payload, headers)

            def log_message(self, *args):
                pass

        self.start(Handler)
