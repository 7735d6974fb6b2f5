"""`--style gpt-3.5-official`: the USB release's GPT-3.5 protocol. Prompt strings and windows
by hand, the shot draws replayed against NumPy's global generator seeded as the release seeds
it, the release's parsers, and a run against a real OpenAI-compatible server on 127.0.0.1."""
from __future__ import annotations

import json

import numpy as np
import pytest

from benchmark.cli import main
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.official import CONTEXT, build_prompts, replay_shot_choices, shot_pool
from trainers.fewshot.official_prompts import (
    INSTRUCTIONS,
    convert,
    count,
    keep_lines,
    line_windows,
    parse_fac,
    parse_sent_ids,
)

from servers import ChatServer

pytest.importorskip("bpe_openai")


def test_cl100k_counts_are_openai_counts():
    assert count("Hello world") == 2 and count("SENT0 The town grew.") == 6


def test_text_prompts_use_cue_words_without_a_space():
    record = {"input_lines": ["One line.", "Two lines."], "output_lines": ["A.", "B."]}
    [converted] = convert("abstractive_summarization", record, 1000)
    assert converted["input_string"] == "CONTENT: One line. Two lines.\nSUMMARY:"
    assert converted["output_string"] == "A. B."
    fac = convert("factuality_classification", {"input_lines": ["x."], "summary_sent": "y.",
                                                "label": 1}, 1000)[0]
    assert fac["input_string"] == "CONTENT: x.\nSUMMARY: y.\nLABEL:"
    assert fac["output_string"] == " No"
    fix = convert("fixing_factuality", {"input_lines": ["x."], "initial_summary": "a",
                                        "fixed_summary": "b"}, 1000)[0]
    assert fix["input_string"].endswith("\nSUMMARY: a\nFIXED SUMMARY:")
    assert INSTRUCTIONS["fixing_factuality"].endswith(
        "Make as little changes as possible. Do not add any new information to the summary.")


def test_content_lines_are_cut_by_their_running_token_sum():
    lines = ["alpha beta gamma.", "delta.", "epsilon."]
    sizes = [count(line) for line in lines]
    assert keep_lines(lines, sizes[0] + sizes[1]) == lines[:2]
    assert keep_lines(lines, sizes[0] - 1) == []  # nothing after the first line that misses


def test_line_windows_number_from_sent0_and_write_empty_answers():
    lines = ["The town grew.", "It rained.", "The mill closed.", "A road opened."]
    windows = line_windows(lines, {2}, "", 20)
    assert [w["lines"] for w in windows] == [(0, 2), (2, 4)]
    assert windows[0]["input_string"] == "SENT0 The town grew. SENT1 It rained.\nLABELS:"
    assert windows[0]["output_string"] == "" and windows[1]["output_string"] == "SENT0"
    ext = convert("extractive_summarization", {"input_lines": lines, "labels": [0, 0, 1, 0]},
                  20)
    assert ext[1]["input_string"].startswith("CONTENT: SENT0 The mill closed.")


def test_shot_choices_replay_the_release_global_generator():
    pools = {"factuality_classification": 7, "abstractive_summarization": 5}
    sizes = {"factuality_classification": {"validation": 2, "test": 3},
             "abstractive_summarization": {"validation": 1, "test": 2}}
    state = np.random.get_state()
    try:  # what the release does: one global generator, tasks sorted, validation first
        np.random.seed(1337)
        official = {}
        for task in sorted(pools):
            for split in ("validation", "test"):
                for _ in range(sizes[task][split]):
                    official.setdefault((task, split), []).append(
                        np.random.permutation(pools[task])[:4].tolist())
    finally:
        np.random.set_state(state)
    assert replay_shot_choices(pools, sizes, "factuality_classification") == \
        official[("factuality_classification", "test")]
    assert replay_shot_choices(pools, sizes, "abstractive_summarization") == \
        official[("abstractive_summarization", "test")]


def test_pool_prompts_and_zero_shot_fallback(data_dir):
    train = read_jsonl(data_dir / "all" / "factuality_classification" / "train.jsonl")
    pool = shot_pool("factuality_classification", train)
    assert pool and all(item["tokens"] <= 512 for item in pool)
    assert [item["record"] for item in pool] == sorted(item["record"] for item in pool)
    test = read_jsonl(data_dir / "all" / "factuality_classification" / "test.jsonl")[0]
    [prompt] = build_prompts("factuality_classification", test, pool, [1, 0])
    expected = (INSTRUCTIONS["factuality_classification"] + "\n" +
                pool[1]["input_string"] + pool[1]["output_string"] + "\n" +
                pool[0]["input_string"] + pool[0]["output_string"] + "\n")
    assert prompt["prompt"].startswith(expected) and prompt["prompt"].endswith("\nLABEL:")
    assert prompt["max_new_tokens"] == CONTEXT - count(prompt["prompt"]) - 8
    huge = [{**pool[0], "input_string": "word " * 5000}]
    [fallback] = build_prompts("factuality_classification", test, huge, [0])
    assert fallback["zero_shot"] and fallback["shots"] == []
    assert fallback["prompt"].startswith(INSTRUCTIONS["factuality_classification"] + "\nCONTENT")


@pytest.mark.parametrize("answer, expected, parsed", [
    ("The summary is not consistent. Yes.", [0.0], True),   # rules before yes/no
    ("Yes, it is.", [1.0], True),
    ("No.", [0.0], True),
    ("The claims are supported.", [1.0], True),
    ("Hard to say", [1.0], False),                           # the release's default
])
def test_fac_parser_follows_the_release_rules(answer, expected, parsed):
    assert parse_fac(answer) == (expected, parsed)


def test_sentence_ids_are_exact_tokens_of_the_last_content():
    prompt = ("shot CONTENT: SENT0 a SENT1 b\nLABELS:SENT1\n"
              "CONTENT: SENT0 x SENT1 y SENT2 z\nLABELS:")
    assert parse_sent_ids(prompt, "SENT0 SENT2,") == ([1.0, 0.0, 0.0], True)
    assert parse_sent_ids(prompt, "") == ([0.0, 0.0, 0.0], True)
    assert parse_sent_ids(prompt, "none of them") == ([0.0, 0.0, 0.0], False)


@pytest.mark.slow
def test_a_run_against_a_local_openai_server(data_dir, tmp_path, capsys):
    def answer(messages):
        text = messages[-1]["content"]
        return "SENT0 SENT2" if text.endswith("LABELS:") else "Yes"

    server = ChatServer(answer)
    try:
        out = tmp_path / "official"
        code = main(["run", "--mode", "fewshot", "--fewshot-backend", "openai", "--style",
                     "gpt-3.5-official", "--model", "gpt-3.5-turbo-0301", "--base-url",
                     server.url, "--tasks", "FAC,EXT", "--data", str(data_dir), "--out",
                     str(out), "--device", "cuda"])  # no model runs here: any device does
    finally:
        server.close()
    assert code == 0, capsys.readouterr().err
    bodies = [request["body"] for request in server.requests]
    assert all(set(body) == {"model", "messages", "max_tokens"} for body in bodies)
    ext_body = next(b for b in bodies if b["messages"][0]["content"].endswith("LABELS:"))
    first = ext_body["messages"][0]["content"]
    assert first.startswith(INSTRUCTIONS["extractive_summarization"] + "\nCONTENT: SENT0")
    assert ext_body["max_tokens"] == CONTEXT - count(first) - 8
    results = json.loads((out / "results.json").read_text())
    assert results["fewshot"]["factuality_classification"]["unparseable"] == 0
    ext = read_jsonl(out / "predictions" / "extractive_summarization.jsonl")
    assert all(len(r["prediction"]) == len(r["input_lines"]) for r in ext)
    assert ext[0]["prediction"][:3] == [1.0, 0.0, 1.0]
    outputs = read_jsonl(out / "outputs" / "factuality_classification.jsonl")
    assert {len(row["shots"]) for row in outputs} == {4}
