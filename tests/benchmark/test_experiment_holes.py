"""Experiments score what each cell has: a test domain without items of a task leaves only
that task's cells empty (with the reason), averages are over the tasks defined in every
cell, and the command succeeds."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TOPIC, FAC = "topicbased_summarization", "factuality_classification"


@pytest.fixture(scope="module")
def holed_data(corpus) -> Path:
    """The corpus's task datasets, with no topic-based test item in companies."""
    data = corpus["root"] / "holed-data"
    assert main(["data", "build", "--raw", str(corpus["raw"]), "--out", str(data),
                 "--variants", "biographies", "companies"]) == 0
    (data / "companies" / TOPIC / "test.jsonl").write_text("")
    return data


def _settings(corpus, out: Path) -> list[str]:
    return ["--data", "", "--model", str(corpus["model"]), "--profile", "tiny", "--lora",
            "--max-steps", "1", "--early-stopping", "none", "--max-new-tokens", "4",
            "--tasks", "TOPIC,FAC", "--out", str(out)]


def _args(corpus, data: Path, out: Path, kind: str, *extra) -> list[str]:
    settings = _settings(corpus, out)
    settings[settings.index("--data") + 1] = str(data)
    return ["experiment", kind, *settings, *extra]


@pytest.fixture(scope="module")
def holed_transfer(corpus, holed_data):
    out = corpus["root"] / "holed-transfer"
    code = main(_args(corpus, holed_data, out, "transfer", "--domains",
                      "biographies,companies", "--train-docs", "3", "--val-docs", "1",
                      "--test-docs", "2"))
    return code, out, json.loads((out / "transfer.json").read_text())


@pytest.mark.slow
def test_a_task_without_test_items_empties_only_its_own_cells(holed_transfer):
    code, out, result = holed_transfer
    assert code == 0
    assert {job["status"] for job in result["jobs"].values()} == {"done"}
    for row in ("biographies", "companies"):
        assert result["matrix"][row]["companies"][TOPIC] is None
        assert result["matrix"][row]["companies"][FAC] is not None
        assert result["matrix"][row]["biographies"][TOPIC] is not None
        assert result["null_reasons"][row] == {
            "companies": {TOPIC: "no test items in companies"}}
    # every cell averages the same tasks: those defined everywhere
    assert result["average_tasks"] == [FAC]
    for row, tests in result["average"].items():
        for test, average in tests.items():
            assert average == result["matrix"][row][test][FAC]
    assert result["delta"]["biographies"]["companies"] == pytest.approx(
        result["average"]["biographies"]["companies"] -
        result["average"]["companies"]["companies"])
    plan = {job["name"]: job["argv"] for job in
            map(json.loads, (out / "plan.jsonl").read_text().splitlines())}
    argv = plan["cell/biographies/companies"]
    assert argv[argv.index("--tasks") + 1] == FAC
    argv = plan["cell/biographies/biographies"]
    assert argv[argv.index("--tasks") + 1] == f"{TOPIC},{FAC}"
    summary = (out / "summary.md").read_text()
    assert f"every cell: {FAC}." in summary
    assert f"- biographies / companies / {TOPIC}: no test items in companies" in summary


def test_an_undefined_headline_is_empty_with_its_reason(holed_transfer, capsys):
    _, out, _ = holed_transfer
    path = out / "cells" / "companies" / "biographies" / "results.json"
    results = json.loads(path.read_text())
    results["scores"][FAC]["headline"] = None   # as UNSUP F1 with no span anywhere
    path.write_text(json.dumps(results))
    assert main(["experiment", "collect", str(out)]) == 0
    result = json.loads((out / "transfer.json").read_text())
    assert result["matrix"]["companies"]["biographies"][FAC] is None
    metric = {row["task"]: row["metric"] for row in results["table"]}[FAC]
    assert result["null_reasons"]["companies"]["biographies"] == {
        FAC: f"{metric} is undefined on this test set"}
    # no task is defined in every cell now: no cell averages anything, rather than cells
    # averaging different tasks
    assert result["average_tasks"] == []
    assert {average for tests in result["average"].values()
            for average in tests.values()} == {None}
    assert "no task (none is defined in every cell)" in (out / "summary.md").read_text()


@pytest.mark.slow
def test_fractions_keep_the_tasks_that_have_items(corpus, holed_data, tmp_path):
    out = tmp_path / "fractions"
    assert main(_args(corpus, holed_data, out, "fractions", "--fractions", "1.0",
                      "--variant", "companies")) == 0
    result = json.loads((out / "fractions.json").read_text())
    assert result["scores"][TOPIC]["1"]["values"] == [None]
    assert result["scores"][FAC]["1"]["mean"] is not None
    assert result["null_reasons"] == {
        "fraction-1-seed-0": {TOPIC: "no test items in companies"}}
    plan = [json.loads(line) for line in (out / "plan.jsonl").read_text().splitlines()]
    assert plan[1]["argv"][plan[1]["argv"].index("--tasks") + 1] == FAC
