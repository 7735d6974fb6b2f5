"""The `sumbench` command line. Each subcommand lives in a module of benchmark/commands (the
table `benchmark.commands.COMMANDS`) that exposes `register(subparsers)`; only the module of
the command given is imported, and heavy libraries (torch, transformers) only where used."""
from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import signal
import sys
import threading

from benchmark.commands import COMMANDS
from benchmark.commands.config_file import apply_config
from benchmark.commands.options import add_option
from benchmark.commands.out_file import check_out_file
from tasks import use_plugins
from tasks.plumbing.errors import SumbenchError, did_you_mean
from tasks.plumbing.locks import output_lock
from tasks.plumbing.plugins import named_plugins

#: commands that write one output folder (--out): one process per folder at a time
LOCKED_COMMANDS = ("train", "predict", "run", "demo", "baseline", "experiment")
#: experiment kinds that run without the lock: `job` runs one job of a plan, many at once;
#: `status` only reads
UNLOCKED_EXPERIMENT_KINDS = ("job", "status")

#: exit codes of a command stopped by Ctrl-C (SIGINT) and by SIGTERM (what Slurm and
#: `timeout` send): 128 + the signal number
INTERRUPTED, TERMINATED = 130, 143
#: the exit status of a shell command whose output pipe closed (128 + SIGPIPE)
PIPE_CLOSED = 141


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it stops as it does on Ctrl-C: locks
    released, staging removed, finished work kept."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM raises `Terminated` (main thread only: signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the option, then a pointer to --help."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line (`command` None), or only `command`'s options: the others are
    named with their help but their modules are not imported, so `sumbench --help` and one
    command's run load no other command's libraries (`command` "": none loaded)."""
    parser = OneLineParser(
        prog="sumbench", description="Reproducible summarization benchmarking (USB, QAPyramid).")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    loaded: set[str] = set()
    for name, (module_name, help_text) in COMMANDS.items():
        if module_name in loaded:
            continue
        if command is None or COMMANDS.get(command, ("",))[0] == module_name:
            importlib.import_module(module_name).register(subparsers)
            loaded.add(module_name)
        else:
            subparsers.add_parser(name, help=help_text, add_help=False)
    for leaf in leaf_parsers(parser):
        if leaf.add_help:  # not a placeholder
            add_option(leaf, "plugins")
    return parser


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers under `parser` that run a command (those without subcommands)."""
    children = [child for action in parser._actions
                if isinstance(action, argparse._SubParsersAction)
                for child in dict.fromkeys(action.choices.values())]
    if not children:
        return [parser]
    return [leaf for child in children for leaf in leaf_parsers(child)]


def command_word(argv: list[str]) -> str:
    """The command an argument list names ("" when its first word is none)."""
    return argv[0] if argv and argv[0] in COMMANDS else ""


def _handle(args: argparse.Namespace) -> int:
    """Run the command's handler, holding the lock of its output folder where it has one;
    a command writing one --out file has it checked first (benchmark.commands.out_file). A
    command whose --out has a default of its own names it in `default_out`."""
    check_out_file(args)
    if getattr(args, "out", None) is None and getattr(args, "default_out", None):
        args.out = args.default_out
    out = getattr(args, "out", None)
    if _takes_lock(args) and out:
        from pathlib import Path

        if Path(out).exists() and not Path(out).is_dir():
            given = "OUT" if getattr(args, "experiment_command", None) == "collect" else "--out"
            raise SumbenchError(f"{given} {out} is a file; give a folder")
        with output_lock(out, " ".join(filter(None, (
                args.command, getattr(args, "experiment_command", None))))):
            return int(args.handler(args) or 0)
    return int(args.handler(args) or 0)


def _takes_lock(args: argparse.Namespace) -> bool:
    """Whether the command holds its --out folder's lock (a second process on the folder is
    refused, naming the owner)."""
    return args.command in LOCKED_COMMANDS and not getattr(args, "print_spec", False) and \
        getattr(args, "experiment_command", None) not in UNLOCKED_EXPERIMENT_KINDS


def _os_error_text(error: OSError) -> str:
    """One line for an OS fault: what failed and the path, never a traceback."""
    reason = error.strerror or str(error) or type(error).__name__
    if error.errno == errno.EFBIG or error.errno == errno.ENOSPC:
        reason += " (the disk or the file-size limit is full)"
    if error.errno == errno.EEXIST and error.filename and os.path.lexists(error.filename) \
            and not os.path.isdir(error.filename):
        reason = "a file stands where a folder is needed"
    paths = [name for name in (error.filename, error.filename2) if name]
    return f"{reason}: {' -> '.join(map(str, paths))}" if paths else reason


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end is closed (poll reports an error on it)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in tests)
        return False


def _command_chain(parser: argparse.ArgumentParser, args: argparse.Namespace,
                   argv: list[str]) -> list[tuple[argparse.ArgumentParser, int]]:
    """[(parser, index in argv where its part begins)]: sumbench's own (0), then each chosen
    (sub)command's, from the first place its name appears after its parent's."""
    chain, start = [(parser, 0)], 0
    while True:
        chosen = next((action for action in parser._actions
                       if isinstance(action, argparse._SubParsersAction)), None)
        name = getattr(args, chosen.dest, None) if chosen is not None else None
        if name not in (chosen.choices if chosen is not None else {}) or name not in argv[start:]:
            return chain
        start = argv.index(name, start) + 1
        parser = chosen.choices[name]
        chain.append((parser, start))


def _refused_where(chain: list, argv: list[str], extra: list[str]):
    """(parser, its unknown items): the items of `extra` (in argv order, command names
    skipped) that sit in the part of the first one's (sub)command."""
    names = {start - 1 for _, start in chain[1:]}
    places, position = [], 0
    for item in extra:
        position = next((i for i in range(position, len(argv))
                         if argv[i] == item and i not in names), len(argv))
        places.append(position)
        position += 1
    level = [max(k for k, (_, start) in enumerate(chain) if start <= place)
             for place in places]
    return chain[level[0]][0], [item for item, at in zip(extra, level) if at == level[0]]


def parse_arguments(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """`parser.parse_args(argv)`, but an unknown option is refused by the parser of the
    (sub)command it was given to (`sumbench score: error: ...`, `sumbench --x tasks` by
    sumbench's own), with the options it is close to; unknown items given to other commands
    are left for the next try."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        command, refused = _refused_where(_command_chain(parser, args, argv), argv, extra)
        options = [name for action in command._actions for name in action.option_strings
                   if name not in ("-h", "--help")]
        flags = [item.split("=")[0] for item in refused if item.startswith("-")]
        command.error(f"unrecognized arguments: {' '.join(refused)}"
                      f"{did_you_mean(flags[0] if len(flags) == 1 else flags, options)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_word(argv))
    args = parse_arguments(parser, argv)
    prefix = f"sumbench {args.command}"
    try:
        if getattr(args, "config", None):  # options left out of the command line
            command = _command_chain(parser, args, argv)[-1][0]
            args = apply_config(command, args, argv)
            args.parser = command
        if getattr(args, "plugins", None) or named_plugins():  # now, and for the children
            use_plugins(getattr(args, "plugins", None) or [])
        with sigterm_as_interrupt():
            code = _handle(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except SumbenchError as error:
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError as error:
        if not stdout_reader_gone():  # another pipe broke: a fault to report
            print(f"{prefix}: error: {_os_error_text(error)}", file=sys.stderr)
            return 1
        devnull = os.open(os.devnull, os.O_WRONLY)  # the reader of stdout stopped (`| head`)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit
        return PIPE_CLOSED
    except OSError as error:
        print(f"{prefix}: error: {_os_error_text(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(f"{prefix}: {how}; finished work is kept, run the same command again "
              "(with --resume where it has one) to continue", file=sys.stderr)
        return TERMINATED if isinstance(stop, Terminated) else INTERRUPTED
