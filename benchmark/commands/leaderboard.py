"""`sumbench leaderboard ...`: host a leaderboard and submit to one (leaderboard.service).

  init     create/upgrade the database (Alembic), load hidden gold (--gold: the test split of
           every variant of a task-datasets folder; --pyramid DIR, repeatable: REALSumm/
           PyrXSum-layout folders), settings (--set KEY=VALUE) and the rows computed here
  token    print a new API token (last line of stdout; only its hash is stored)
  serve    the web app and one in-process worker (--no-worker to run workers apart)
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
import json
import sys

from benchmark.commands import command_help, positive_int, probability
from benchmark.commands.leaderboard_client import inputs, print_json, status, submit
from benchmark.commands.leaderboard_serve import (
    _database,
    _db,
    _serve_args,
    _worker_args,
    run_serve,
    run_worker,
)
from benchmark.commands.options import RenamedOption, add_option
from benchmark.synthetic import SyntheticSpec, generate_corpus
from leaderboard.intake.validate import Upload
from leaderboard.service.admin import reveal
from leaderboard.service.api_doc import api_markdown
from leaderboard.service.app import openapi_document
from leaderboard.service.auth import authenticate, check_user_name, create_token, revoke_tokens
from leaderboard.service.db import Database, database_url
from leaderboard.service.entry_view import public_view
from leaderboard.service.export import export_site
from leaderboard.service.init import initialise
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import accept
from leaderboard.service.worker import Worker, queue_rescore
from tasks import get_task, task_names
from tasks.plumbing.errors import SumbenchError
from tasks.usb.derive import BUILD_INFO_FILE, build_task_datasets
from trainers.inference.baselines import baseline_records

#: bootstrap resamples of a --demo instance unless --set says otherwise (quick to build)
DEMO_RESAMPLES = 200
#: documents of a --demo corpus: 12 test articles per domain, enough for linked parts hosted
#: apart and a private half to leave every task public items to rank on
DEMO_DOCS = 240


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "leaderboard", help=command_help("leaderboard"),
        description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="leaderboard_command", metavar="COMMAND")
    commands.required = True
    for name, add, handler in ((("init", _init_args, run_init)), ("token", _token_args, run_token),
                               ("serve", _serve_args, run_serve),
                               ("worker", _worker_args, run_worker),
                               ("submit", _submit_args, submit),
                               ("status", _status_args, status),
                               ("export", _export_args, run_export),
                               ("rescore", _rescore_args, run_rescore),
                               ("reveal", _reveal_args, run_reveal),
                               ("inputs", _inputs_args, inputs),
                               ("openapi", _openapi_args, run_openapi)):
        sub = commands.add_parser(name, help=_HELP[name])
        add(sub)
        sub.set_defaults(handler=handler)


_HELP = {"init": "create/upgrade the database and load hidden gold",
         "token": "print a new API token for a user", "serve": "run the web app (+ a worker)",
         "worker": "run a worker", "submit": "submit predictions (or --check them)",
         "status": "show a submission", "export": "write a static copy of the site",
         "rescore": "re-score submissions after a data/metric/scorer version change",
         "reveal": "publish the private part's scores (audited)",
         "inputs": "write a board's public inputs without gold fields",
         "openapi": "print the API's OpenAPI document"}


def _init_args(parser) -> None:
    _db(parser)
    parser.add_argument("--gold", metavar="DIR",
                        help="task-datasets folder (`sumbench data build`): the test split "
                             "of every variant becomes hidden gold of the usb track")
    add_option(parser, "pyramids")
    add_option(parser, "set_setting")
    parser.add_argument("--evaluator", action="append", default=[], metavar="SPEC",
                        help="summaries-track evaluator NAME=UNITS:PRESENCE[,KEY=VALUE] "
                             "(replaces the offline defaults; e.g. "
                             "pyramid-scus-nli=scus:nli,model=DIR)")
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


# ---- handlers ------------------------------------------------------------------------------
def run_init(args) -> int:
    gold, settings = args.gold, dict(args.settings)
    if args.private_fraction is not None:
        settings["private_fraction"] = str(args.private_fraction)
    if args.keep_linked:
        settings["keep_linked"] = "true"
    visibility = args.gold_visibility
    if args.demo and not gold:
        if visibility == "public":
            raise SumbenchError(f"--demo is private: its synthetic gold stays beside the "
                                f"database ({demo_folder(args.db)}); drop --gold-visibility "
                                f"public, or give --gold DIR")
        gold, visibility = str(demo_gold(args.db, args.demo_docs)), "private"
    if args.demo:
        settings.setdefault("n_resamples", str(DEMO_RESAMPLES))
    report = initialise(args.db, gold=gold, pyramids=args.pyramids or [],
                        settings=settings, evaluators=args.evaluator,
                        computed_rows=not args.no_computed_rows, score=not args.no_score,
                        gold_visibility=visibility, require_visibility=True)
    if args.demo:
        report["demo_submission"] = submit_demo(args.db, gold)
    print_json(report)
    return 0


def demo_folder(db: str):
    """`<database file stem>-demo/` beside a SQLite file (the working folder otherwise)."""
    from pathlib import Path

    url = database_url(db)
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        return path.with_name(path.stem + "-demo")
    return Path("leaderboard-demo")


def demo_gold(db: str, docs: int = DEMO_DOCS):
    """A synthetic corpus (all six domains) and its derived task datasets; reused when there."""
    folder = demo_folder(db)
    data = folder / "data"
    if not (data / BUILD_INFO_FILE).is_file():
        spec = SyntheticSpec(seed=0, docs=docs, domains=("biographies", "companies",
                                                       "disasters", "schools"),
                             test_only_domains=("landmarks", "newspapers"),
                             test_only_docs=max(1, docs // 20))
        generate_corpus(folder / "raw", spec)
        build_task_datasets(folder / "raw", data, progress=False)
    return data


def submit_demo(db: str, gold: str) -> dict:
    """A demo entry from user `demo`: the baselines fitted on the train split (Lead-k from the
    train references, position prior from the train labels), scored like any submission."""
    lines = []
    for name in task_names("usb"):
        task = get_task(name)
        train = task.instances(task.load("train", "all", gold))
        test = task.instances(task.load("test", "all", gold))
        lines.extend(json.dumps(r) for r in baseline_records(task, test, train_instances=train))
    database = Database(db)
    user = authenticate(database, create_token(database, "demo"))
    entry = accept(database, load_settings(database), user, track_name="usb", board="all",
                   model="demo: baselines fitted on train",
                   card={"method": "Lead-k and position prior fitted on the train split"},
                   uploads=[Upload("demo.jsonl", ("\n".join(lines) + "\n").encode())])
    Worker(database).drain()
    status = public_view(database, entry["id"])["status"]
    database.dispose()
    return {**entry, "status": status}


def run_token(args) -> int:
    if args.revoke:
        if args.admin:
            raise SumbenchError("--revoke and --admin do not go together")
        count = revoke_tokens(_database(args.db), args.user)
        print(f"revoked {count} token(s) of {args.user}", file=sys.stderr)
        return 0
    token = create_token(_database(args.db), args.user, admin=args.admin)
    print(f"token for {args.user}{' (admin)' if args.admin else ''}; it is shown once:",
          file=sys.stderr)
    print(token)
    return 0


def run_export(args) -> int:
    print_json(export_site(_database(args.db), args.out))
    return 0


def _openapi_args(parser) -> None:
    add_option(parser, "markdown")


def run_openapi(args) -> int:
    document = openapi_document()
    if args.markdown:
        print(api_markdown(document), end="")
    else:
        print(json.dumps(document, indent=1, sort_keys=True))
    return 0


def run_reveal(args) -> int:
    database = _database(args.db)
    by = check_user_name(args.by)
    print_json(reveal(database, by))
    return 0


def run_rescore(args) -> int:
    database = _database(args.db)
    report = queue_rescore(database)
    if args.now:
        report["jobs_run"] = Worker(database).drain()
    print_json(report)
    return 0
