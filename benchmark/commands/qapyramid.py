"""`sumbench qapyramid`: human QAPyramid scores, nQAPyramid normalization, and automatic
QAPyramid (`semi-auto`, `auto`: see benchmark/commands/qapyramid_auto.py), and how well a
presence backend agrees with human labels (`presence-eval`: benchmark/commands/presence_eval.py).

    sumbench qapyramid human --judgments QA_presence.json [--out FILE]
        Prints {"systems": {system: score}, "krippendorff_alpha": a, "n_units": ...,
        "n_qa_items": ..., "n_examples": ..., "votes_per_item": ...}; --out also writes
        "per_example" ({system: {example_id: score}}) and provenance.

    sumbench qapyramid normalize --scores FILE --summaries FILE --references FILE
                                 [--alpha A | --calibrate-alpha] [--out FILE]
        --scores: JSON {system: {example_id: QAPyramid}}, or the --out file of `human`
                  (its "per_example" is used).
        --summaries: JSONL, one {"system": ..., "example_id": ..., "summary": ...} per line.
        --references: JSONL, one {"example_id": ..., "reference": ...} per line.
        Every scored (system, example) needs a summary and a reference; extra lines are
        ignored. An empty summary has 0 words (p_r = p_l = 1). --calibrate-alpha picks alpha in
        1..10 over all scored summaries (see leaderboard.evaluators.qapyramid.penalties).
        Prints {"alpha", "calibration", "systems": {system: {QAPyramid, nQAPyramid, p_r, p_l}},
        "n_examples"}; systems scored on different examples are warned about (both commands);
        --out also writes "per_example" and provenance.
"""
from __future__ import annotations

import json
import math
import sys

from benchmark.commands import command_help
from benchmark.commands.options import add_option
from benchmark.commands.presence_eval import register as register_presence_eval
from benchmark.commands.qapyramid_auto import register_subcommands
from benchmark.commands.summaries_file import read_references, read_summaries
from leaderboard.evaluators.qapyramid.penalties import (
    DEFAULT_ALPHA,
    calibrate_alpha,
    normalize,
    with_alpha,
)
from leaderboard.evaluators.qapyramid.scoring import human_qapyramid, uneven_coverage
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import read_json, write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.judgments import load_qa_judgments


def register(subparsers) -> None:
    parser = subparsers.add_parser("qapyramid", help=command_help("qapyramid"))
    commands = parser.add_subparsers(dest="qapyramid_command", metavar="SUBCOMMAND")
    commands.required = True
    human = commands.add_parser("human", help="QAPyramid from crowd judgments (majority vote) "
                                "and Krippendorff's alpha")
    add_option(human, "judgments", required=True)
    add_option(human, "out_file")
    add_option(human, "ties")
    human.set_defaults(handler=run_human, out_inputs={"judgments": "--judgments file"})
    norm = commands.add_parser("normalize", help="nQAPyramid: repetition and length penalties",
                               description="nQAPyramid: repetition and length penalties. "
                                           "--summaries: JSON Lines {system, example_id, "
                                           "summary}; --scores: JSON {system: {example_id: "
                                           "score}}.")
    norm.add_argument("--scores", required=True, help="JSON {system: {example_id: score}}")
    add_option(norm, "summaries", required=True)  # JSONL {system, example_id, summary}
    add_option(norm, "references", required=True)
    choice = norm.add_mutually_exclusive_group()
    add_option(choice, "alpha")
    choice.add_argument("--calibrate-alpha", action="store_true",
                        help="choose alpha in 1..10 (lowest |r| with effective length)")
    add_option(norm, "out_file")
    norm.set_defaults(handler=run_normalize, out_inputs={
        "scores": "--scores file", "summaries": "--summaries file",
        "references": "--references file"})
    register_subcommands(commands)
    register_presence_eval(commands)


def warn_uneven(per_example, path: str) -> None:
    note = uneven_coverage(per_example)
    if note:
        print(f"warning: {path}: {note}", file=sys.stderr)


def run_human(args) -> int:
    report = human_qapyramid(load_qa_judgments(args.judgments),
                             ties_present=args.ties == "present")
    warn_uneven(report["per_example"], args.judgments)
    if math.isnan(report["krippendorff_alpha"]):
        report["krippendorff_alpha"] = None  # undefined: no pairable votes or no variation
    summary = {key: value for key, value in report.items() if key != "per_example"}
    print(json.dumps(summary, indent=1))
    if args.out:
        write_json(args.out, {**report, "provenance": provenance(
            {"judgments": args.judgments, "ties": args.ties})})
    return 0


def read_scores(path: str) -> dict[str, dict[str, float]]:
    """{system: {example_id: score}} from a JSON file (or a `human --out` report)."""
    data = read_json(path, what="scores file")
    if isinstance(data, dict) and isinstance(data.get("per_example"), dict):
        data = data["per_example"]
    if not isinstance(data, dict) or not data:
        raise DataError("expected a JSON object {system: {example_id: score}}", path=path)
    for system, examples in data.items():
        if not isinstance(examples, dict) or not examples:
            raise DataError("expected a non-empty {example_id: score} object", path=path,
                            field=system)
        for example, score in examples.items():
            if isinstance(score, bool) or not isinstance(score, (int, float)) \
                    or not 0.0 <= score <= 1.0:
                raise DataError(f"expected a score in [0, 1], got {json.dumps(score)}",
                                path=path, field=f"{system}.{example}")
    return data


def _check_coverage(scores, summaries, references, args) -> None:
    for system, examples in scores.items():
        for example in examples:
            if (system, example) not in summaries:
                raise DataError(f"no summary for system {system!r}, example {example!r} "
                                f"(scored in {args.scores})", path=args.summaries,
                                field=f"{system}.{example}")
            if example not in references:
                raise DataError(f"no reference for example {example!r} (scored in "
                                f"{args.scores})", path=args.references, field=example)


def _calibrate(table):
    rows = [row for examples in table.values() for row in examples.values()]
    return calibrate_alpha([r["QAPyramid"] for r in rows], [r["words"] * r["p_r"] for r in rows],
                           [r["reference_words"] for r in rows])


def run_normalize(args) -> int:
    import numpy as np

    scores = read_scores(args.scores)
    summaries, references = read_summaries(args.summaries), read_references(args.references)
    _check_coverage(scores, summaries, references, args)
    warn_uneven(scores, args.scores)
    given = DEFAULT_ALPHA if args.alpha is None else args.alpha
    table = normalize(scores, summaries, references, alpha=given)
    calibration = _calibrate(table) if args.calibrate_alpha else None
    alpha = float(calibration.alpha) if calibration else given
    if calibration:
        table = with_alpha(table, alpha)
    systems = {system: {key: float(np.mean([row[key] for row in examples.values()]))
                        for key in ("QAPyramid", "nQAPyramid", "p_r", "p_l")}
               for system, examples in table.items()}
    report = {"alpha": alpha, "systems": systems,
              "n_examples": {system: len(examples) for system, examples in table.items()},
              "calibration": None if calibration is None else {
                  "alpha": float(calibration.alpha),
                  "correlations": {str(a): None if math.isnan(r) else r
                                   for a, r in calibration.correlations.items()}}}
    print(json.dumps(report, indent=1))
    if args.out:
        config = {k: getattr(args, k) for k in ("scores", "summaries", "references", "alpha",
                                                "calibrate_alpha")}
        write_json(args.out, {**report, "per_example": table, "provenance": provenance(config)})
    return 0
