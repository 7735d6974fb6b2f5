"""`sumbench qapyramid presence-eval`: how well a presence backend's present/absent decisions
agree with human labels (QAPyramid's presence-detection table, its Table 3).

    sumbench qapyramid presence-eval (--pyramid DIR | --dataset FILE
                                      | --judgments QA_presence.json --summaries FILE)
        [--unit-kind qa|statement] [--split all|train|validation|test] [--systems S ...]
        --presence BACKEND [--model M ...] [--threshold T] [--ties absent|present]
        [--out FILE]

The pairs are the PRESENCE task's instances (tasks.qapyramid.presence_detection): every
labelled (example, system, unit) of a REALSumm/PyrXSum folder's SCUs (`--pyramid`), or of a
QAPyramid dataset's QAs (`--dataset`: its `QA_labels` and `system_outputs`). Or the
crowd judgments of `QA_presence.json` with the system summaries beside them (`--summaries`,
JSON Lines {system, example_id, summary}; the release does not ship them): a QA is present by
strict majority of its votes, ties absent (`--ties present` counts them present), as
`sumbench qapyramid human` decides. The
backend judges each (summary, unit) pair; its label is the decision (the lexical threshold,
an NLI mode's label, `--threshold` over the probability) and its probability ranks the pairs
for AUC. Printed and written: micro F1 over both classes (the paper's metric, which for one
decision per pair is accuracy), precision, recall and F1 of "present", balanced accuracy,
AUC, counts, overall and per system (`tasks.metrics.classification.decision_scores`).
`--out` also records every pair's probability and decision, the backend and provenance.
"""
from __future__ import annotations

import sys

from benchmark.commands.options import add_option
from benchmark.commands.presence_options import add_presence_options
from benchmark.commands.qapyramid_auto import check_text_presence, presence_backend
from benchmark.commands.summaries_file import read_summaries
from leaderboard.evaluators.pyramid.scoring import describe_presence
from leaderboard.evaluators.qapyramid.scoring import majority_vote
from tasks.metrics.classification import decision_scores
from tasks.plumbing.errors import DataError, SumbenchError, check_choice, check_choices
from tasks.plumbing.io import write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.dataset import in_split, load_examples
from tasks.qapyramid.judgments import load_qa_judgments
from tasks.qapyramid.presence_detection import (
    presence_instance,
    pyramid_instances,
    qapyramid_instances,
)
from tasks.qapyramid.pyramid_data import load_pyramid_dataset
from tasks.qapyramid.units import unit_text

SPLITS = ("all", "train", "validation", "test")
#: the figures of the printed table, in order
FIGURES = ("micro_f1", "f1", "precision", "recall", "balanced_accuracy", "auc", "n",
           "positives")


def register(commands) -> None:
    parser = commands.add_parser(
        "presence-eval", help="a presence backend's decisions against human labels (micro F1)")
    for kind in ("pyramid", "dataset", "judgments", "summaries", "ties", "split", "unit_kind",
                 "systems", "base_url", "prompt_style", "out_file"):
        add_option(parser, kind)
    add_presence_options(parser)
    parser.set_defaults(handler=run_presence_eval, out_inputs={
        "pyramid": "--pyramid folder", "dataset": "--dataset file",
        "judgments": "--judgments file", "summaries": "--summaries file"})


def judged_instances(args) -> list[dict]:
    """PRESENCE instances of QA_presence.json's items whose summary --summaries holds, in
    the split, labelled by strict majority (ties by --ties)."""
    summaries = read_summaries(args.summaries)
    instances, positions = [], {}
    for item in load_qa_judgments(args.judgments):
        key = (item.system, item.example_id)
        index = positions[key] = positions.get(key, -1) + 1
        if key not in summaries or not in_split(item.example_id, split_of(args)):
            continue
        label = majority_vote(item.values, args.ties == "present")
        unit = unit_text(args.unit_kind, item.question, item.answer)
        instances.append(presence_instance(item.example_id, item.system, index,
                                           args.unit_kind, summaries[key], unit, label))
    if not instances:
        raise DataError("no judged QA has a summary in --summaries (keys: system, "
                        "example_id)", path=args.summaries)
    return instances


def presence_pairs(args) -> list[dict]:
    """The labelled instances of the source and split, those of --systems when given."""
    split = split_of(args)
    if args.judgments:
        instances = judged_instances(args)
    elif args.pyramid:
        instances = pyramid_instances(load_pyramid_dataset(args.pyramid), split)
    else:
        instances = qapyramid_instances(load_examples(args.dataset), split, args.unit_kind)
    known = list(dict.fromkeys(instance["system"] for instance in instances))
    if not known:
        raise DataError(f"no labelled pairs in the {split} split",
                        path=args.pyramid or args.dataset or args.judgments)
    if args.systems:
        check_choices(list(args.systems), known, "system")
        instances = [item for item in instances if item["system"] in set(args.systems)]
    return instances


def judged(backend, instances: list[dict]) -> list[dict]:
    """Each pair's label, the backend's probability and decision, with its system and id."""
    pairs = [(item["summary"], item["unit"], item["example_id"]) for item in instances]
    return [{"id": item["id"], "system": item["system"], "label": int(item["label"]),
             "probability": float(result.probability), "decision": int(result.label)}
            for item, result in zip(instances, backend.score_iter(pairs))]


def presence_report(rows: list[dict]) -> dict:
    """`decision_scores` over all pairs and per system."""
    def scores(chosen: list[dict]) -> dict:
        return decision_scores([row["label"] for row in chosen],
                               [row["decision"] for row in chosen],
                               [row["probability"] for row in chosen])

    systems = list(dict.fromkeys(row["system"] for row in rows))
    return {"all": scores(rows),
            "systems": {system: scores([row for row in rows if row["system"] == system])
                        for system in systems}}


def format_report(report: dict) -> str:
    lines = ["\t".join(("systems", *FIGURES))]
    for name, scores in (("all", report["all"]), *report["systems"].items()):
        cells = [name] + ["n/a" if scores[key] is None else
                          (str(scores[key]) if isinstance(scores[key], int)
                           else f"{scores[key]:.4f}") for key in FIGURES]
        lines.append("\t".join(cells))
    return "\n".join(lines)


def split_of(args) -> str:
    """--split, all examples when not given (the PRESENCE task's 60/20/20 split by id)."""
    split = args.split or "all"
    check_choice(split, SPLITS, "split")
    return split


def check_source(args) -> None:
    """One source: --pyramid, --dataset, or --judgments with --summaries."""
    given = [flag for flag, value in (("--pyramid", args.pyramid), ("--dataset", args.dataset),
                                      ("--judgments", args.judgments)) if value]
    if len(given) != 1:
        raise SumbenchError("give one source of pairs: --pyramid DIR, --dataset FILE, or "
                            "--judgments FILE with --summaries FILE")
    if bool(args.judgments) != bool(args.summaries):
        raise SumbenchError("--judgments takes --summaries (the system summaries, JSON Lines "
                            "{system, example_id, summary}), and --summaries goes with it")
    if args.pyramid and args.unit_kind != "qa":
        raise SumbenchError("--unit-kind is a QAPyramid setting; a Pyramid folder has SCUs")


def run_presence_eval(args) -> int:
    check_text_presence(args)
    check_source(args)
    instances = presence_pairs(args)
    backend = presence_backend(args)
    rows = judged(backend, instances)
    report = presence_report(rows)
    print(format_report(report))
    if args.out:
        config = {"pyramid": args.pyramid, "dataset": args.dataset,
                  "judgments": args.judgments, "summaries": args.summaries, "ties": args.ties,
                  "split": split_of(args),
                  "unit_kind": "scu" if args.pyramid else args.unit_kind,
                  "systems": list(report["systems"]), "presence": args.presence,
                  "presence_backend": describe_presence(backend)}
        write_json(args.out, {**report, "pairs": rows, "config": config,
                              "provenance": provenance(config)})
        print(f"presence-eval: {args.out}", file=sys.stderr)
    return 0
