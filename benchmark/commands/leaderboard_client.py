"""`sumbench leaderboard submit`, `status` and `inputs`: the client side of a leaderboard (it
talks to a server over HTTP, never to its database, and loads no web framework, database
library or NLTK; the options are declared in benchmark.commands.leaderboard)."""
from __future__ import annotations

import json
import os
import sys

from benchmark.commands.options import given_or_default
from leaderboard import client
from leaderboard.intake.inputs import write_inputs
from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError


def print_json(obj) -> None:
    print(json.dumps(obj, indent=1, sort_keys=True, default=str))


def _card(args) -> dict:
    prefix = "card_"
    return {key[len(prefix):]: value for key, value in vars(args).items()
            if key.startswith(prefix) and value is not None}


def submit(args) -> int:
    if bool(args.paths) == bool(args.evaluate):
        raise SumbenchError("give prediction files (PATH ...) or --evaluate SOURCE, one of "
                            "the two")
    if not args.evaluate and (args.revision or args.profile):
        raise SumbenchError("--revision and --profile go with --evaluate")
    if args.evaluate and args.check:
        raise SumbenchError("--check validates files; a model to evaluate is checked by the "
                            "server when submitted")
    uploads = client.collect_uploads(args.paths) if args.paths else []
    track, variant = given_or_default(args, "track"), given_or_default(args, "variant")
    if args.check:
        manifest = client.fetch_manifest(args.server, track, variant) if args.server else None
        print_json(client.check(uploads, track, variant, manifest))
        return 0
    token = args.token or os.environ.get("SUMBENCH_LEADERBOARD_TOKEN")
    if not args.server or not token or not args.name:
        raise SumbenchError("submitting needs --server, --token (or SUMBENCH_LEADERBOARD_TOKEN) "
                            "and --name (use --check to validate only)")
    evaluate = {"evaluate": args.evaluate, "revision": args.revision,
                "profile": args.profile} if args.evaluate else None
    answer = client.submit(args.server, token, uploads, model=args.name, track=track,
                           variant=variant, card=_card(args), evaluate=evaluate)
    if answer.get("duplicate"):
        print(f"note: {answer.get('message', 'already submitted')}", file=sys.stderr)
    for name in answer.get("ignored", []):
        print(f"warning: archive member not read (only .jsonl files and results.json are): "
              f"{name}", file=sys.stderr)
    if args.wait and "id" in answer:
        answer = client.wait_for(args.server, answer["id"], token,
                                 timeout=86400.0 if args.evaluate else 600.0)
    print_json(answer)
    return 0 if answer.get("status") in ("queued", "scoring", "scored") else refused(
        answer, "the submission was not accepted")


def refused(answer: dict, what: str) -> int:
    """An error line on stderr, `what` went wrong and why, for an answer that is not accepted
    (the answer itself is on stdout); 2 for what the caller can fix (HTTP 4xx, a rejected
    submission), else 1."""
    code, state = answer.get("http_status"), answer.get("status")
    errors = answer.get("errors") or []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    where = ":".join(str(first[key]) for key in ("file", "line") if first.get(key))
    reason = (f"{where + ': ' if where else ''}{first.get('message')}" if first else
              _detail_text(answer.get("detail")) or answer.get("error") or state)
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    print(f"sumbench leaderboard: error: {what} (HTTP {code}"
          f"{f', status {state}' if state else ''}): {reason}{more}", file=sys.stderr)
    return 2 if state == "rejected" or (isinstance(code, int) and 400 <= code < 500) else 1


def _detail_text(detail) -> str | None:
    """A server's `detail`: a message, or (a request the framework refused) a list of
    {"loc", "msg"} whose first is named."""
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        where = ".".join(str(part) for part in detail[0].get("loc", ()))
        return f"{where}: {detail[0].get('msg')}" if where else str(detail[0].get("msg"))
    return None if detail is None else str(detail)


def status(args) -> int:
    answer = client.status(args.server, args.id,
                           args.token or os.environ.get("SUMBENCH_LEADERBOARD_TOKEN"))
    print_json(answer)
    return 0 if answer.get("http_status") == 200 else refused(
        answer, f"no status for submission {args.id}")


def inputs(args) -> int:
    """Write the boards' public inputs as OUT/<variant>/<task>/test.jsonl (what `sumbench
    predict --data OUT --variant V --split test` reads); prints the files written."""
    track = given_or_default(args, "track")
    variants = args.variants or client.boards(args.server, track)
    with atomic_directory(args.out) as staging:
        for variant in variants:
            answer = client.fetch_inputs(args.server, track, variant)
            for path in write_inputs(staging, answer):
                count = len(answer["parts"][path.parent.name])
                print(f"{variant}/{path.parent.name}/test.jsonl: {count} records",
                      file=sys.stderr)
    print(args.out)
    return 0
