"""Every option that more than one command takes is declared once (benchmark.commands.options):
the test walks every command's parser and compares each such option with its shared
definition, field by field; old spellings still work and warn."""
from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from benchmark.cli import build_parser
from benchmark.commands.options import SHARED, RenamedOption

#: what must be the same wherever an option appears
COMPARED = ("type", "default", "choices", "help", "nargs", "metavar", "dest", "const")


def commands(parser: argparse.ArgumentParser, prefix=()):
    """(command words, parser) of every command and subcommand."""
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))


def option_uses() -> dict[str, list[tuple[str, argparse.Action]]]:
    """flag -> (command, action) of every option of every command (old spellings apart); a
    command under two names (`stus`, the alias of `units stus`: the same handler and options)
    counts once."""
    uses, seen = defaultdict(list), set()
    for words, parser in commands(build_parser()):
        same = (parser._defaults.get("handler"),
                tuple(flag for action in parser._actions for flag in action.option_strings))
        if same[0] is not None and same in seen:
            continue
        seen.add(same)
        for action in parser._actions:
            if isinstance(action, (RenamedOption, argparse._HelpAction)):
                continue
            for flag in action.option_strings:
                if flag.startswith("--") and not flag.startswith("--no-"):
                    uses[flag].append((" ".join(words), action))
    return uses


def declared(action: argparse.Action) -> dict:
    return {name: getattr(action, name, None) for name in COMPARED} | {
        "action": type(action).__name__}


def shared_forms(flag: str) -> list[dict]:
    """The declarations `SHARED` makes of `flag` (one per kind), as argparse holds them."""
    forms = []
    for option in SHARED.values():
        if flag in option.flags:
            parser = argparse.ArgumentParser()
            forms.append(declared(parser.add_argument(*option.flags, **option.keywords())))
    return forms


def test_an_option_of_several_commands_is_the_same_everywhere():
    uses = option_uses()
    shared = {flag: used for flag, used in uses.items()
              if len({command for command, _ in used}) > 1}
    assert len(shared) > 40  # the walk found the commands
    differing = []
    for flag, used in sorted(shared.items()):
        forms = shared_forms(flag)
        for command, action in used:
            if declared(action) not in forms:
                differing.append(f"{command} {flag}: {declared(action)} not one of {forms}")
    assert differing == []


def test_the_walk_catches_an_option_declared_apart(monkeypatch):
    """A command that declares a shared option its own way is caught."""
    from benchmark.commands import baseline

    original = baseline.register

    def drifting(subparsers):
        original(subparsers)
        parser = subparsers.choices["baseline"]
        parser.add_argument("--seed", type=int, default=1, help="my own seed")

    monkeypatch.setattr(baseline, "register", drifting)
    uses = option_uses()
    action = next(action for command, action in uses["--seed"] if command == "baseline")
    assert declared(action) not in shared_forms("--seed")


@pytest.mark.parametrize("command", ["run", "predict", "train", "baseline", "export lm-eval",
                                     "experiment transfer", "data heuristic"])
@pytest.mark.parametrize("tasks", [["FAC", "ABS"], ["FAC,ABS"], ["all"]])
def test_tasks_take_spaces_commas_and_all_in_every_command(command, tasks):
    parser = build_parser()
    required = {"run": ["--out", "o"], "predict": ["--model", "m", "--out", "o"],
                "train": ["--out", "o"], "baseline": ["--out", "o"],
                "export lm-eval": ["--model", "m", "--out", "o"],
                "experiment transfer": ["--model", "m", "--out", "o", "--data", "d"],
                "data heuristic": ["--raw", "r", "--out", "o"]}[command]
    args = parser.parse_args([*command.split(), "--tasks", *tasks, *required])
    from tasks import parse_task_list

    expected = ("factuality_classification", "abstractive_summarization") \
        if tasks != ["all"] else parse_task_list(["all"])
    assert parse_task_list(args.tasks) == expected


@pytest.mark.parametrize("argv, dest, value, message", [
    (["predict", "--model", "m", "--out", "o", "--tasks", "FAC", "--data-dir", "d"],
     "data", "d", "--data-dir is renamed --data"),
    (["pyramid", "--data", "p", "--units", "scus", "--presence", "lexical"],
     "pyramid", "p", "--data is renamed --pyramid"),
    (["data", "build", "--raw", "r", "--out", "o", "--variant", "biographies", "schools"],
     "variants", ["biographies", "schools"], "--variant is renamed --variants"),
    (["data", "fetch", "--cache", "c"], "cache_dir", "c", "--cache is renamed --cache-dir"),
    (["leaderboard", "submit", "--model", "mine"], "name", "mine",
     "--model is renamed --name"),
])
def test_an_old_spelling_works_one_more_release_and_says_so(argv, dest, value, message,
                                                           capsys):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["gpu0", "cuda:01", "cuda:\u0661"])  # \u0661: a non-ASCII 1
def test_a_bad_shared_value_is_refused_by_every_command_the_same_way(bad, capsys):
    for argv in (["predict", "--model", "m", "--out", "o", "--tasks", "FAC"],
                 ["train", "--out", "o", "--tasks", "FAC"],
                 ["run", "--model", "m", "--out", "o", "--tasks", "FAC"],
                 ["experiment", "fractions", "--raw", "r", "--out", "o"],
                 ["stus", "--references", "r", "--out", "o"],
                 ["pyramid", "--pyramid", "p", "--units", "scus", "--presence", "nli"]):
        with pytest.raises(SystemExit) as stopped:
            build_parser().parse_args([*argv, "--device", bad])
        assert stopped.value.code == 2
        assert (f"argument --device: must be auto, cpu, cuda, cuda:N, mps or xpu, got {bad!r}"
                in capsys.readouterr().err), argv
