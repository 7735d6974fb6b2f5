"""`sumbench leaderboard init`, `token`, `export`, `rescore`, `reveal` and `openapi`: the
commands of a board's host, which write or read its database (their options are declared in
benchmark.commands.leaderboard)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmark.commands.leaderboard import DEMO_DOCS
from benchmark.commands.leaderboard_client import print_json
from benchmark.commands.leaderboard_serve import _database
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
    units: dict[str, dict[str, str]] = {}
    for name, kind, path in args.pyramid_units:
        units.setdefault(name, {})[kind] = path
    report = initialise(args.db, gold=gold, pyramids=args.pyramids or [], pyramid_units=units,
                        settings=settings, evaluators=args.evaluator,
                        computed_rows=not args.no_computed_rows, score=not args.no_score,
                        gold_visibility=visibility, require_visibility=True)
    if args.demo:
        report["demo_submission"] = submit_demo(args.db, gold)
    print_json(report)
    return 0


def demo_folder(db: str) -> Path:
    """`<database file stem>-demo/` beside a SQLite file (the working folder otherwise)."""
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
