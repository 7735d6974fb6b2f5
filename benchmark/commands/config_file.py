"""`--config FILE`: a command's options from a YAML or JSON file (`sumbench run --config`).

The file maps option names (as their `--long-name`, dashes or underscores) to values; options
given on the command line win over the file's. A `results.json` of `sumbench run` is a config
file too: its `run_config` holds every option of the run that wrote it, so

    sumbench run --config runs/x/results.json --out runs/y

repeats that run. Values are checked as the command line checks them (the option's type and
choices); `--set FIELD=VALUE` options are a mapping `set: {FIELD: VALUE}`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmark.commands.options import RenamedOption
from tasks.plumbing.errors import DataError, did_you_mean
from tasks.plumbing.io import read_text

#: what a results.json keeps its options under
RUN_CONFIG = "run_config"
#: options a config file does not set (they say how to run this time, not what)
NOT_CONFIGURED = ("help", "config", "print_spec", "resume", "handler")


def read_config(path: str) -> dict:
    """The file's option mapping (YAML or JSON; a results.json's `run_config`)."""
    import yaml

    text = read_text(path, what="config file")
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise DataError(f"not a JSON or YAML mapping ({str(error).splitlines()[0]})",
                        path=path) from None
    if isinstance(data, dict) and isinstance(data.get(RUN_CONFIG), dict):
        data = data[RUN_CONFIG]
    if not isinstance(data, dict):
        raise DataError("expected a mapping of option names to values", path=path)
    return data


def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Option destination -> its action (not an old spelling's)."""

    return {action.dest: action for action in parser._actions
            if action.option_strings and action.dest not in NOT_CONFIGURED
            and not isinstance(action, RenamedOption)}


def given_on_command_line(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The option destinations the command line names (in any spelling)."""
    given = set()
    for action in parser._actions:
        if action.dest in NOT_CONFIGURED:
            continue
        if any(item == flag or item.startswith(flag + "=") for flag in action.option_strings
               for item in argv):
            given.add(action.dest)
    return given


def apply_config(parser: argparse.ArgumentParser, args: argparse.Namespace,
                 argv: list[str]) -> argparse.Namespace:
    """`args` with the values of `args.config` for every option the command line left out."""
    path = args.config
    actions = options_of(parser)
    given = given_on_command_line(parser, argv)
    for key, value in read_config(path).items():
        dest = str(key).replace("-", "_")
        dest = "overrides" if dest == "set" and "overrides" in actions else dest
        if dest not in actions:
            raise DataError(f"not an option of this command{did_you_mean(key, list(actions))}",
                            path=path, field=str(key))
        if dest not in given:
            setattr(args, dest, checked_value(actions[dest], value, path, str(key)))
    return args


def checked_value(action: argparse.Action, value: Any, path: str, key: str) -> Any:
    """A config value as the option would have parsed it."""
    try:
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                               argparse.BooleanOptionalAction)):
            optional = isinstance(action, argparse.BooleanOptionalAction) and value is None
            if not isinstance(value, bool) and not optional:
                raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
            return value
        if isinstance(action, argparse._AppendAction):
            if value is None:  # as results.json records an option left out
                return action.default
            if isinstance(value, dict):
                texts = [f"{name}={json_text(item)}" for name, item in value.items()]
            elif isinstance(value, list):
                texts = [json_text(item) for item in value]
            else:
                raise argparse.ArgumentTypeError(f"expected a mapping or a list, got {value!r}")
            return [action.type(text) if action.type else text for text in texts]
        if action.nargs in ("+", "*") and value is not None:  # a list, or one string
            converted = [action.type(json_text(item)) if action.type else json_text(item)
                         for item in (value if isinstance(value, list) else [value])]
        elif value is None or action.type is None:
            converted = value if value is None or isinstance(value, str) else str(value)
        else:
            converted = action.type(value if isinstance(value, str) else json_text(value))
    except (argparse.ArgumentTypeError, TypeError, ValueError) as error:
        raise DataError(str(error), path=path, field=key) from None
    return _in_choices(action, converted, path, key)


def _in_choices(action: argparse.Action, converted: Any, path: str, key: str) -> Any:
    """`converted` (or each of its items) when the option's choices hold it."""
    items = converted if isinstance(converted, list) else [converted]
    for item in items:
        if action.choices is not None and item is not None and item not in action.choices:
            raise DataError(f"expected one of {', '.join(map(str, action.choices))}, got "
                            f"{item!r}", path=path, field=key)
    return converted


def json_text(value: Any) -> str:
    """A config value as the command line would give it: strings as they are, the rest as
    JSON (true, 0.5, [1, 2])."""
    return value if isinstance(value, str) else json.dumps(value)


def effective_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """Every configurable option's value as the command ran (what `--config` reads back;
    `--set` values as a mapping)."""
    options = {}
    for dest in options_of(parser):
        value = getattr(args, dest, None)
        if dest == "overrides":
            options["set"] = {key: item for key, item in (value or [])}
        elif isinstance(value, (tuple, Path)):
            options[dest] = list(value) if isinstance(value, tuple) else str(value)
        else:
            options[dest] = value
    return options

