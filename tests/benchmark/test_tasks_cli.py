"""`sumbench tasks`: every registered task with aliases, main metric, splits, description."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from tasks import get_task

EXPECTED = {
    "abstractive_summarization": ("ABS", "rouge_gmean"),
    "evidence_extraction": ("EVEXT", "f1"),
    "extractive_summarization": ("EXT", "auc"),
    "factuality_classification": ("FAC", "auc"),
    "fixing_factuality": ("FIX", "exactmatch"),
    "multisentence_compression": ("COMP", "rouge_gmean"),
    "topicbased_summarization": ("TOPIC", "rouge_gmean"),
    "unsupported_span_prediction": ("UNSUP", "f1"),
}
QAPYRAMID = {"qa_generation": ("QAGEN", "rougel"), "presence_detection": ("PRESENCE", "micro_f1")}


def test_tasks_table_lists_every_task(capsys):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * (len(EXPECTED) + len(QAPYRAMID))
    listed = {header.split()[0]: (header, description)
              for header, description in zip(lines[::2], lines[1::2])}
    assert sorted(listed) == sorted({**EXPECTED, **QAPYRAMID})
    for name, (alias, metric) in QAPYRAMID.items():
        assert listed[name][0].startswith(f"{name} [{alias}]  suite: qapyramid  main metric: "
                                          f"{metric}  splits: ")
    for name, (alias, metric) in EXPECTED.items():
        header, description = listed[name]
        assert header == (f"{name} [{alias}]  suite: usb  main metric: {metric}  "
                          "splits: train/validation/test  source: sumbench")
        assert description == f"    {get_task(name).description}"


def test_tasks_json_describes_every_task(capsys):
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == sorted({**EXPECTED, **QAPYRAMID})
    for row in (row for row in rows if row["suite"] == "usb"):
        alias, metric = EXPECTED[row["name"]]
        assert row["aliases"] == [alias.lower()] and row["main_metric"] == metric
        assert row["splits"] == ["train", "validation", "test"]
        assert "all" in row["variants"] and row["metrics"]
    fac = next(row for row in rows if row["name"] == "factuality_classification")
    assert fac["metrics"] == ["precision", "recall", "f1", "accuracy", "auc"]
    assert fac["output_kind"] == "probabilities"


# ---- task lists: one parser for train, predict and run -----------------------------------
def test_parse_task_list_names_aliases_commas_and_all():
    from tasks import parse_task_list, task_names

    assert parse_task_list(["fac,EXT", " comp "]) == (
        "factuality_classification", "extractive_summarization", "multisentence_compression")
    assert parse_task_list(["ALL"]) == parse_task_list(["all,"]) == tuple(task_names("usb"))
    assert len(parse_task_list(["all"])) == 8


@pytest.mark.parametrize("names,message", [
    (["FAC", "factuality_classification"], "a task is listed twice: factuality_classification"),
    (["FAC,fac"], "a task is listed twice"),
    (["all", "FAC"], "'all' stands alone"),
    (["FAC,all"], "'all' stands alone"),
    ([" , "], "no tasks given"),
])
def test_parse_task_list_refuses(names, message):
    from tasks import parse_task_list
    from tasks.plumbing.errors import SumbenchError

    with pytest.raises(SumbenchError, match=message):
        parse_task_list(names)


def test_parse_task_list_unknown_name_suggests():
    from tasks import parse_task_list
    from tasks.plumbing.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="factuality"):
        parse_task_list(["factuality_clasification"])


def test_resolve_tasks_uses_the_same_rules():
    from tasks.plumbing.errors import SumbenchError
    from trainers.finetuning.data import resolve_tasks

    fac = get_task("FAC")
    assert [t.name for t in resolve_tasks(["FAC,EXT"])] == ["factuality_classification",
                                                            "extractive_summarization"]
    assert [t.name for t in resolve_tasks([fac, "EXT"])] == ["factuality_classification",
                                                             "extractive_summarization"]
    assert len(resolve_tasks(["all"])) == 8
    with pytest.raises(SumbenchError, match="listed twice: factuality_classification"):
        resolve_tasks([fac, "FAC"])
    with pytest.raises(SumbenchError, match="'all' stands alone"):
        resolve_tasks(["all", "FAC"])


@pytest.mark.parametrize("command", [
    ["train", "--tasks", "FAC", "fac"],
    ["predict", "--model", "no-such-model", "--tasks", "FAC", "fac"],
    ["run", "--model", "no-such-model", "--tasks", "FAC,fac"],
])
def test_commands_refuse_a_repeated_task_cleanly(command, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*command, "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"sumbench {command[0]}: error: a task is listed twice: "
                            f"factuality_classification")
    assert not out.exists()


def test_commands_refuse_all_mixed_with_names(tmp_path, capsys):
    assert main(["predict", "--model", "m", "--tasks", "all", "FAC",
                 "--out", str(tmp_path / "o")]) == 2
    assert "'all' stands alone" in capsys.readouterr().err


def test_the_docs_task_table_is_the_registrys(capsys):
    """docs/tasks.md is `sumbench tasks --markdown` as it prints today (regenerate it with
    `sumbench tasks --markdown > docs/tasks.md`)."""
    from pathlib import Path

    assert main(["tasks", "--markdown"]) == 0
    table = capsys.readouterr().out
    checked_in = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
    assert checked_in.read_text(encoding="utf-8") == table
