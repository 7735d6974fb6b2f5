"""`sumbench meta-eval`: correlations between metrics and human scores, one table.

    sumbench meta-eval [--pyramid DIR] --metric METRIC [--metric METRIC ...]
                       [--metric-option [METRIC:]KEY=VALUE ...]
                       [--human pyramid|qapyramid:FILE|FILE.json] [--groups FILE.json]
                       [--systems S ...] [--methods kendall pearson spearman]
                       [--undefined-rule zero|lite-pyramid] [--table plain|markdown]
                       [--out FILE]

Each `--metric` (repeatable: several metrics give one table) is a registered evaluator
(leaderboard.evaluators.registry): a built-in ROUGE recall (rouge-score with stemming, summary
vs reference) or ROUGE-1.5.5 score (rouge155-1-f, ...), `questeval` (each summary against its
document, `documents.txt`), `meteor`, `chrf`, an installed package's evaluator; or a JSON
score file: {system: [score per example in ids.txt order]}, {system: {example_id: score}}, or
a per-system file {system: value} (one number per system: system level only, its summary
level is reported as not available).
`--metric-option KEY=VALUE` sets an option of the evaluator (with several evaluators among
the metrics, `METRIC:KEY=VALUE` says which one).
`--human`: `pyramid` (default) is the SCU Pyramid score from the folder's human labels;
`qapyramid:FILE` QAPyramid from crowd judgments (QA_presence.json: a QA is present by strict
majority of its votes, ties absent; present / all QAs per summary); or a JSON score file.
`--pyramid DIR` holds the summaries, references and ids; it may be left out with
`--human qapyramid:FILE` when every metric is a score file (the examples are the judgments').
`--groups`: {group: [systems]}; "all" (every system) is always added.
`--undefined-rule` says how summary level treats an example whose scores are constant on a
side: "zero" (default; the correlation is undefined and counts as 0) or "lite-pyramid"
(Lite²/³Pyramid's evaluation: 1e-10 added to the first score of a constant vector).
Prints the result as JSON to stdout (one metric: {group: {"systems", "system": {method: r},
"summary": {...}}}; several: {metric: that}; undefined values and levels as null) and a
readable table to stderr. `--out` also writes the per-system mean scores, each metric's
settings, the configuration and provenance.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
from pathlib import Path

from benchmark.commands import command_help, key_value, positive_int
from benchmark.commands.options import add_option
from benchmark.commands.out_file import check_out_file
from leaderboard.charts import forest_plot
from leaderboard.evaluators.pyramid.scoring import pyramid_scores
from leaderboard.evaluators.registry import evaluator_of, load_evaluators
from leaderboard.meta_eval import (
    ALL_LEVELS,
    LEVELS,
    MetricScores,
    compare,
    format_comparison,
    format_table,
    load_groups,
    load_metric_file,
    load_scores,
    qapyramid_human,
)
from leaderboard.meta_eval_datasets import combined_report, dataset_name
from leaderboard.meta_eval_stats import (
    CI_METHODS,
    CORRECTIONS,
    TESTS,
    Study,
    check_statistics,
    delta_band_rows,
    format_delta_bands,
    format_statistics,
    intervals,
    observed,
    pairwise_tests,
)
from leaderboard.meta_eval_unjudged import read_unjudged, with_unjudged_system_level
from tasks.metrics.correlation import UNDEFINED_RULES
from tasks.metrics.evaluators import evaluator_settings, score_summaries
from tasks.metrics.recall import RECALL_METRICS, rouge_recall_by_system
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import write_bytes, write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

METHOD_CHOICES = ("kendall", "pearson", "spearman")
#: the KIND of `--human KIND:FILE`
HUMAN_KINDS = ("qapyramid",)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "meta-eval", help=command_help("meta-eval"),
        description="Kendall tau-b / Pearson / Spearman between metric and human scores.")
    add_option(parser, "pyramids", renamed_from=("--data",))
    parser.add_argument("--metric", action="append", required=True, metavar="METRIC",
                        help="rouge1_recall, rouge2_recall, rougeL_recall, questeval, an "
                             "installed evaluator, or a JSON score file (per example or "
                             "{system: value}); repeatable: one table for all")
    parser.add_argument("--metric-option", action="append", default=[],
                        metavar="[METRIC:]KEY=VALUE", type=key_value,
                        help="an option of the --metric evaluator (repeatable; METRIC: says "
                             "which evaluator when several are compared)")
    parser.add_argument("--human", action="append",
                        help="'pyramid' (SCU labels, default), 'qapyramid:FILE' (QAPyramid "
                             "from QA_presence.json) or a JSON score file; with several "
                             "--pyramid, once for all or once per --pyramid, in order")
    parser.add_argument("--groups", help="JSON {group: [systems]} evaluated separately")
    add_option(parser, "systems")
    parser.add_argument("--methods", nargs="+", choices=METHOD_CHOICES,
                        default=list(METHOD_CHOICES), help="correlation methods")
    parser.add_argument("--levels", nargs="+", choices=ALL_LEVELS, default=list(LEVELS),
                        help="correlation levels: system (per-system means), summary (per "
                             "input across systems, averaged), global (every score pooled); "
                             "default system summary")
    parser.add_argument("--summary-undefined", "--undefined-rule", dest="undefined_rule",
                        choices=UNDEFINED_RULES, default="zero",
                        help="summary level, an example whose correlation is undefined "
                             "(constant scores): count it as 0 (zero, default), leave it out "
                             "(skip, as nlpstats and SacreROUGE) or perturb as Lite²/³Pyramid "
                             "(lite-pyramid)")
    parser.add_argument("--ci", choices=CI_METHODS, default="none",
                        help="confidence intervals: bootstrap over systems, inputs or both, "
                             "Fisher's z, or none (default)")
    parser.add_argument("--test", choices=TESTS, default="none",
                        help="p-values for every pair of metrics and each metric's cluster: "
                             "permutation (systems, inputs, both: nlpstats; cells: "
                             "SacreROUGE), paired bootstrap (SacreROUGE) or Williams' test; "
                             "none (default)")
    parser.add_argument("--delta-bands", nargs="?", type=positive_int, const=10, default=None,
                        metavar="N", help="system level: Kendall tau and pairwise accuracy "
                                          "by band of the metric's score gap between two "
                                          "systems (N quantile bands, default 10: deciles)")
    parser.add_argument("--significance", type=float, default=0.05,
                        help="the significance level of the clusters and the partial "
                             "conjunction count (default 0.05)")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm",
                        help="adjust the p-values of a level and method together (default "
                             "holm)")
    parser.add_argument("--alternative", choices=("two-sided", "greater", "less"),
                        default="two-sided", help="the tests' alternative (default two-sided)")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="the intervals' confidence (default 0.95)")
    parser.add_argument("--n-resamples", type=positive_int, default=1000,
                        help="bootstrap and permutation resamples (default 1000, as "
                             "SacreROUGE)")
    add_option(parser, "seed")
    parser.add_argument("--unjudged-inputs", metavar="FILE",
                        help="JSON {metric: {system: [scores on inputs the humans did not "
                             "judge]}}: the system level takes each metric's mean over every "
                             "input (Deutsch et al. 2022), its statistics resample each "
                             "side's inputs apart")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="a forest plot of the intervals (with --ci): a panel per level "
                             "and method, clusters coloured (with --test)")
    parser.add_argument("--table", choices=("plain", "markdown"), default="plain",
                        help="the table printed to stderr: aligned columns or Markdown")
    add_option(parser, "out_file")
    parser.set_defaults(handler=run, out_inputs={"pyramids": "--pyramid folder",
                                                 "metric": "--metric file",
                                                 "human": "--human file",
                                                 "groups": "--groups file",
                                                 "unjudged_inputs": "--unjudged-inputs file"})


def _json_ready(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def human_source(spec: str) -> tuple[str, str | None]:
    """(kind, file) of `--human`: ("pyramid", None), ("qapyramid", FILE) or ("file", FILE)."""
    if spec == "pyramid":
        return "pyramid", None
    kind, sep, path = spec.partition(":")
    if sep and kind in HUMAN_KINDS:
        if not path:
            raise SumbenchError(f"--human {spec}: give the file after '{kind}:'")
        return kind, path
    if Path(spec).is_file():
        return "file", spec
    if sep and re.fullmatch(r"[A-Za-z][\w-]*", kind):
        raise SumbenchError(f"--human {spec!r}: unknown kind {kind!r} (known: "
                            f"{', '.join(f'{k}:FILE' for k in HUMAN_KINDS)}; or 'pyramid', "
                            f"or a JSON score file)")
    raise SumbenchError(f"--human {spec!r} is neither 'pyramid', "
                        f"{', '.join(f'{k}:FILE' for k in HUMAN_KINDS)} nor an existing JSON "
                        f"file")


def metric_labels(names: list[str], registry) -> dict[str, str]:
    """{--metric as given: its label}: an evaluator's name, a file's stem (its path where two
    stems are alike); a name that is neither, or given twice, is refused."""
    given_twice = next((name for name, n in collections.Counter(names).items() if n > 1), None)
    if given_twice:
        raise SumbenchError(f"--metric {given_twice} is given twice")
    for name in names:
        if name not in registry and not Path(name).is_file():
            raise SumbenchError(f"--metric {name!r} is neither an evaluator "
                                f"({', '.join(registry.names())}) nor an existing JSON file")
    labels = {name: name if name in registry else Path(name).stem for name in names}
    counts = collections.Counter(labels.values())
    return {name: label if counts[label] == 1 else name for name, label in labels.items()}


def options_by_metric(names: list[str], given: list[tuple[str, str]], registry
                      ) -> dict[str, dict[str, str]]:
    """Each metric's `--metric-option`s: `METRIC:KEY=VALUE` for that metric; a plain
    `KEY=VALUE` for the only metric, or the only evaluator among several."""
    options: dict[str, dict[str, str]] = {name: {} for name in names}
    evaluators = [name for name in names if name in registry]
    for key, value in given:
        target, sep, option = key.partition(":")
        if sep and target in options:
            options[target][option] = value
        elif len(names) == 1 or len(evaluators) == 1:
            options[names[0] if len(names) == 1 else evaluators[0]][key] = value
        else:
            raise SumbenchError(f"--metric-option {key}={value}: say which metric it sets, "
                                f"METRIC:{key}=VALUE (METRIC one of {', '.join(evaluators)})")
    for name, chosen in options.items():
        if chosen and name not in registry:
            raise SumbenchError(f"--metric-option sets an evaluator's options; a score file "
                                f"has none ({name})")
    return options


def pyramid_dataset(args, pyramid: str | None, human_kind: str, evaluators: list[str]):
    """The --pyramid folder (None when left out, which only `--human qapyramid:FILE` with
    score files allows)."""
    if pyramid:
        labels = human_kind == "pyramid"
        return load_pyramid_dataset(pyramid, systems=args.systems, labels=labels,
                                    require_labels=labels)
    if human_kind != "qapyramid":
        raise SumbenchError("--pyramid DIR is needed (summaries, references, ids and human "
                            "labels) unless --human is qapyramid:FILE")
    if evaluators:
        raise SumbenchError(f"--metric {evaluators[0]} scores summaries: give --pyramid DIR "
                            f"with the systems' summaries")
    return None


def human_scores(kind: str, path: str | None, dataset, systems
                 ) -> tuple[list[str], dict[str, list[float]]]:
    """(ids, per-example human scores): the SCU Pyramid from labels, QAPyramid from
    judgments, or a JSON score file; over the dataset's examples and systems when given."""
    if kind == "qapyramid":
        return qapyramid_human(path, dataset.ids if dataset else None,
                               dataset.systems if dataset else systems)
    if kind == "pyramid":
        return list(dataset.ids), {system: pyramid_scores(dataset.labels[system])
                                   for system in dataset.systems}
    return list(dataset.ids), load_scores(path, dataset.ids, dataset.systems)


def metric_scores(name: str, label: str, dataset, ids, systems, options: dict,
                  registry) -> MetricScores:
    """A metric's scores and settings: a registered evaluator (a built-in ROUGE recall,
    QuestEval, or one of an installed package) with its options, or a JSON score file."""
    if name in RECALL_METRICS and not options:  # the references' tokens once for all systems
        scores = rouge_recall_by_system(dataset.summaries, dataset.references, [name])[name]
        return MetricScores(label, per_example=scores, source=name,
                            settings=evaluator_settings(registry.get(name)))
    if name in registry:
        evaluator = evaluator_of(name, options)
        scores = {system: score_summaries(evaluator, texts, dataset.references,
                                          dataset.documents, name)
                  for system, texts in dataset.summaries.items()}
        return MetricScores(label, per_example=scores, source=name,
                            settings=evaluator_settings(evaluator))
    return load_metric_file(name, ids, systems, label)


def _report(args, metrics: list[MetricScores], human, correlations, systems,
            pyramid: str | None, human_spec: str) -> dict:
    import numpy as np

    single = len(metrics) == 1
    config = {"pyramid": pyramid, "metric": args.metric[0] if single else list(args.metric),
              **({"metric_settings": metrics[0].settings}
                 if single and metrics[0].settings else {}),
              "metrics": [{"metric": m.source, "label": m.label, "kind": m.kind,
                           **({"settings": m.settings} if m.settings else {})} for m in metrics],
              "human": human_spec, "groups": args.groups, "systems": list(systems),
              "methods": list(args.methods), "levels": list(dict.fromkeys(args.levels)),
              "unjudged_inputs": args.unjudged_inputs,
              "undefined_rule": args.undefined_rule}
    human_means = {system: float(np.mean(values)) for system, values in human.items()}
    means = ({"metric": metrics[0].means(), "human": human_means} if single else
             {"metrics": {m.label: m.means() for m in metrics}, "human": human_means})
    return {"correlations": _json_ready(correlations), "system_means": means,
            "config": config, "provenance": provenance(config)}


def run(args) -> int:
    pyramids, humans = args.pyramids or [None], args.human or ["pyramid"]
    if len(humans) not in (1, len(pyramids)):
        raise SumbenchError(f"--human: give it once, or once per --pyramid ({len(pyramids)}); "
                            f"got {len(humans)}")
    humans = humans * len(pyramids) if len(humans) == 1 else humans
    if len(pyramids) > 1 and (args.plot or args.unjudged_inputs):
        raise SumbenchError(f"--{'plot' if args.plot else 'unjudged-inputs'} takes one "
                            f"dataset: give one --pyramid")
    reports = {}
    for index, (pyramid, human) in enumerate(zip(pyramids, humans)):
        name = dataset_name(pyramid, index, reports)
        if len(pyramids) > 1:
            print(f"== {name} ==", file=sys.stderr)
        reports[name] = evaluate_one(args, pyramid, human)
    if len(reports) > 1:
        combined, table = combined_report(reports, list(args.metric), args.test, args.significance,
                                          markdown=args.table == "markdown")
        if table:
            print(table, file=sys.stderr)
    else:
        combined = next(iter(reports.values()))
        if args.plot:
            write_bytes(args.plot, forest_plot(combined["statistics"]))
    if args.out:
        write_json(args.out, combined)
    return 0


def evaluate_one(args, pyramid: str | None, human_spec: str) -> dict:
    """One dataset: its tables printed, its report (as `--out` writes it) returned."""
    human_kind, human_path = human_source(human_spec)
    if human_kind == "qapyramid":  # --out must not replace the judgments file either
        check_out_file(argparse.Namespace(out=args.out, human=human_path,
                                          out_inputs={"human": "--human file"}))
    registry = load_evaluators()
    labels = metric_labels(list(args.metric), registry)
    options = options_by_metric(list(args.metric), args.metric_option, registry)
    dataset = pyramid_dataset(args, pyramid, human_kind,
                              [n for n in args.metric if n in registry])
    ids, human = human_scores(human_kind, human_path, dataset, args.systems)
    systems = list(dataset.systems) if dataset else list(human)
    groups = load_groups(args.groups, systems) if args.groups else None
    metrics = [metric_scores(name, labels[name], dataset, ids, systems, options[name],
                             registry) for name in args.metric]
    check_statistics(args.ci, args.test, args.correction, args.undefined_rule, metrics,
                     alpha=args.significance, n_systems=len(systems),
                     unjudged=bool(args.unjudged_inputs))
    unjudged = read_unjudged(args.unjudged_inputs, metrics, systems) \
        if args.unjudged_inputs else None
    if args.plot and args.ci == "none":
        raise SumbenchError("--plot draws the intervals: give --ci too")
    if args.plot and (Path(args.plot).is_dir() or not args.plot.lower().endswith(".png")):
        raise SumbenchError(f"--plot {args.plot}: give a .png file's name")
    results = compare(metrics, human, groups, args.methods, args.undefined_rule,
                      levels=list(dict.fromkeys(args.levels)))
    if unjudged is not None:
        results = with_unjudged_system_level(results, metrics, human, unjudged, systems)
    single = len(metrics) == 1
    correlations = results[metrics[0].label] if single else results
    print(json.dumps(_json_ready(correlations), indent=1))
    markdown = args.table == "markdown"
    print(format_table(correlations, markdown=markdown) if single else
          format_comparison(results, markdown=markdown), file=sys.stderr)
    statistics = run_statistics(args, metrics, human, systems, unjudged)
    if "correlations" in statistics:
        print(format_statistics(statistics, markdown=markdown), file=sys.stderr)
    if "delta_bands" in statistics:
        print(format_delta_bands(statistics["delta_bands"], markdown=markdown),
              file=sys.stderr)
    report = _report(args, metrics, human, correlations, systems, pyramid, human_spec)
    if statistics:
        report["statistics"] = _json_ready(statistics)
    return report


def run_statistics(args, metrics, human, systems, unjudged=None) -> dict:
    """--ci and --test over all systems (see leaderboard.meta_eval_stats)."""
    seed = args.seed or 0
    study = Study(metrics, human, systems, list(args.methods),
                  list(dict.fromkeys(args.levels)), args.undefined_rule, unjudged)
    found: dict = {}
    if args.delta_bands:
        found["delta_bands"] = delta_band_rows(study, args.delta_bands)
    if (args.ci, args.test) == ("none", "none"):
        return found
    found["correlations"] = observed(study)
    if args.ci != "none":
        found["intervals"] = intervals(study, ci=args.ci, confidence=args.confidence,
                                       n_resamples=args.n_resamples, seed=seed)
    if args.test != "none":
        found["tests"] = pairwise_tests(study, test=args.test, correction=args.correction,
                                        alternative=args.alternative,
                                        n_resamples=args.n_resamples, seed=seed,
                                        alpha=args.significance)
    return found
