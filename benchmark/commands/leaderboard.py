"""`sumbench leaderboard ...`: host a leaderboard and submit to one (leaderboard.service).

  init     create/upgrade the database (Alembic), load hidden gold (--gold: the test split of
           every variant of a task-datasets folder; --pyramid DIR, repeatable: REALSumm/
           PyrXSum-layout folders), settings (--set KEY=VALUE) and the rows computed here
  token    print a new API token (last line of stdout; only its hash is stored)
  serve    the web app with its workers: one for evaluations, one for scoring and
           analysis (--no-worker to run workers apart)
  worker   claim and run jobs (--once: until none is left)
  submit   send prediction files / archives / run folders (--check: validate only)
  status   one submission's status and scores
  export   a static copy of the site (HTML, CSV, JSON, PNG)
  rescore  re-score every submission not scored under the current data/metric versions
  reveal   publish the private part's scores (an admin's decision, audited)
  inputs   write a board's public inputs (no gold field) as <variant>/<task>/test.jsonl
  openapi  the API's OpenAPI document (--markdown: the docs' API reference page)
"""
from __future__ import annotations

import argparse
import importlib

from benchmark.commands import (
    command_help,
    non_negative_float,
    positive_float,
    positive_int,
    probability,
)
from benchmark.commands.options import RenamedOption, add_option

#: the module that runs each half: a participant's commands (submit, status, inputs) load no
#: web framework, database library or NLTK; hosting commands load what they use
CLIENT, SERVE, HOST = ("benchmark.commands.leaderboard_client",
                       "benchmark.commands.leaderboard_serve",
                       "benchmark.commands.leaderboard_host")
#: the kinds of jobs a worker may take (`--kinds`): leaderboard.service.jobs.JOB_KINDS, kept
#: here so that the command line loads no database code (a test checks they agree)
JOB_KINDS = ("evaluate", "score", "analyse")
#: documents of a --demo corpus: 12 test articles per domain, enough for linked parts hosted
#: apart and a private half to leave every task public items to rank on
DEMO_DOCS = 240


class Handler:
    """A subcommand's handler named by module and function, imported only when it runs (its
    module may load the web stack; the options above never do)."""

    def __init__(self, module: str, function: str) -> None:
        self.module, self.function = module, function

    def __call__(self, args) -> int:
        return getattr(importlib.import_module(self.module), self.function)(args)

    def __repr__(self) -> str:
        return f"{self.module}.{self.function}"


def pyramid_units(text: str) -> tuple[str, str, str]:
    """An argparse type: `NAME:KIND=FILE` as (name, kind, file)."""
    name, colon, rest = text.partition(":")
    kind, equals, path = rest.partition("=")
    if not (colon and equals and name and kind and path):
        raise argparse.ArgumentTypeError(f"expected NAME:KIND=FILE, got {text!r}")
    return name, kind, path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "leaderboard", help=command_help("leaderboard"),
        description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="leaderboard_command", metavar="COMMAND")
    commands.required = True
    for name, (add, module, function, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        add(sub)
        sub.set_defaults(handler=Handler(module, function))


def _db(parser) -> None:
    add_option(parser, "db")


def _init_args(parser) -> None:
    _db(parser)
    parser.add_argument("--gold", metavar="DIR",
                        help="task-datasets folder (`sumbench data build`): the test split "
                             "of every variant becomes hidden gold of the usb track")
    add_option(parser, "pyramids")
    parser.add_argument("--pyramid-units", action="append", default=[], type=pyramid_units,
                        metavar="NAME:KIND=FILE",
                        help="extra units of the Pyramid folder called NAME, kept in its gold: "
                             "KIND smus, sgus, ssus or ngrams, FILE one line per example "
                             "(TAB-separated, or the paper's JSON); repeatable")
    add_option(parser, "set_setting")
    parser.add_argument("--evaluator", action="append", default=[], metavar="SPEC",
                        help="summaries-track column NAME=UNITS:PRESENCE[,KEY=VALUE] or "
                             "NAME=evaluator:EVALUATOR[,KEY=VALUE] (replaces the offline "
                             "defaults; e.g. pyramid-scus-nli=scus:nli,model=DIR, "
                             "r2=evaluator:rouge2_recall, or the reference-free "
                             "questeval=evaluator:questeval[,protocol=paper,...]; "
                             "`source:questeval` is the older spelling)")
    parser.add_argument("--demo", action="store_true",
                        help="also generate a synthetic corpus beside the database, load its "
                             "test split as gold (unless --gold is given) and add a demo "
                             "submission (train-fitted baselines, user 'demo')")
    parser.add_argument("--demo-docs", type=positive_int, default=DEMO_DOCS, metavar="N",
                        help=f"documents of the --demo corpus (default {DEMO_DOCS}; the "
                             f"test-only domains get N/20 each)")
    parser.add_argument("--no-computed-rows", action="store_true",
                        help="do not add the baselines, reference systems and built-in "
                             "evaluators the server computes itself")
    parser.add_argument("--no-score", action="store_true",
                        help="leave the computed rows queued for the workers")
    parser.add_argument("--private-fraction", type=private_share, metavar="F",
                        help="share of each task's test items per domain kept private: scored, "
                             "published only by `reveal` (new instances: 0.5; 0 turns it off)")
    parser.add_argument("--gold-visibility", choices=("public", "private"),
                        help="who can hold the test labels: public (the USB release: entries "
                             "rank on the whole test set, only models evaluated here are "
                             "ranked) or private (only this instance: a private part, hosting "
                             "apart and the Ladder hide them); required with --gold, except "
                             "for `sumbench data fetch` output (public); --demo is private")
    parser.add_argument("--keep-linked", action="store_true",
                        help="keep every test item of parts whose public inputs give another "
                             "part's gold away (FAC and FIX share sentences), marking them, "
                             "instead of hosting them on disjoint articles")


def yes_no(text: str) -> bool:
    """An argparse type: yes or no (true/false too)."""
    answers = {"yes": True, "true": True, "no": False, "false": False}
    if text.strip().lower() not in answers:
        raise argparse.ArgumentTypeError(f"expected yes or no, got {text!r}")
    return answers[text.strip().lower()]


def private_share(text: str) -> float:
    """An argparse type: a share in [0, 1) (the private part can never be everything)."""
    value = probability(text)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be below 1 (nothing would be public), got "
                                         f"{text}")
    return value


def _token_args(parser) -> None:
    _db(parser)
    parser.add_argument("--user", required=True, help="user name (created when new)")
    parser.add_argument("--admin", action="store_true", help="make the user an admin")
    parser.add_argument("--revoke", action="store_true",
                        help="revoke every token of the user instead (no new token)")


def _submit_args(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="prediction files, archives, or run folders (or --evaluate)")
    parser.add_argument("--evaluate", metavar="SOURCE",
                        help="instead of files: a model for the server to evaluate (a folder "
                             "under its model root, or a hub model id; a PEFT adapter folder "
                             "is loaded on the base model it names)")
    add_option(parser, "revision")
    add_option(parser, "profile")
    add_option(parser, "server")
    add_option(parser, "token")
    parser.add_argument("--name", help="the entry's name on the board")
    parser.add_argument("--model", dest="name", action=RenamedOption, new="--name",
                        help=argparse.SUPPRESS)
    add_option(parser, "track")
    add_option(parser, "variant")
    parser.add_argument("--check", action="store_true",
                        help="validate here with the server's validator and submit nothing "
                             "(with --server, also that every test item is present)")
    add_option(parser, "wait")
    for field in ("base-model", "method", "training-domains", "data-fraction", "link",
                  "licence", "notes"):
        parser.add_argument(f"--{field}", dest=f"card_{field.replace('-', '_')}",
                            help="model card (self-reported)")
    parser.add_argument("--training-seed", dest="card_seed", help="model card: the seed it "
                                                                  "was trained with")
    parser.add_argument("--seed", dest="card_seed", action=RenamedOption,
                        new="--training-seed", help=argparse.SUPPRESS)
    parser.add_argument("--training-data", dest="card_training_data", metavar="TEXT",
                        help="model card: the data the model was trained on (where the test "
                             "gold is public, a model evaluated here ranks only with this "
                             "and --usb-test-seen no)")
    parser.add_argument("--usb-test-seen", dest="card_usb_test_seen", type=yes_no,
                        metavar="yes|no", help="model card: whether USB test data was among "
                                               "its training data")


def _status_args(parser) -> None:
    parser.add_argument("id", type=positive_int, help="the submission's number")
    add_option(parser, "server", required=True)
    add_option(parser, "token")


def _export_args(parser) -> None:
    _db(parser)
    add_option(parser, "out_dir", required=True)


def _rescore_args(parser) -> None:
    _db(parser)
    parser.add_argument("--now", action="store_true", help="run the jobs here too")


def _reveal_args(parser) -> None:
    _db(parser)
    parser.add_argument("--by", required=True, metavar="ADMIN",
                        help="the admin who decides (named in the audit log)")


def _inputs_args(parser) -> None:
    add_option(parser, "server", required=True)
    add_option(parser, "out_dir", required=True)
    add_option(parser, "track")
    add_option(parser, "variants")


def _evaluate_args(parser) -> None:
    add_option(parser, "model_root")
    add_option(parser, "device")


def _serve_args(parser) -> None:
    _db(parser)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=positive_int, default=8000)
    parser.add_argument("--no-worker", action="store_true",
                        help="no worker (run `leaderboard worker` apart)")
    add_option(parser, "workers")
    parser.add_argument("--no-evaluate", action="store_true",
                        help="the server evaluates no submitted model (GPU machines run "
                             "`leaderboard worker --kinds evaluate`)")
    _evaluate_args(parser)


def kinds_list(text: str) -> tuple[str, ...]:
    """An argparse type: job kinds, comma-separated."""
    kinds = tuple(dict.fromkeys(kind.strip() for kind in text.split(",") if kind.strip()))
    unknown = [kind for kind in kinds if kind not in JOB_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"job kinds are {', '.join(JOB_KINDS)}, got {text!r}")
    return kinds


def _worker_args(parser) -> None:
    _db(parser)
    parser.add_argument("--once", action="store_true", help="exit when no job is left")
    parser.add_argument("--lease", type=positive_float, metavar="SECONDS",
                        help="job lease (default: the instance's lease_seconds)")
    parser.add_argument("--hold", type=non_negative_float, default=0.0, metavar="SECONDS",
                        help="sleep after each claim (fault drills: kill a worker mid-job)")
    parser.add_argument("--kinds", type=kinds_list, default=JOB_KINDS, metavar="KINDS",
                        help=f"the jobs it takes, comma-separated (default all: "
                             f"{','.join(JOB_KINDS)}); `evaluate` on GPU machines")
    parser.add_argument("--server-pid", type=positive_int, help=argparse.SUPPRESS)
    _evaluate_args(parser)


def _openapi_args(parser) -> None:
    add_option(parser, "markdown")


#: name: (its options, the module and function that run it, its one-line help)
SUBCOMMANDS = {
    "init": (_init_args, HOST, "run_init", "create/upgrade the database and load hidden gold"),
    "token": (_token_args, HOST, "run_token", "print a new API token for a user"),
    "serve": (_serve_args, SERVE, "run_serve", "run the web app (+ a worker)"),
    "worker": (_worker_args, SERVE, "run_worker", "run a worker"),
    "submit": (_submit_args, CLIENT, "submit", "submit predictions (or --check them)"),
    "status": (_status_args, CLIENT, "status", "show a submission"),
    "export": (_export_args, HOST, "run_export", "write a static copy of the site"),
    "rescore": (_rescore_args, HOST, "run_rescore",
                "re-score submissions after a data/metric/scorer version change"),
    "reveal": (_reveal_args, HOST, "run_reveal",
               "publish the private part's scores (audited)"),
    "inputs": (_inputs_args, CLIENT, "inputs",
               "write a board's public inputs without gold fields"),
    "openapi": (_openapi_args, HOST, "run_openapi", "print the API's OpenAPI document"),
}
