"""The openai few-shot backend as a path for served models (vLLM's `vllm serve`, OpenAI):
chat completions and completions, a bound on concurrent requests, label probabilities from
token log-probabilities, and the server's faults, against a real HTTP server on 127.0.0.1
(tests/servers.py OpenAIServer)."""
from __future__ import annotations

import math

import pytest

from benchmark.cli import main
from tasks.base import FewShotParts
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.chat_client import (
    ChatClient,
    reply_text,
    token_alternatives,
    yes_probabilities,
)
from trainers.fewshot.parsers import parse_fewshot_output

from servers import OpenAIServer

P_YES = 0.7


def _answer(prompt: str):
    return "Yes", P_YES


@pytest.fixture
def server():
    fake = OpenAIServer(_answer, delay=0.05)
    yield fake
    fake.close()


@pytest.mark.parametrize("endpoint, path", [("chat", "/v1/chat/completions"),
                                            ("completions", "/v1/completions")])
def test_both_endpoints_and_their_log_probabilities(server, tmp_path, endpoint, path):
    client = ChatClient(model="served", base_url=server.url, endpoint=endpoint,
                        cache=tmp_path / "cache.sqlite")
    prompt = [{"role": "user", "content": "Is it?"}] if endpoint == "chat" else "Is it?"
    asked = {"logprobs": True, "top_logprobs": 2} if endpoint == "chat" else {"logprobs": 2}
    response = client.chat(prompt, max_tokens=4, **asked)
    assert server.requests[0]["path"] == path
    body = server.requests[0]["body"]
    assert (body["messages"] if endpoint == "chat" else body["prompt"]) == prompt
    assert reply_text(response) == "Yes"
    [(token, alternatives)] = token_alternatives(response)
    assert token == "Yes" and alternatives == pytest.approx(
        {"Yes": math.log(P_YES), "No": math.log(1 - P_YES)})
    client.chat(prompt, max_tokens=4, **asked)
    assert len(server.requests) == 1          # the second answer came from the cache


def _response(tokens):
    """A chat response whose log-probabilities are these (token, alternatives) pairs."""
    return {"choices": [{"message": {"content": ""}, "logprobs": {"content": [
        {"token": token, "logprob": max(alternatives.values(), default=0.0),
         "top_logprobs": [{"token": k, "logprob": v} for k, v in alternatives.items()]}
        for token, alternatives in tokens]}}]}


def test_yes_probabilities_need_tokens_that_spell_the_text():
    tokens = [("SENT0", {"SENT0": 0.0}), (" Yes", {" Yes": math.log(0.6), " No":
                                                  math.log(0.2), " yes": math.log(0.2)}),
              (" SENT1", {" SENT1": 0.0}), (" No", {" No": math.log(0.9)})]
    # yes variants are summed (0.8 vs 0.2); a missing "yes" alternative counts as 0
    assert yes_probabilities("SENT0 Yes SENT1 No", _response(tokens)) == \
        pytest.approx({6: 0.8, 16: 0.0})
    assert yes_probabilities("SENT0 Yes SENT1 No.", _response(tokens)) == {}
    # a stop string cut from the text (as vLLM does) keeps its token in the log-probabilities
    assert yes_probabilities("SENT0 Yes", _response(tokens)) == pytest.approx({6: 0.8})


def _byte_token(token: str, raw, alternatives: dict[str, float] | None = None) -> dict:
    alternatives = alternatives or {token: 0.0}
    return {"token": token, "bytes": raw, "logprob": max(alternatives.values()),
            "top_logprobs": [{"token": k, "logprob": v} for k, v in alternatives.items()]}


ACCENT = list("é".encode())
YES = {" Yes": math.log(0.7), " No": math.log(0.3)}


@pytest.mark.parametrize("content, pieces", [
    # a character split over two byte tokens is one piece; offsets after it stay right
    ([_byte_token("Caf", list(b"Caf")), _byte_token("\\xc3", ACCENT[:1]),
      _byte_token("\\xa9", ACCENT[1:]), _byte_token(" Yes", list(b" Yes"), YES)],
     ["Caf", "é", " Yes"]),
    # half a character that never completes is U+FFFD and does not swallow what follows
    ([_byte_token("Caf", list(b"Caf")), _byte_token("\\xc3", ACCENT[:1]),
      _byte_token(" Yes", list(b" Yes"), YES)], ["Caf", "\ufffd", " Yes"]),
    # no usable bytes (empty, null, out of range): the token's text
    ([_byte_token("Caf", []), _byte_token("é", None), _byte_token(" Yes", [300], YES)],
     ["Caf", "é", " Yes"]),
])
def test_chat_byte_tokens_make_whole_characters(content, pieces):
    """Chat log-probabilities give a multi-byte character as byte tokens ("\\xc3", "\\xa9")
    with their `bytes`."""
    response = {"choices": [{"message": {"content": ""}, "logprobs": {"content": content}}]}
    assert [token for token, _ in token_alternatives(response)] == pieces
    text = "".join(pieces)
    assert yes_probabilities(text, response) == pytest.approx({len(text) - 3: 0.7})


def test_parsers_take_the_probability_at_the_deciding_word():
    fac = type("FAC", (), {"output_kind": "probabilities"})()
    item = FewShotParts(content="x", output="", extra={})

    def parse(raw, probabilities, task=fac, parts=item):
        return parse_fewshot_output(task, raw, parts, cue="ANSWER:", stops=("\n\n",),
                                    line_output="yes_no", yes_probabilities=probabilities)

    # the cue and spaces are stripped before parsing: offsets still point into the raw text
    assert parse(" ANSWER: No, it is not.", {"9": 0.3}) == ([0.3], True)
    assert parse(" ANSWER: No, it is not.", None) == ([0.0], True)
    # decided by a phrase, not a yes/no word: 0.0 whatever the probabilities say
    assert parse("Not supported; yes and no.", {"16": 0.9}) == ([0.0], True)
    lines = FewShotParts(content="x", output="", extra={"line_labels": [0, 0, 0]})
    assert parse("SENT0 Yes SENT1 No SENT2 Yes", {"6": 0.8, "16": 0.1}, task=None,
                 parts=lines) == ([0.8, 0.1, 1.0], True)


def _run(server, data_dir, out, *extra):
    return main(["run", "--mode", "fewshot", "--fewshot-backend", "openai", "--model", "served",
                 "--base-url", server.url, "--tasks", "FAC", "--data", str(data_dir),
                 "--out", str(out), *extra])


@pytest.mark.slow
def test_a_run_on_a_served_model_with_concurrency_and_probabilities(server, data_dir,
                                                                    tmp_path, capsys):
    assert _run(server, data_dir, tmp_path / "run", "--openai-api", "completions",
                "--max-concurrency", "4", "--style", "llama") == 0, capsys.readouterr().err
    records = read_jsonl(tmp_path / "run" / "predictions" / "factuality_classification.jsonl")
    assert len(records) == 14
    assert all(r["prediction"] == [pytest.approx(P_YES)] for r in records)
    bodies = [request["body"] for request in server.requests]
    assert all(request["path"] == "/v1/completions" for request in server.requests)
    assert all(body["logprobs"] == 5 and body["stop"] and body["temperature"] == 0.0
               for body in bodies)
    assert 2 <= server.max_in_flight <= 4
    # without log-probabilities: the label itself
    assert _run(server, data_dir, tmp_path / "plain", "--top-logprobs", "0") == 0
    records = read_jsonl(tmp_path / "plain" / "predictions" / "factuality_classification.jsonl")
    assert all(r["prediction"] == [1.0] for r in records)
    assert "logprobs" not in server.requests[-1]["body"]


@pytest.mark.slow
def test_server_faults(server, data_dir, tmp_path, capsys):
    # asked to slow down: retried after the server's Retry-After, the run finishes
    server.faults = [(429, b'{"error": "slow down"}', {"Retry-After": "0"}),
                     (503, b"<html>busy</html>", {"Retry-After": "0"})]
    assert _run(server, data_dir, tmp_path / "retried") == 0
    assert "asked to retry after 0 s" in capsys.readouterr().err
    # a request the server refuses fails at once (no retry), naming the item (its chunk is
    # then asked prompt by prompt: refused again); the answered prompts are kept and a
    # rerun asks only for the rest
    server.faults = [(400, b'{"error": "logprobs are not supported"}', {})] * 2
    assert _run(server, data_dir, tmp_path / "refused") == 2
    err = capsys.readouterr().err
    assert "HTTP 400" in err and "logprobs are not supported" in err
    assert "a server without log-probabilities refuses them: --top-logprobs 0" in err
    assert "1 of 14 prompts failed" in err
    before = len(server.requests)
    assert _run(server, data_dir, tmp_path / "refused", "--resume") == 0
    assert len(server.requests) == before + 1
