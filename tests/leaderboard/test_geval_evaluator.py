"""G-Eval (`geval`) against a stub OpenAI-compatible server on 127.0.0.1: the default prompt
is nlpyang/geval's SummEval relevance file byte for byte; the request is the official one (one
system message filled in as `gpt4_eval.py` fills it, n, temperature, max_tokens, top_p); the
parsing equals the official `parse_output` on a table of replies (its values recorded by
running meta_eval_summeval.py's function); the score is the mean of the n samples with the
unparsable ones as 0; the logprob mode's expected value by hand; a `{{Reference}}` prompt with
several references; the cache (a second run sends nothing, a response with an empty first
sample included); bounded retries; the cost; `max_concurrency`; bad prompt files, options,
servers and reference lists as one-line errors; `sumbench meta-eval --metric geval` end to
end on a small Pyramid folder."""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest

from leaderboard.evaluators.geval import evaluator as geval
from leaderboard.evaluators.geval.evaluator import GEvalEvaluator, parse_options
from leaderboard.evaluators.geval.prompts import DEFAULT_PROMPT, DEFAULT_PROMPT_SHA256, load_prompt
from leaderboard.evaluators.geval.scoring import expected_choice_score, parse_sample
from tasks.metrics.evaluators import configured, score_summaries
from tasks.plumbing.errors import DataError, SumbenchError

from helpers import sumbench
from lb_helpers import write_pyramid_folder
from servers import LocalServer, free_port, send_json

#: meta_eval_summeval.py's `parse_output` (nlpyang/geval 6f84404) on each reply, recorded by
#: running that function (taken from the file as it is) on these inputs
OFFICIAL_PARSES = [
    ("4", 4.0), (" 3.5", 3.5), ("Score: 4", 0), ("", 0), ("5\n", 5.0), ("  4", 0),
    ("4.5.1", 0), (".", 0), ("3/5", 3.0), (" 2 - the summary", 2.0), ("Relevance: 3", 0),
    ("1.", 1.0), ("10", 10.0), ("\n4", 0), ("4\n\nThe", 4.0), ("-1", 0), ("٣", 3.0),
    (" 5.0", 5.0),
]


class GEvalServer(LocalServer):
    """/v1/chat/completions answering `n` choices: `replies(body) -> [text per choice]`
    (cycled to n), each with `logprobs(text)` when the request asks and `logprobs` is set;
    `faults` (status codes) are answered first; every body is recorded; `delay` seconds per
    request; `max_in_flight` counts requests served at once."""

    def __init__(self, replies, logprobs=None, delay: float = 0.0):
        self.requests: list[dict] = []
        self.faults: list[int] = []
        self.in_flight = self.max_in_flight = 0
        lock, server = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    server.requests.append(body)
                    fault = server.faults.pop(0) if server.faults else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    time.sleep(delay)
                    if fault is not None:
                        send_json(self, fault, b'{"error": "overloaded"}')
                        return
                    send_json(self, 200, json.dumps(server.answer(body)).encode())
                finally:
                    with lock:
                        server.in_flight -= 1

            def log_message(self, *args):
                pass

        self.answer_replies, self.answer_logprobs = replies, logprobs
        self.start(Handler)

    def answer(self, body: dict) -> dict:
        texts = self.answer_replies(body)
        texts = [texts[i % len(texts)] for i in range(body.get("n", 1))]
        choices = []
        for index, text in enumerate(texts):
            choice = {"index": index, "message": {"role": "assistant", "content": text}}
            if body.get("logprobs") and self.answer_logprobs is not None:
                choice["logprobs"] = {"content": self.answer_logprobs(text)}
            choices.append(choice)
        return {"choices": choices, "usage": {"prompt_tokens": 100,
                                              "completion_tokens": 2 * len(texts)}}


@pytest.fixture
def served():
    servers = []

    def start(replies, logprobs=None, delay=0.0):
        servers.append(GEvalServer(replies, logprobs, delay))
        return servers[-1]
    yield start
    for server in servers:
        server.close()


def evaluator(server, sleeps=None, **options) -> GEvalEvaluator:
    sleep = sleeps.append if sleeps is not None else (lambda seconds: None)
    return GEvalEvaluator({"base_url": server.url, "model": "judge", **options}, sleep=sleep)


def official_prompt(document: str, summary: str) -> str:
    """gpt4_eval.py:19,27: the file read with open().read(), then the two replacements."""
    with open(DEFAULT_PROMPT) as handle:
        return handle.read().replace("{{Document}}", document).replace("{{Summary}}", summary)


# ---- the prompt and the request ------------------------------------------------------------
def test_the_default_prompt_is_g_eval_s_relevance_file_byte_for_byte():
    raw = DEFAULT_PROMPT.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == DEFAULT_PROMPT_SHA256
    assert raw.count(b"\r\n") == 32 and raw.endswith(b"- Relevance:")
    prompt = load_prompt(DEFAULT_PROMPT)
    assert "\r" not in prompt.text and prompt.text.endswith("(scores ONLY):\n\n- Relevance:")
    assert prompt.placeholders == {"Document", "Summary"}
    judge = configured("geval") if "geval" in _registered() else GEvalEvaluator()
    assert judge.reads_sources and not judge.reads_references
    settings = judge.settings
    assert settings["prompt_sha256"] == DEFAULT_PROMPT_SHA256 and settings["n"] == 20
    assert settings["temperature"] == 2 and settings["max_tokens"] == 5
    assert settings["mode"] == "sample" and settings["model"] == "gpt-4-0613"
    assert settings["reported_as"] == "GEval-style, prompt: rel_detailed.txt (sha256 " \
        "2e836f9d9aec)"


def _registered():
    from tasks.metrics.evaluators import load_evaluators

    geval.register()
    return load_evaluators().names()


def test_the_request_is_the_official_one(served):
    server = served(lambda body: ["4"])
    document = "The cat sat. {{Summary}} stays a placeholder only in the official order."
    scores = evaluator(server).score(["A cat sat."], [["ref"]], [document])
    assert scores == [4.0]
    (body,) = server.requests
    assert body == {"model": "judge", "messages": [
        {"role": "system", "content": official_prompt(document, "A cat sat.")}],
        "n": 20, "temperature": 2.0, "max_tokens": 5, "top_p": 1,
        "frequency_penalty": 0, "presence_penalty": 0}
    # the official replacement order: the document's own "{{Summary}}" gets the summary too
    assert "The cat sat. A cat sat. stays" in body["messages"][0]["content"]
    assert "{{" not in body["messages"][0]["content"]


@pytest.mark.parametrize("reply, official", OFFICIAL_PARSES)
def test_parsing_equals_the_official_parse_output(reply, official):
    assert parse_sample(reply) == official
    assert parse_sample(None) == 0  # a null content: 0 (the official parser would stop)


def test_the_score_is_the_mean_of_n_samples_zeros_included(served):
    replies = ["4", " 3.5", "Score: 4", "", "5\n"]
    server = served(lambda body: replies)
    judge = evaluator(server, n="5")
    assert judge.score(["s1", "s2"], [["r"], ["r"]], ["d1", "d2"]) == [2.5, 2.5]
    assert [body["n"] for body in server.requests] == [5, 5]
    texts = [reply for reply, _ in OFFICIAL_PARSES]
    everything = served(lambda body: texts)
    expected = sum(value for _, value in OFFICIAL_PARSES) / len(texts)
    assert evaluator(everything, n=str(len(texts))).score(["s"], [["r"]], ["d"]) == \
        [pytest.approx(expected)]


def test_several_calls_reports_tokens_and_requests(served):
    server = served(lambda body: ["3"])
    judge = evaluator(server, n="4")
    assert judge.cost() is None
    judge.score(["a", "b", "c"], [["r"]] * 3, ["d"] * 3)
    cost = judge.cost()
    assert cost["requests"] == 3 and cost["responses"] == 3 and cost["cached"] == 0
    assert cost["prompt_tokens"] == 300 and cost["completion_tokens"] == 24


# ---- log-probabilities ----------------------------------------------------------------------
def _alternatives(first: dict[str, float]) -> list[dict]:
    """A blank token, then a token with `first` {text: probability} as its alternatives."""
    top = [{"token": token, "logprob": math.log(p)} for token, p in first.items()]
    return [{"token": " ", "logprob": 0.0, "top_logprobs": []},
            {"token": top[0]["token"], "logprob": top[0]["logprob"], "top_logprobs": top}]


def test_logprob_mode_is_the_expected_score_at_the_first_non_blank_token(served):
    first = {"4": 0.5, " 3": 0.2, "5 ": 0.1, "x": 0.1, "4.": 0.05, "9": 0.04}
    server = served(lambda body: ["4"], logprobs=lambda text: _alternatives(first))
    judge = evaluator(server, mode="logprobs")
    by_hand = (4 * 0.5 + 3 * 0.2 + 5 * 0.1) / (0.5 + 0.2 + 0.1)   # 3.875
    assert judge.score(["s"], [["r"]], ["d"]) == [pytest.approx(by_hand, abs=1e-12)]
    (body,) = server.requests
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["n"] == 1 and body["temperature"] == 0 and body["max_tokens"] == 5
    settings = judge.settings
    assert settings["mode"] == "logprobs" and settings["scale"] == "1-5"
    # scale 1-10 counts "9" too; a choice without score tokens counts 0 in the mean
    assert expected_choice_score([(" ", {}), ("4", {"4": math.log(.5), "9": math.log(.5)})],
                                 range(1, 11)) == pytest.approx(6.5)
    two = served(lambda body: ["4", "x"], logprobs=lambda text: _alternatives(
        first if text == "4" else {"x": 0.9, "y": 0.1}))
    assert evaluator(two, mode="logprobs", n="2").score(["s"], [["r"]], ["d"]) == \
        [pytest.approx(by_hand / 2)]


def test_logprob_mode_without_log_probabilities_is_one_line(served):
    server = served(lambda body: ["4"])  # no log-probabilities sent back
    with pytest.raises(SumbenchError, match=r"^G-Eval mode=logprobs: the server returned no "
                                            r"log-probabilities \(use mode=sample\)$"):
        evaluator(server, mode="logprobs").score(["s"], [["r"]], ["d"])


# ---- references -----------------------------------------------------------------------------
def test_a_reference_prompt_is_sent_once_per_reference(served, tmp_path):
    prompt = tmp_path / "ref.txt"
    prompt.write_text("Reference:\n{{Reference}}\nSummary:\n{{Summary}}\n- Score:")
    server = served(lambda body: [re.search(r"Reference:\n(\d)",
                                            body["messages"][0]["content"]).group(1)])
    judge = evaluator(server, prompt=str(prompt), n="2")
    assert judge.reads_references and not judge.reads_sources
    assert judge.score(["s", "t"], [["1", "4"], ["2"]], None) == [2.5, 2.0]
    assert server.requests[0]["messages"][0]["content"] == \
        "Reference:\n1\nSummary:\ns\n- Score:"
    assert judge.with_options({"references": "max"}).score(["s"], [["1", "4"]], None) == [4.0]
    assert judge.settings["references"] == "mean" and "references" not in \
        evaluator(server).settings
    with pytest.raises(SumbenchError, match=r"^evaluator 'geval': 1 references for 2 "
                                            r"summaries$"):
        score_summaries(judge, ["s", "t"], [["1"]], None, "geval")
    with pytest.raises(SumbenchError, match=r"^geval: 1 reference lists for 2 summaries$"):
        judge.score(["s", "t"], [["1"]], None)
    with pytest.raises(SumbenchError, match=r"^geval: summary 2 has no reference$"):
        judge.score(["s", "t"], [["1"], []], None)
    with pytest.raises(SumbenchError, match=r"^geval: the prompt reads each summary's "
                                            r"document \(\{\{Document\}\}\); got 1 documents "
                                            r"for 2 summaries$"):
        evaluator(server).score(["s", "t"], [["1"], ["2"]], ["d"])


# ---- cache, retries, concurrency ----------------------------------------------------------
def test_the_cache_answers_a_second_run_with_no_request(served, tmp_path):
    server = served(lambda body: ["", "5"])  # an empty first sample: the client keeps none
    judge = evaluator(server, n="2", cache=str(tmp_path / "geval.sqlite"))
    first = judge.score(["a", "b"], [["r"], ["r"]], ["d", "d"])
    assert first == [2.5, 2.5] and len(server.requests) == 2
    again = evaluator(server, n="2", cache=str(tmp_path / "geval.sqlite"))
    assert again.score(["a", "b"], [["r"], ["r"]], ["d", "d"]) == first
    assert len(server.requests) == 2
    assert again.cost()["requests"] == 0 and again.cost()["cached"] == 2
    evaluator(server, n="3", cache=str(tmp_path / "geval.sqlite")).score(["a"], [["r"]], ["d"])
    assert len(server.requests) == 3  # other parameters: asked again


def test_retries_on_500_are_bounded(served, tmp_path):
    server = served(lambda body: ["3"])
    server.faults = [500, 500]
    sleeps: list[float] = []
    judge = evaluator(server, sleeps, max_attempts="3")
    assert judge.score(["s"], [["r"]], ["d"]) == [3.0]
    assert sleeps == [1.0, 2.0] and judge.cost()["requests"] == 3
    server.faults = [500, 500, 500]
    cache = tmp_path / "geval.sqlite"
    with pytest.raises(SumbenchError) as failed:
        evaluator(server, [], max_attempts="2", cache=str(cache)).score(
            ["s", "t"], [["r"]] * 2, ["d"] * 2)
    message = str(failed.value)
    assert message.startswith("geval: 1 of 2 requests failed (first: request 1: ")
    assert "failed after 2 attempts; last error: HTTP 500" in message
    assert message.endswith("running again asks only for these") and "\n" not in message
    server.requests.clear()  # the answered request was cached: only the failed one is asked
    assert evaluator(server, cache=str(cache)).score(["s", "t"], [["r"]] * 2, ["d"] * 2) == \
        [3.0, 3.0]
    assert len(server.requests) == 1


def test_an_unreachable_server_is_one_line():
    url = f"http://127.0.0.1:{free_port()}/v1"
    judge = GEvalEvaluator({"base_url": url, "max_attempts": "2"}, sleep=lambda s: None)
    with pytest.raises(SumbenchError) as failed:
        judge.score(["s"], [["r"]], ["d"])
    message = str(failed.value)
    assert "\n" not in message and message.startswith(f"geval: 1 of 1 requests failed (first: "
                                                      f"request 1: {url}/chat/completions: "
                                                      f"failed after 2 attempts")
    assert "Connection refused" in message


def test_max_concurrency_sends_requests_at_once(served):
    server = served(lambda body: ["2"], delay=0.2)
    judge = evaluator(server, max_concurrency="4")
    assert judge.score(["a", "b", "c", "d"], [["r"]] * 4, ["x"] * 4) == [2.0] * 4
    assert server.max_in_flight == 4
    serial = served(lambda body: ["2"], delay=0.05)
    evaluator(serial).score(["a", "b"], [["r"]] * 2, ["x"] * 2)
    assert serial.max_in_flight == 1


# ---- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("content, message", [
    ("Rate it.\n{{Document}}\n- Score:", r"no-summary.txt, field 'prompt': the G-Eval "
     r"prompt has no \{\{Summary\}\} placeholder"),
    ("Rate it.\n\n{{Source}} and {{Summary}}", r"bad.txt:3, field 'prompt': unknown "
     r"placeholder '\{\{Source\}\}'"),
    ("{{ Summary }}", r"bad.txt:1, field 'prompt': unknown placeholder '\{\{ Summary \}\}'"),
    (b"\xff{{Summary}}", r"bad.txt, field 'prompt': a G-Eval prompt file must be UTF-8"),
    (None, r"absent.txt, field 'prompt': no such G-Eval prompt file$"),
])
def test_bad_prompt_files_are_one_line(tmp_path, content, message):
    name = "no-summary.txt" if "no-summary" in message else \
        "absent.txt" if content is None else "bad.txt"
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message) as failed:
        GEvalEvaluator({"prompt": str(path)})
    assert str(failed.value).startswith(str(path)) and "\n" not in str(failed.value)


@pytest.mark.parametrize("options, message", [
    ({"n": "0"}, r"^geval option n='0': expected a positive integer$"),
    ({"temperature": "3"}, r"^geval option temperature='3': expected a number from 0 to 2$"),
    ({"mode": "greedy"}, r"^geval option mode='greedy': expected sample or logprobs$"),
    ({"scale": "5-1"}, r"^geval option scale='5-1': expected two integers LOW-HIGH with"),
    ({"scale": "five"}, r"^geval option scale='five': expected two integers LOW-HIGH, e\.g"),
    ({"references": "median"}, r"^geval option references='median': expected mean or max$"),
    ({"max_concurrency": "0"}, r"^geval option max_concurrency='0': expected a positive"),
    ({"temprature": "1"}, r"^unknown geval option 'temprature' \(known: prompt, model, .*"
                          r"did you mean 'temperature'"),
])
def test_bad_options_are_one_line(options, message):
    with pytest.raises(SumbenchError, match=message):
        parse_options(options)
    with pytest.raises(SumbenchError, match=message):
        GEvalEvaluator().with_options(options)


def test_openai_without_a_key_is_a_problem_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    judge = GEvalEvaluator({"api_key_env": "JUDGE_KEY"})
    assert judge.problem() == ("geval calls https://api.openai.com/v1, which needs an API key "
                               "in $JUDGE_KEY (or set base_url= to another server)")
    with pytest.raises(SumbenchError, match=r"^geval calls https://api\.openai\.com/v1"):
        score_summaries(judge, ["s"], [["r"]], ["d"], "geval")
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    assert judge.problem() is None and "sk-test" not in json.dumps(judge.settings)


# ---- meta-eval ------------------------------------------------------------------------------
def _sentences_in_summary(body: dict) -> list[str]:
    """The summary's number of sentences as the judge's reply (alpha 3, beta 2, gamma 1)."""
    content = body["messages"][0]["content"]
    summary = content.split("Summary:\n\n", 1)[1].split("\n\n\nEvaluation Form", 1)[0]
    return [f" {summary.count('.')}"]


def test_meta_eval_with_geval_end_to_end(served, tmp_path, capsys):
    geval.register()
    server = served(_sentences_in_summary)
    pyramid = write_pyramid_folder(tmp_path / "tiny", n_examples=4)
    out = tmp_path / "meta.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", pyramid, "--metric",
                                  "geval", "--metric-option", f"base_url={server.url}",
                                  "--metric-option", "n=3", "--out", out)
    assert code == 0, err
    assert json.loads(printed)["all"]["system"]["kendall"] == pytest.approx(1.0)
    written = json.loads(out.read_text())
    assert written["system_means"]["metric"] == {"alpha": 3.0, "beta": 2.0, "gamma": 1.0}
    settings = written["config"]["metric_settings"]
    assert settings["evaluator"] == "geval" and settings["n"] == 3
    assert settings["prompt_sha256"] == DEFAULT_PROMPT_SHA256
    assert len(server.requests) == 12  # 3 systems x 4 summaries, one request each
    documents = (pyramid / "documents.txt").read_text().splitlines()
    summaries = (pyramid / "summaries" / "alpha.summary").read_text().splitlines()
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": official_prompt(documents[0], summaries[0])}]
    failed = tmp_path / "failed.json"
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", pyramid, "--metric", "geval",
                            "--metric-option", f"base_url=http://127.0.0.1:{free_port()}/v1",
                            "--metric-option", "max_attempts=1", "--out", failed)
    assert code != 0 and "geval: 4 of 4 requests failed" in err
    assert len(err.strip().splitlines()) == 1 and not failed.exists()


def test_a_board_column_scores_with_geval_and_reports_its_cost(served):
    from leaderboard.tracks.summaries import SummariesEvaluator, SummariesTrack

    geval.register()
    server = served(lambda body: ["4", "2"])
    column = SummariesEvaluator.parse(f"judge=evaluator:geval,base_url={server.url},n=2")
    payload = {"references": ["r1", "r2"], "documents": ["d1", "d2"]}
    cost: dict = {}
    assert SummariesTrack([column.check()]).evaluator_scores(payload, ["s1", "s2"], cost) == \
        {"judge": [3.0, 3.0]}
    assert cost["judge"]["requests"] == 2 and cost["judge"]["completion_tokens"] == 8
    assert server.requests[1]["messages"][0]["content"] == official_prompt("d2", "s2")
    with pytest.raises(SumbenchError, match=r"^evaluator 'bad': geval option n='zero'"):
        SummariesEvaluator.parse("bad=evaluator:geval,n=zero").check()
