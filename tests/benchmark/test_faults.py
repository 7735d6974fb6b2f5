"""Faults: a closed output pipe, a full disk, Ctrl-C and SIGTERM, a chat server that fails or
says to retry later, a truncated checkpoint, a damaged download cache: each one line, its exit
code, and nothing partial left behind."""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from servers import free_port

PRED = "factuality_classification.jsonl"
REPO = Path(__file__).resolve().parents[2]


def _sumbench_process(*args, limit_bytes: int | None = None, env: dict | None = None):
    def limits():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.Popen([sys.executable, "-m", "benchmark", *map(str, args)], cwd=REPO,
                            preexec_fn=limits, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv", [["tasks"], ["score", "{pred}"]])
@pytest.mark.slow
def test_a_closed_output_pipe_stops_quietly(usb_fixture_dir, argv):
    """`sumbench tasks | head -1`: the reader is gone before the output is written."""
    pred = str(usb_fixture_dir / "predictions" / PRED)
    read, write = os.pipe()
    os.close(read)  # no reader: every write to the pipe fails (EPIPE)
    try:
        process = subprocess.run([sys.executable, "-m", "benchmark",
                                  *[part.format(pred=pred) for part in argv]], cwd=REPO,
                                 stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert process.returncode == 141 and process.stderr == ""


@pytest.mark.slow
def test_another_broken_pipe_is_reported_not_taken_for_a_closed_stdout():
    code = ("import sys, benchmark.cli as cli, benchmark.commands.tasks as tasks\n"
            "def broken(args):\n"
            "    raise BrokenPipeError(32, 'Broken pipe')  # e.g. a chat server's socket\n"
            "tasks.run = broken\n"
            "sys.exit(cli.main(['tasks']))\n")
    process = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                             text=True, timeout=300)
    assert (process.returncode, process.stderr) == (1, "sumbench tasks: error: Broken pipe\n")


@pytest.mark.slow
def test_disk_full_is_one_line_and_leaves_no_output(usb_fixture_dir, tmp_path):
    process = _sumbench_process("data", "build", "--raw", usb_fixture_dir / "raw", "--out",
                                tmp_path / "out", limit_bytes=4000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    # the output folder is named (a full disk names no file), never the staging folder
    assert err.strip() == ("sumbench data: error: File too large (the disk or the file-size "
                           f"limit is full): {tmp_path / 'out'}")
    assert list(tmp_path.iterdir()) == []
    process = _sumbench_process("baseline", "--data", usb_fixture_dir / "task_datasets",
                                "--tasks", "all", "--out", tmp_path / "base", limit_bytes=4000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1 and err.strip() == (
        "sumbench baseline: error: File too large (the disk or the file-size limit is full): "
        f"{tmp_path / 'base' / 'predictions' / 'abstractive_summarization.jsonl'}")
    assert list(tmp_path.iterdir()) == []


class _TcpServer:
    """A raw TCP server on 127.0.0.1 (a free port) handing each connection to `handle`."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.handle(connection)

    def handle(self, connection):
        raise NotImplementedError


class _SilentServer(_TcpServer):
    """Accepts connections and never answers (a hung endpoint)."""

    def __init__(self):
        self.accepted, self.connections = threading.Event(), []
        super().__init__()

    def handle(self, connection):
        self.connections.append(connection)
        self.accepted.set()

    def close(self):
        for connection in self.connections:
            connection.close()
        self.socket.close()


@pytest.mark.parametrize("signum, code, how", [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "terminated (SIGTERM)"),  # Slurm's time limit, `timeout`
])
@pytest.mark.slow
def test_sigint_and_sigterm_are_one_line_and_their_exit_code(pyramid_data_dir, tmp_path,
                                                             signum, code, how):
    server, process = _SilentServer(), None
    try:
        process = _sumbench_process(
            "pyramid", "--pyramid", pyramid_data_dir / "pyrxsum", "--units", "scus", "--presence",
            "chat", "--model", "m", "--cache", tmp_path / "cache.sqlite", "--out",
            tmp_path / "scores.json",
            env={"OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
                 "OPENAI_API_KEY": "test"})
        assert server.accepted.wait(120), process.communicate()[1]
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        server.close()
        if process is not None and process.poll() is None:  # a failed test leaves none behind
            process.kill()
            process.wait()
    assert process.returncode == code
    assert err.strip().splitlines()[-1] == (
        f"sumbench pyramid: {how}; finished work is kept, run the same command again "
        "(with --resume where it has one) to continue")
    assert "Traceback" not in err and not (tmp_path / "scores.json").exists()


# ---------------------------------------------------------------- chat endpoint faults
def _raw_reply(kind: str) -> bytes:
    body = json.dumps({"choices": [{"message": {"content": "Yes"}}]}).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    return {
        "non-utf8": head + b"Content-Length: 6\r\n\r\n\xff\xfe\xfd{}\n",
        "truncated": head + b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body,
        "bad-status-line": b"HTTP/1.1 OOPS\r\n\r\n",
        "reset": b"",
        "html-page": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 34\r\n"
                     b"\r\n<html><body>Bad gateway</body></html>"[:120],
        "no-reply-text": head + b'Content-Length: 13\r\n\r\n{"choices":[]',
    }[kind]


def read_request(connection) -> bytes:
    """The whole HTTP request: headers, then Content-Length bytes of body. Closing a socket
    with request bytes still unread makes the kernel send a reset instead of the reply, so the
    client would see "connection reset" where the test wants the reply's own fault."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class _RawServer(_TcpServer):
    """Answers every request with the same raw bytes (or resets the connection)."""

    def __init__(self, reply: bytes):
        self.reply, self.requests = reply, 0
        super().__init__()

    def handle(self, connection):
        with connection:
            read_request(connection)
            self.requests += 1
            if not self.reply:  # reset: close with SO_LINGER 0
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            connection.sendall(self.reply)


@pytest.mark.parametrize("kind, reason", [
    ("non-utf8", "response body is not UTF-8"),
    ("truncated", "IncompleteRead"),
    ("bad-status-line", "BadStatusLine"),
    ("reset", "Connection"),
    ("html-page", "response body is an HTML page"),
    ("no-reply-text", "response body is not JSON"),
])
def test_chat_faults_are_retried_then_fail_with_a_reason(tmp_path, kind, reason):
    from trainers.fewshot.chat_client import ChatClient, ChatError

    server = _RawServer(_raw_reply(kind))
    waits = []
    client = ChatClient(model="m", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k",
                        max_attempts=3, timeout_s=10, sleep=waits.append,
                        cache=tmp_path / "cache.sqlite")
    with pytest.raises(ChatError) as caught:
        client.complete([{"role": "user", "content": "hi"}])
    assert "failed after 3 attempts" in str(caught.value) and reason in str(caught.value)
    assert server.requests == 3 and waits == [1.0, 2.0]
    assert len(client.cache) == 0  # nothing cached


def test_retry_after_is_capped_and_logged(tmp_path):
    from trainers.fewshot.chat_client import ChatClient, ChatError

    server = _RawServer(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\n"
                        b"Content-Length: 0\r\n\r\n")
    waits, logged = [], []
    client = ChatClient(model="m", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k",
                        max_attempts=2, sleep=waits.append, log=logged.append,
                        max_retry_after_s=5)
    with pytest.raises(ChatError, match="HTTP 429"):
        client.complete([{"role": "user", "content": "hi"}])
    assert waits == [5]
    assert logged == [f"http://127.0.0.1:{server.port}/v1/chat/completions asked to retry "
                      "after 3600 s; waiting 5 s (capped by max_retry_after_s=5)"]


# ---------------------------------------------------------------- checkpoints, fetch cache
def test_a_truncated_checkpoint_names_its_file(tmp_path):
    import torch

    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.checkpoints import _torch_file

    path = tmp_path / "step-4" / "optimizer.pt"
    path.parent.mkdir()
    torch.save({"state": {}, "param_groups": []}, path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(SumbenchError, match=f"{path}: checkpoint file is missing, truncated "
                       f"or damaged .*; delete {path.parent} to resume"):
        _torch_file(path, "cpu")


@pytest.mark.slow
def test_a_damaged_fetch_cache_is_extracted_again(data_dir, tmp_path):
    from tasks.usb.archive import fetch_archive
    from tests.tasks.test_loaders import LocalHub, make_archive

    hub = LocalHub(make_archive(tmp_path / "a.tar.gz", data_dir))
    first = fetch_archive(cache_dir=tmp_path / "cache", downloader=hub)
    victim = first.data_dir / "all" / "evidence_extraction" / "test.jsonl"
    expected = victim.read_bytes()
    victim.write_bytes(expected[:10])  # truncated by a full disk, say
    again = fetch_archive(cache_dir=tmp_path / "cache", downloader=hub)
    assert again.status == "repaired" and victim.read_bytes() == expected
    assert fetch_archive(cache_dir=tmp_path / "cache", downloader=hub).status == "cached"
    assert len(hub.calls) == 2
