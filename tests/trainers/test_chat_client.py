"""The chat client and chat presence backend against a real HTTP server on 127.0.0.1."""
from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from leaderboard.evaluators.pyramid.presence import ChatBackend, PresenceBackendError, parse_yes_no
from trainers.fewshot.chat_client import ChatClient, ChatError
from trainers.models.disk_cache import DiskCache, cache_key

from servers import LocalServer, send_json


class FakeServer(LocalServer):
    """Answers POST /v1/chat/completions; `script` holds (status, reply, headers, delay)
    answers used first, then `default(body)` gives the reply text."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[tuple] = []
        self.default = lambda body: "Yes"
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body,
                                        "auth": self.headers.get("Authorization")})
                status, reply, headers, delay = (server.script.pop(0) if server.script
                                                 else (200, server.default(body), {}, 0))
                time.sleep(delay)
                payload = json.dumps({"choices": [{"message": {"role": "assistant",
                                                               "content": reply}}]}
                                     if status == 200 else {"error": reply}).encode()
                send_json(self, status, payload, headers)

            def log_message(self, *args):
                pass

        self.start(Handler)


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def _client(server, tmp_path, **options):
    sleeps: list[float] = []
    client = ChatClient(model="tiny-chat", base_url=server.url, api_key="sk-test",
                        cache=tmp_path / "chat.sqlite", sleep=sleeps.append, **options)
    return client, sleeps


def test_request_body_auth_header_and_cache(server, tmp_path):
    client, _ = _client(server, tmp_path)
    messages = [{"role": "user", "content": "Is it there?"}]
    assert client.complete(messages, temperature=0) == "Yes"
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"] == {"model": "tiny-chat", "messages": messages, "temperature": 0}
    again, _ = _client(server, tmp_path)  # a new client on the same cache file
    assert again.complete(messages, temperature=0) == "Yes"
    assert len(server.requests) == 1 and again.requests_made == 0
    again.complete(messages, temperature=0.5)  # other parameters: a new request
    assert len(server.requests) == 2


def test_environment_configuration(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    client = ChatClient(model="m")
    assert client.url == server.url + "/chat/completions"
    client.complete([{"role": "user", "content": "hi"}])
    assert server.requests[0]["auth"] == "Bearer sk-env"


def test_retry_on_500_then_success(server, tmp_path):
    server.script = [(500, "boom", {}, 0)]
    client, sleeps = _client(server, tmp_path, backoff_s=0.25)
    assert client.complete([{"role": "user", "content": "x"}]) == "Yes"
    assert len(server.requests) == 2 and sleeps == [0.25]


def test_retry_after_header_and_backoff_growth(server, tmp_path):
    server.script = [(429, "slow down", {"Retry-After": "2"}, 0), (502, "bad", {}, 0),
                     (503, "busy", {}, 0)]
    client, sleeps = _client(server, tmp_path, backoff_s=0.5)
    assert client.complete([{"role": "user", "content": "x"}]) == "Yes"
    assert sleeps == [2.0, 1.0, 2.0]


def test_clear_error_after_repeated_failures(server, tmp_path):
    server.script = [(500, "down", {}, 0)] * 3
    client, sleeps = _client(server, tmp_path, max_attempts=3)
    with pytest.raises(ChatError, match=r"failed after 3 attempts.*HTTP 500"):
        client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert len(DiskCache(tmp_path / "chat.sqlite")) == 0  # failures are not cached


def test_client_error_is_not_retried_and_timeout_is(server, tmp_path):
    server.script = [(400, "bad request", {}, 0)]
    client, sleeps = _client(server, tmp_path)
    with pytest.raises(ChatError, match="HTTP 400: .*bad request"):
        client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1 and sleeps == []
    server.script = [(200, "late", {}, 0.6)]
    client, sleeps = _client(server, tmp_path, timeout_s=0.2, max_attempts=2)
    assert client.complete([{"role": "user", "content": "y"}]) == "Yes"
    assert len(sleeps) == 1


def test_parse_yes_no():
    assert parse_yes_no("[YES]") == 1 and parse_yes_no("No, it is not.") == 0
    assert parse_yes_no("  yes.") == 1 and parse_yes_no("Not sure") is None
    assert parse_yes_no("") is None


def test_chat_backend_labels_and_cache(server, tmp_path):
    def reply(body):
        unit = body["messages"][0]["content"].rsplit("UNIT: ", 1)[1].split("\n")[0]
        return {"Thieves took jewels.": "[YES]", "The team lost.": "No."}.get(unit, "Maybe")

    server.default = reply
    pairs = [("Police said thieves took jewels.", "Thieves took jewels.", "a"),
             ("The team won.", "The team lost.", "b"), ("Text.", "Other.", "c")]
    pool = [{"example_id": "a", "summary": "S1", "unit": "U1", "label": 1},
            {"example_id": "z", "summary": "S2", "unit": "U2", "label": 0}]
    client, _ = _client(server, tmp_path)
    backend = ChatBackend(client, pool=pool, shots=1, seed=0)
    with pytest.raises(PresenceBackendError, match="1 of 3 pairs got no usable answer "
                       r"\(first: pair 3: unparseable reply 'Maybe'\)"):
        backend.score(pairs)  # never a silent 0.5
    results = backend.score(pairs[:2])
    assert [(r.probability, r.label) for r in results] == [(1.0, 1), (0.0, 0)]
    first_prompt = server.requests[0]["body"]["messages"][0]["content"]
    assert "SUMMARY: S2" in first_prompt and "SUMMARY: S1" not in first_prompt  # not ex. "a"
    assert server.requests[0]["body"]["temperature"] == 0
    assert len(server.requests) == 3  # the two answered pairs came from the cache
    client2, _ = _client(server, tmp_path)
    assert ChatBackend(client2, pool=pool, shots=1, seed=0).score(pairs[:2]) == results
    with pytest.raises(PresenceBackendError):
        ChatBackend(client2, pool=pool, shots=1, seed=0).score(pairs[2:])
    assert len(server.requests) == 4  # the unparseable reply was never cached: asked again


def test_disk_cache_round_trip(tmp_path):
    key = cache_key("model", {"b": 1, "a": [1, 2]})
    assert key == cache_key("model", {"a": [1, 2], "b": 1})
    with DiskCache(tmp_path / "c.sqlite") as cache:
        cache.set_many([(key, {"x": [0.5, 1]}), ("k2", "v")])
    reopened = DiskCache(tmp_path / "c.sqlite")
    assert reopened.get(key) == {"x": [0.5, 1]} and reopened.get("missing") is None
    assert reopened.get_many([key, "k2", "nope"]) == {key: {"x": [0.5, 1]}, "k2": "v"}
    assert key in reopened and len(reopened) == 2


def test_chat_backend_fingerprint_covers_what_changes_the_replies(server, tmp_path):
    pool = [{"example_id": "a", "summary": "S1", "unit": "U1", "label": 1},
            {"example_id": "z", "summary": "S2", "unit": "U2", "label": 0}]
    client, _ = _client(server, tmp_path)
    base = ChatBackend(client, pool=pool, shots=1, seed=0)
    assert base.fingerprint() == ChatBackend(client, pool=[dict(p) for p in pool], shots=1,
                                             seed=0).fingerprint()  # stable, by value
    assert base.fingerprint().startswith(f"chat:{server.url}:tiny-chat:shots=1,seed=0,pool=")
    assert '"max_tokens":5' in base.fingerprint() and '"temperature":0' in base.fingerprint()
    variants = [ChatBackend(client, pool=pool, shots=2, seed=0),
                ChatBackend(client, pool=pool, shots=1, seed=1),
                ChatBackend(client, pool=[{**pool[0], "label": 0}, pool[1]], shots=1, seed=0),
                ChatBackend(client, pool=pool[::-1], shots=1, seed=0),  # order changes draws
                ChatBackend(client, pool=pool, shots=1, seed=0,
                            params={"temperature": 0.7, "max_tokens": 5}),
                ChatBackend(client, pool=pool, shots=1, seed=0,
                            params={"temperature": 0, "max_tokens": 50})]
    prints = {base.fingerprint(), *(backend.fingerprint() for backend in variants)}
    assert len(prints) == 1 + len(variants)


def test_qapyramid_gpt4o_prompt_and_parser_against_a_local_server():
    """QAPyramid's released GPT-4o presence prompt, sent with the API's default sampling,
    and its parser ([YES] / [NO] exactly, else yes / no anywhere, else unparsed)."""
    from leaderboard.evaluators.pyramid.presence import (
        QAPYRAMID_GPT4O_PROMPT,
        ChatBackend,
        parse_qapyramid_gpt4o,
    )

    from servers import ChatServer

    assert parse_qapyramid_gpt4o("[YES]") == 1 and parse_qapyramid_gpt4o("[NO]") == 0
    assert parse_qapyramid_gpt4o("Yes, it can.") == 1
    assert parse_qapyramid_gpt4o("It is not known") == 0  # "no" inside "not", as the script
    assert parse_qapyramid_gpt4o("Maybe.") is None
    replies = iter(["[YES]", "[NO]"])
    server = ChatServer(lambda messages: next(replies))
    try:
        backend = ChatBackend(model="gpt-4o", base_url=server.url,
                              prompt_style="qapyramid-gpt4o")
        results = backend.score([("Maria opened a bakery.", "Who opened something? Maria"),
                                 ("Maria opened a bakery.", "What was sold? shoes")])
    finally:
        server.close()
    assert [r.label for r in results] == [1, 0]
    body = server.requests[0]["body"]
    assert set(body) == {"model", "messages"}  # no sampling parameter: the API's defaults
    assert body["messages"][0]["content"] == QAPYRAMID_GPT4O_PROMPT.format(
        summary="Maria opened a bakery.", question="Who opened something?", answer="Maria")
    assert body["messages"][0]["content"].endswith("[Question]\nWho opened something?\n\n"
                                                   "[Answer]\nMaria")
