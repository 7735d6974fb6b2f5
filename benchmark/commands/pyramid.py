"""`sumbench pyramid`: Pyramid scores of every system in a REALSumm/PyrXSum-style folder.

    sumbench pyramid --pyramid DIR --units scus|stus|sentences
                     --presence human|lexical|nli|seq2seq|causal-lm|chat
                     [--model PATH] [--threshold T] [--nli-mode MODE]
                     [--entailment-label NAME] [--batch-size N]
                     [--device DEV] [--cache FILE] [--systems S ...]
                     [--score-split all|train|validation|test] [--out FILE]

Prints `{system: score}` (JSON) to stdout. `--out FILE` also writes `{"scores": {system:
score}, "per_example": {system: [score per example]}, "ids" (the scored examples),
"calibration", "config", "provenance"}`. `--score-split` scores only the examples of one id
split (60/20/20, as the presence_detection task and the calibration split them; default all).
`--presence human` uses the human SCU labels (only with `--units scus`). `lexical` needs no
model: its threshold is `--threshold`, or by default the one that maximises F1 against the
human SCU labels of the folder's train split (all labelled systems; the value is reported on
stderr, and "calibration" records split, n_examples, example_ids and threshold). Scores of
those train examples are not held out (meta-evaluating them against the same human labels
flatters the lexical backend): a note on stderr says so, and `--score-split validation` or
`test` scores held-out examples only. `nli`, `seq2seq`, `causal-lm` (zero-shot) need `--model`
(a folder or hub id); `chat` needs `--model` (a model name at OPENAI_BASE_URL). Which options
each backend takes: leaderboard.evaluators.pyramid.scoring.BACKEND_OPTIONS.
"""
from __future__ import annotations

import json
import sys

from benchmark.commands import command_help, probability
from benchmark.commands.options import add_option
from benchmark.commands.presence_options import PresenceConfig, add_presence_options
from leaderboard.evaluators.pyramid.lite_pyramid import mixed_units, read_unit_weights, scu_examples
from leaderboard.evaluators.pyramid.scoring import (
    check_presence_options,
    dataset_split,
    evaluate_dataset,
    lexical_calibration,
)
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_text, write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.pyramid_data import UNIT_KINDS, load_pyramid_dataset
from tasks.units.unit_files import read_example_units

MIX_BY_EXAMPLE = "mix-by-example"
UNIT_CHOICES = (*UNIT_KINDS, MIX_BY_EXAMPLE, "file")  # scus, stus, sentences, ...
SCORE_SPLITS = ("all", "train", "validation", "test")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "pyramid", help=command_help("pyramid"),
        description="Pyramid score per system: mean over examples of the mean unit presence.")
    add_option(parser, "pyramid", required=True, renamed_from=("--data",))
    parser.add_argument("--units", required=True, choices=UNIT_CHOICES,
                        help="reference units: human SCUs, automatic STUs, sentences, "
                             "SCUs for some examples and STUs for the rest (mix-by-example; "
                             "not Lite²·⁵'s mix by sentence: sumbench stus --scus), or "
                             "--units-file (file)")
    parser.add_argument("--scu-share", type=probability, default=0.5, metavar="P",
                        help="mix-by-example: share of examples that keep their SCUs, those "
                             "whose STUs match their SCUs worst (default 0.5)")
    parser.add_argument("--scu-ids", metavar="FILE",
                        help="mix-by-example: file of example ids (one per line) that keep "
                             "their SCUs")
    add_option(parser, "units_file")  # --units file: aligned with ids.txt (e.g.
    #                                    Lite²Pyramid's STUs_SCUs_percentage50.txt)
    parser.add_argument("--weights", metavar="FILE",
                        help="unit weights, TAB-separated integers per example, aligned with "
                             "the units (Lite²Pyramid's --weight)")
    parser.add_argument("--fractional-weights", action="store_true",
                        help="--weights may hold numbers other than integers (Lite²Pyramid "
                             "reads integers only)")
    add_presence_options(parser)
    add_option(parser, "systems")
    parser.add_argument("--score-split", choices=SCORE_SPLITS, default="all",
                        help="score only the examples of this id split (60/20/20; the lexical "
                             "threshold is calibrated on train); default: all examples")
    add_option(parser, "out_file")
    parser.set_defaults(handler=run, out_inputs={
        "pyramid": "--pyramid folder", "scu_ids": "--scu-ids file",
        "units_file": "--units-file file", "weights": "--weights file",
        "model": "--model folder", "cache": "--cache file"})


def resolve_threshold(args, options: dict) -> dict | None:
    """Fill in the calibrated lexical threshold when none is given; the calibration record
    (split, seed, n_examples, example_ids, threshold), or None."""
    if args.presence != "lexical" or "threshold" in options:
        return None
    calibration = lexical_calibration(args.pyramid)
    options["threshold"] = calibration["threshold"]
    print(f"sumbench pyramid: lexical threshold {options['threshold']!r} (F1-optimal on the "
          f"human SCU labels of the {calibration['split']} split, "
          f"{calibration['n_examples']} examples)", file=sys.stderr)
    return calibration


def note_calibration_overlap(calibration: dict | None, scored_ids) -> int:
    """How many scored examples the threshold was calibrated on (a note on stderr if any)."""
    if calibration is None:
        return 0
    overlap = len(set(calibration["example_ids"]) & set(scored_ids))
    if overlap:
        print(f"sumbench pyramid: note: {overlap} of the {len(scored_ids)} scored examples are "
              f"the {calibration['split']} examples the lexical threshold was calibrated on, "
              f"so their scores are not held out; --score-split validation or test scores "
              f"held-out examples only", file=sys.stderr)
    return overlap


def load_scored_dataset(args):
    """The folder's examples of --score-split (with labels for --presence human)."""
    human = args.presence == "human"
    kinds = {MIX_BY_EXAMPLE: ("scus", "stus"), "file": ()}.get(args.units, (args.units,))
    dataset = load_pyramid_dataset(args.pyramid, systems=args.systems, unit_kinds=kinds,
                                   labels=human, require_labels=human)
    dataset, chosen = with_extra_units(dataset, args)
    scored = dataset_split(dataset, args.score_split)
    if not scored.ids:
        raise SumbenchError(f"{args.pyramid}: no examples in the {args.score_split} split")
    return scored, chosen


def with_extra_units(dataset, args) -> tuple:
    """(the dataset with `mix-by-example` or `file` units added when asked for, what was
    chosen: {"scu_examples": [...]} for a mix by example)."""
    import dataclasses

    if args.units == "file":
        if not args.units_file:
            raise SumbenchError("--units file needs --units-file FILE")
        units = read_example_units(args.units_file, len(dataset.ids))
        return dataclasses.replace(dataset, units={**dataset.units, "file": units}), {}
    if args.units != MIX_BY_EXAMPLE:
        return dataset, {}
    chosen = None
    if args.scu_ids:
        chosen = [line.strip() for line in read_text(args.scu_ids, what="id list")
                  .splitlines() if line.strip()]
    keep = scu_examples(dataset.ids, dataset.units["scus"], dataset.units["stus"],
                        args.scu_share, chosen)
    units = mixed_units(dataset.ids, dataset.units["scus"], dataset.units["stus"], keep)
    return (dataclasses.replace(dataset, units={**dataset.units, MIX_BY_EXAMPLE: units}),
            {"scu_examples": sorted(keep), "scu_share": None if chosen else args.scu_share})


def run(args) -> int:
    options = PresenceConfig.of(args).options()
    check_presence_options(args.presence, args.units, options)  # fail before loading data
    dataset, chosen = load_scored_dataset(args)
    calibration = resolve_threshold(args, options)
    overlap = note_calibration_overlap(calibration, dataset.ids)
    weights = None
    if args.weights:
        weights = read_unit_weights(args.weights, dataset.units[args.units],
                                    fractional=args.fractional_weights)
    results = evaluate_dataset(dataset, args.units, args.presence, weights=weights, **options)
    scores = {system: result.score for system, result in results.items()}
    print(json.dumps(scores, indent=1))
    if args.out:
        # one backend serves every system; this is its state at the end (its fast paths are
        # checked on the first system)
        backend = list(results.values())[-1].presence if results else {}
        config = {"pyramid": args.pyramid, "units": args.units, "presence": args.presence,
                  "presence_backend": backend,
                  "model": args.model, "options": options, "systems": list(results),
                  "score_split": args.score_split, "weights": args.weights,
                  "units_file": args.units_file, **chosen}
        if args.presence == "lexical":
            config["threshold_source"] = ("given" if calibration is None else
                                          f"calibrated on the {calibration['split']} split's "
                                          f"human SCU labels")
        if calibration is not None:
            calibration = {**calibration, "scored_examples_used": overlap}
        write_json(args.out, {"scores": scores,
                              "per_example": {s: list(r.per_example) for s, r in results.items()},
                              "ids": list(dataset.ids), "calibration": calibration,
                              "config": config, "provenance": provenance(config)})
    return 0
