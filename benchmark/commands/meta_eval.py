"""`sumbench meta-eval`: correlations between a metric and human scores on a Pyramid folder.

    sumbench meta-eval --pyramid DIR --metric rouge1_recall|rouge2_recall|rougeL_recall
                                              |questeval|FILE.json
                       [--metric-option KEY=VALUE ...]
                       [--human pyramid|FILE.json] [--groups FILE.json] [--systems S ...]
                       [--methods kendall pearson spearman] [--undefined-rule zero|lite-pyramid]
                       [--out FILE]

`--metric` is a registered evaluator (leaderboard.evaluators.registry): a built-in ROUGE
recall (rouge-score with stemming, summary vs reference) or ROUGE-1.5.5 score (rouge155-1-f,
...), `questeval` (each summary against its document, `documents.txt`; `--metric-option
KEY=VALUE` sets its options, e.g. protocol=paper, answers=FILE, question_generator=DIR), an
installed package's evaluator; or a JSON score file; `--human pyramid` (default) is the SCU Pyramid
score from the human labels.
Score files: {system: [score per example in ids.txt order]} or {system: {example_id: score}}.
`--groups`: {group: [systems]}; "all" (every system) is always added.
`--undefined-rule` says how summary level treats an example whose scores are constant on a
side: "zero" (default; the correlation is undefined and counts as 0) or "lite-pyramid"
(Lite²/³Pyramid's evaluation: 1e-10 added to the first score of a constant vector).
Prints the result as JSON ({group: {"systems", "system": {method: r}, "summary": {...}}},
undefined values as null) to stdout and a readable table to stderr. `--out` also writes the
per-system mean scores, the configuration and provenance.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from benchmark.commands import command_help, key_value
from benchmark.commands.options import add_option
from leaderboard.evaluators.pyramid.scoring import pyramid_scores
from leaderboard.evaluators.registry import evaluator_of, load_evaluators
from leaderboard.meta_eval import format_table, load_groups, load_scores, meta_evaluate
from tasks.metrics.correlation import UNDEFINED_RULES
from tasks.metrics.evaluators import evaluator_settings, score_summaries
from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

METHOD_CHOICES = ("kendall", "pearson", "spearman")



def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "meta-eval", help=command_help("meta-eval"),
        description="Kendall tau-b / Pearson / Spearman between metric and human scores.")
    add_option(parser, "pyramid", required=True, renamed_from=("--data",))
    parser.add_argument("--metric", required=True,
                        help="rouge1_recall, rouge2_recall, rougeL_recall, questeval, an "
                             "installed evaluator, or a JSON score file")
    parser.add_argument("--metric-option", action="append", default=[], metavar="KEY=VALUE",
                        type=key_value, help="an option of the --metric evaluator "
                                              "(repeatable)")
    parser.add_argument("--human", default="pyramid",
                        help="'pyramid' (SCU labels, default) or a JSON score file")
    parser.add_argument("--groups", help="JSON {group: [systems]} evaluated separately")
    add_option(parser, "systems")
    parser.add_argument("--methods", nargs="+", choices=METHOD_CHOICES,
                        default=list(METHOD_CHOICES), help="correlation methods")
    parser.add_argument("--undefined-rule", choices=UNDEFINED_RULES, default="zero",
                        help="summary level, constant scores: count the example as 0 "
                             "(zero, default) or perturb as Lite²/³Pyramid (lite-pyramid)")
    add_option(parser, "out_file")
    parser.set_defaults(handler=run, out_inputs={"pyramid": "--pyramid folder",
                                                 "metric": "--metric file",
                                                 "human": "--human file",
                                                 "groups": "--groups file"})


def _json_ready(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def metric_scores(name: str, dataset, options: dict | None = None
                  ) -> tuple[dict[str, list[float]], dict | None]:
    """Per-example metric scores and the evaluator's settings (None for a score file): a
    registered evaluator (a built-in ROUGE recall, QuestEval, or one of an installed
    package) with its options, or a JSON score file."""
    registry = load_evaluators()
    if name in RECALL_METRICS and not options:  # the references' tokens once for all systems
        return (rouge_recall_by_system(dataset.summaries, dataset.references, [name])[name],
                evaluator_settings(registry.get(name)))
    if name in registry:
        evaluator = evaluator_of(name, options)
        scores = {system: score_summaries(evaluator, texts, dataset.references,
                                          dataset.documents, name)
                  for system, texts in dataset.summaries.items()}
        return scores, evaluator_settings(evaluator)
    if not Path(name).is_file():
        raise SumbenchError(f"--metric {name!r} is neither an evaluator "
                            f"({', '.join(registry.names())}) nor an existing JSON file")
    if options:
        raise SumbenchError("--metric-option sets an evaluator's options; a score file has none")
    return load_scores(name, dataset.ids, dataset.systems), None


def human_scores(name: str, dataset) -> dict[str, list[float]]:
    """Per-example human scores: the SCU Pyramid from labels, or a JSON score file."""
    if name == "pyramid":
        return {system: pyramid_scores(dataset.labels[system]) for system in dataset.systems}
    if not Path(name).is_file():
        raise SumbenchError(f"--human {name!r} is neither 'pyramid' nor an existing JSON file")
    return load_scores(name, dataset.ids, dataset.systems)


def run(args) -> int:
    import numpy as np

    pyramid = args.human == "pyramid"
    dataset = load_pyramid_dataset(args.pyramid, systems=args.systems, labels=pyramid,
                                   require_labels=pyramid)
    groups = load_groups(args.groups, dataset.systems) if args.groups else None
    human = human_scores(args.human, dataset)
    options = dict(args.metric_option)
    metric, settings = metric_scores(args.metric, dataset, options)
    result = meta_evaluate(metric, human, groups, args.methods, args.undefined_rule)
    print(json.dumps(_json_ready(result), indent=1))
    print(format_table(result), file=sys.stderr)
    if args.out:
        config = {"pyramid": args.pyramid, "metric": args.metric,
                  **({"metric_settings": settings} if settings else {}), "human": args.human,
                  "groups": args.groups, "systems": list(dataset.systems),
                  "methods": list(args.methods), "undefined_rule": args.undefined_rule}
        means = {side: {s: float(np.mean(v)) for s, v in scores.items()}
                 for side, scores in (("metric", metric), ("human", human))}
        write_json(args.out, {"correlations": _json_ready(result), "system_means": means,
                              "config": config, "provenance": provenance(config)})
    return 0
