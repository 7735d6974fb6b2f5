"""`sumbench data build` (raw annotations -> task datasets), `sumbench data heuristic`
(heuristic EVEXT / FAC / FIX training labels from article-summary pairs) and `sumbench data
fetch`."""
from __future__ import annotations

import argparse
import sys

from benchmark.commands import command_help
from benchmark.commands.options import (
    CORRUPTIONS,
    HEURISTIC_EVIDENCE,
    HEURISTIC_TASKS,
    RenamedOption,
    add_option,
    given_or_default,
)
from tasks import parse_task_list
from tasks.plumbing.errors import SumbenchError
from tasks.usb.archive import fetch_archive
from tasks.usb.derive import build_task_datasets
from tasks.usb.heuristic import HeuristicSpec, build_heuristic_datasets
from tasks.usb.layout import SPLITS
from trainers.models.heuristic_models import model_heuristics


def register(subparsers) -> None:
    parser = subparsers.add_parser("data", help=command_help("data"))
    commands = parser.add_subparsers(dest="data_command", metavar="ACTION")
    commands.required = True
    _build_parser(commands)
    _fetch_parser(commands)
    _heuristic_parser(commands)


def _build_parser(commands) -> None:
    build = commands.add_parser(
        "build", help="derive the eight task datasets from raw USB annotations",
        description="Derive OUT/<variant>/<task>/<split>.jsonl from RAW/annotations and "
                    "RAW/splits exactly as the official release does. OUT is written all at "
                    "once (nothing on error) and also gets build_info.json (record counts, "
                    "sha256 of every file, provenance). An existing non-empty OUT is only "
                    "replaced when it is an earlier build.")
    add_option(build, "raw", required=True)
    add_option(build, "out_dir", required=True)
    add_option(build, "variants")
    build.add_argument("--strict", action="store_true",
                       help="make duplicate documents in a split and documents shared by two "
                            "splits (train/test leaks) an error instead of a warning")
    build.set_defaults(handler=run_build)


def _fetch_parser(commands) -> None:
    fetch = commands.add_parser(
        "fetch", help="download and cache the processed USB release from the Hugging Face hub",
        description="Download processed_data.tar.gz of the dataset kundank/usb, extract it "
                    "safely into the cache and print the data folder (usable as --data). The "
                    "cache is keyed by revision name: a branch (\"main\", the default) is "
                    "cached as first downloaded until --refresh, which downloads again, "
                    "compares the sha256 with the recorded one and extracts again only when "
                    "the archive changed. Pin a commit with --revision for fixed data.")
    fetch.add_argument("--cache-dir", metavar="DIR",
                       help="cache folder (default: $SUMBENCH_CACHE/usb or ~/.cache/sumbench/usb)")
    fetch.add_argument("--cache", dest="cache_dir", action=RenamedOption, new="--cache-dir",
                       help=argparse.SUPPRESS)
    add_option(fetch, "revision")
    fetch.add_argument("--refresh", "--force", dest="refresh", action="store_true",
                       help="download again even if cached; extract again if the sha256 "
                            "changed (says so on stderr)")
    fetch.set_defaults(handler=run_fetch)


def _heuristic_parser(commands) -> None:
    heuristic = commands.add_parser(
        "heuristic", help="heuristic EVEXT, FAC and FIX training data, without human labels",
        description="Derive the training (and validation) data of evidence extraction, "
                    "factuality classification and fixing factuality from (article, summary) "
                    "pairs only: evidence by ROUGE-L, name/number overlap or an alignment "
                    "model; FactCC-style corruptions or model infilling. Same record shapes as "
                    "`data build`; OUT/build_info.json holds counts, the agreement of the "
                    "heuristic evidence with the human one, corruption types and provenance. "
                    "Defaults: --tasks of those three, --evidence rougeL, --corruption factcc.")
    add_option(heuristic, "raw", required=True)
    add_option(heuristic, "out_dir", required=True)
    add_option(heuristic, "tasks")
    add_option(heuristic, "evidence")
    add_option(heuristic, "corruption")
    add_option(heuristic, "superpal_model")
    add_option(heuristic, "infill_model")
    heuristic.add_argument("--splits", default="train,validation",
                           help="splits to write (default train,validation)")
    add_option(heuristic, "seed")
    heuristic.set_defaults(handler=run_heuristic)


def format_counts(counts: dict[str, dict[str, dict[str, int]]]) -> str:
    """A small table: one row per variant and task, one column per split."""
    width = max([len("variant/task")] + [len(f"{v}/{t}") for v in counts for t in counts[v]])
    rows = [f"{'variant/task':<{width}}  " + "  ".join(f"{s:>10}" for s in SPLITS)]
    for variant, by_task in counts.items():
        for task, by_split in by_task.items():
            cells = "  ".join(f"{by_split.get(s, 0):>10}" for s in SPLITS)
            rows.append(f"{variant + '/' + task:<{width}}  {cells}")
    return "\n".join(rows)


def run_build(args: argparse.Namespace) -> int:
    counts = build_task_datasets(args.raw, args.out, args.variants, strict=args.strict)
    print(format_counts(counts))
    n_files = sum(len(by_split) for by_task in counts.values() for by_split in by_task.values())
    print(f"wrote {n_files} files for {len(counts)} variant(s) to {args.out}", file=sys.stderr)
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    result = fetch_archive(cache_dir=args.cache_dir, revision=args.revision,
                           refresh=args.refresh)
    print(f"sumbench data fetch: {result.message()}", file=sys.stderr)
    print(result.data_dir)
    return 0


def one_of(value: str, choices: tuple[str, ...], option: str) -> str:
    """`value` when it is one of `choices` (this command takes one method, not a list)."""

    if value not in choices:
        raise SumbenchError(f"{option} takes one of {', '.join(choices)}; got {value!r}")
    return value


def run_heuristic(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    splits = tuple(part.strip() for part in args.splits.split(",") if part.strip())
    if not splits or any(split not in SPLITS for split in splits):
        raise SumbenchError(f"--splits takes {', '.join(SPLITS)}; got {args.splits!r}")
    if not Path(args.raw).is_dir():
        raise SumbenchError(f"{args.raw}: no such raw folder (--raw)")
    evidence = one_of(args.evidence or "rougeL", HEURISTIC_EVIDENCE, "--evidence")
    corruption = one_of(args.corruption or "factcc", CORRUPTIONS, "--corruption")
    spec = HeuristicSpec(evidence, corruption, given_or_default(args, "seed"),
                         parse_task_list(args.tasks or list(HEURISTIC_TASKS)), splits)
    functions = model_heuristics(evidence, corruption, args.superpal_model, args.infill_model)
    report = build_heuristic_datasets(args.raw, args.out, spec, **functions)
    print(json.dumps({key: report[key] for key in (
        "records", "evidence_agreement_with_human", "corruption_types",
        "corruption_agreement_with_human")}, indent=1))
    return 0
