"""`sumbench score PRED.jsonl [...] [--out FILE] [--bootstrap N] [--seed S] [--workers W]
[--data DIR [--variant V] [--split S]]`.

Prints `{task: {metric: value, ..., "headline", "n_records", "length_mismatches", "undefined"}}`
as JSON (indent 1, sorted keys); an undefined metric (e.g. AUC with one class) is null, listed
under "undefined" and explained on stderr. `--out` writes the same object atomically, plus the
provenance of the run under the top-level key "_provenance" (task names never start with "_", and
a task so named is refused). See tasks/scoring.py for the validation rules and the bootstrap.
Like the official script, `score` scores the references the prediction records hold; with
`--data` it first checks them against a task-datasets folder (tasks.gold): every record a gold
item of the split with the gold references, every gold item of a scored task covered.
"""
from __future__ import annotations

from pathlib import Path

from benchmark.commands import command_help
from benchmark.commands.options import add_option, given_or_default
from tasks.gold import GoldCheck
from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.chunk_workers import default_workers
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import file_sha256, json_text
from tasks.plumbing.provenance import PROVENANCE_KEY, provenance
from tasks.scoring import score_files


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "score", help=command_help("score"),
        description="Score JSON Lines prediction records in the official USB shape and print "
                    "the scores (--out: also to a file, with provenance). With --data (and "
                    "--variant, --split), records that are not gold items of that split or "
                    "whose references differ are refused, and so are tasks with gold items "
                    "left out. The number of --workers never changes the numbers.")
    parser.add_argument("paths", nargs="+", metavar="PRED.jsonl", help="prediction files")
    add_option(parser, "out_file")
    add_option(parser, "bootstrap")
    add_option(parser, "seed")
    add_option(parser, "rouge_aggregate")
    add_option(parser, "workers")
    add_option(parser, "data")
    add_option(parser, "variant")
    add_option(parser, "split")
    parser.set_defaults(handler=run, out_inputs={"paths": "prediction file",
                                                 "data": "--data folder"})


def run(args) -> int:
    seed = given_or_default(args, "seed")
    options = {"rouge_aggregate": args.rouge_aggregate, "rouge_seed": seed}
    if args.workers is None:
        args.workers = default_workers()
    gold = gold_check(args)
    results = score_files(args.paths, bootstrap=args.bootstrap, seed=seed,
                          workers=args.workers, options=options, gold=gold)
    if PROVENANCE_KEY in results:
        raise SumbenchError(f"a task named {PROVENANCE_KEY!r} clashes with the provenance key")
    text = json_text(results)
    print(text)
    if args.out:
        config = {"inputs": [{"path": str(Path(path).resolve()), "sha256": file_sha256(path)}
                             for path in args.paths],
                  "bootstrap": args.bootstrap, "workers": args.workers,
                  "rouge_aggregate": args.rouge_aggregate,
                  "checked_against": gold.provenance() if gold is not None else None}
        written = dict(results)
        written[PROVENANCE_KEY] = provenance(config=config, seeds={"bootstrap": seed,
                                                                   "rouge": seed})
        with atomic_path(args.out) as tmp:  # a file name that is not UTF-8 stays an escape
            Path(tmp).write_text(json_text(written) + "\n", encoding="utf-8",
                                 errors="backslashreplace")
    return 0


def gold_check(args):
    """The --data check of the arguments, or None; --variant or --split alone is refused."""
    if args.data is None:
        given = [option for option, value in (("--variant", args.variant),
                                              ("--split", args.split)) if value is not None]
        if given:
            raise SumbenchError(f"{' and '.join(given)} name what --data is checked against; "
                                f"give --data DIR")
        return None
    for option, value in (("--data", args.data), ("--variant", args.variant)):
        if value is not None and not value.strip():  # "" would mean "." and "all"
            raise SumbenchError(f"{option} is given empty")
    return GoldCheck(args.data, "all" if args.variant is None else args.variant,
                     args.split or "test")
