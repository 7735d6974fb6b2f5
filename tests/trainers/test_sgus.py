"""`sumbench units sgus` against a local OpenAI-compatible server that answers each reference
with its released SGUs joined by " # " (the released files keep the units, not the raw
completions): the server must receive exactly the paper's messages (system instruction,
one-shot pair, preprocessed reference) with temperature 0 and no max_tokens, and the
command must give back exactly the released SGUs of every REALSumm and PyrXSum reference."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.units.sgu_prompt import (
    SYSTEM,
    clean_units,
    official_units,
    preprocess,
    read_one_shot,
    reply_status,
)

from helpers import sumbench
from servers import ChatServer, OpenAIServer

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_the_official_reading_of_a_reply():
    assert official_units(" A did B . C # D END\nE # ") == ["A did B. C", "DE", ""]
    assert clean_units(["- one\n- two", " three #", ""]) == ["one", "two", "three"]
    assert reply_status("", [""]) == "empty"
    assert reply_status("There is only one sentence in this input.", ["x"]) == "not a split"
    assert preprocess("<t> A . </t> <t> B . </t>") == "A. B ."


@pytest.mark.parametrize("dataset, model", [
    ("realsumm", "gpt-4"), ("pyrxsum", "gpt-4"), ("realsumm", "gpt-3.5-turbo"),
    ("pyrxsum", "gpt-3.5-turbo"),  # bullet lists kept as one unit, pyrxsum-69's non-split
])
def test_the_released_sgus_come_back_from_the_paper_s_exact_requests(tmp_path, capsys,
                                                                     dataset, model):
    released = SHARED / "scu_units" / dataset / f"{dataset}_{model}_ctx_oneshot.json"
    references = SHARED / "pyramid" / dataset / "references.txt"
    if not released.is_file() or not references.is_file():
        pytest.skip("../shared/data/scu_units and ../shared/data/pyramid are absent")
    data = json.loads(released.read_text())
    by_input = {preprocess(record["summary"]): " # ".join(record["sgus"])
                for record in data["data"]}
    server = ChatServer(lambda messages: by_input[messages[-1]["content"]])
    try:
        out, as_json = tmp_path / "sgus.txt", tmp_path / "sgus.json"
        code, printed, err = sumbench(
            capsys, "units", "sgus", "--references", str(references), "--one-shot",
            str(released), "--model", model, "--base-url", server.url, "--max-concurrency",
            "4", "--out", str(out), "--json-out", str(as_json))
        assert code == 0, err
        shot = read_one_shot(released)
        lines = references.read_text().splitlines()
        expected = sorted(json.dumps({"model": model, "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": shot.prompt},
            {"role": "assistant", "content": shot.completion},
            {"role": "user", "content": preprocess(line.strip())}], "temperature": 0},
            sort_keys=True) for line in lines)
        assert sorted(json.dumps(r["body"], sort_keys=True) for r in server.requests) == \
            expected
        assert all(r["path"] == "/v1/chat/completions" for r in server.requests)
        made = json.loads(as_json.read_text())
        assert [r["sgus"] for r in made["data"]] == [r["sgus"] for r in data["data"]]
        assert made["samples_used"] == data["samples_used"]
        assert out.read_text().splitlines() == [  # the TAB form: line breaks made spaces
            "\t".join(" ".join(unit.split()) for unit in record["sgus"] if unit.strip())
            for record in data["data"]]
        assert "100 references" in printed
    finally:
        server.close()


def test_failures_are_recorded_and_a_cached_rerun_asks_only_for_them(tmp_path, capsys):
    shot = tmp_path / "shot.json"
    shot.write_text(json.dumps({"prompt": "P", "completion": " a # b"}))
    references = tmp_path / "references.txt"
    references.write_text("Bullets .\n<t> One . </t> <t> Two . </t>\nSingle sentence here .\n")
    replies = {"Bullets .": "- x\n- y", "One. Two .": "One # Two", "Single sentence here .":
               "There is only one sentence in this input, so there is no need to split it."}
    server = OpenAIServer(lambda prompt: (replies[prompt], 0.5))
    server.faults.append((400, b'{"error": {"message": "refused"}}', {}))  # the first request
    try:
        args = ["units", "sgus", "--references", str(references), "--one-shot", str(shot),
                "--model", "m", "--base-url", server.url, "--cache", str(tmp_path / "c.db"),
                "--out", str(tmp_path / "out.txt"), "--json-out", str(tmp_path / "out.json")]
        code, _, err = sumbench(capsys, *args)
        assert code == 1 and "references 1 failed" in err, err
        data = json.loads((tmp_path / "out.json").read_text())["data"]
        assert [r["status"] for r in data] == ["failed", "ok", "not a split"]
        assert "HTTP 400" in data[0]["error"] and data[0]["sgus"] == []
        asked = len(server.requests)
        code, _, err = sumbench(capsys, *args, "--clean")
        assert code == 0, err
        assert len(server.requests) == asked + 1  # the cached replies were not asked again
        assert (tmp_path / "out.txt").read_text().splitlines()[0] == "x\ty"
    finally:
        server.close()
