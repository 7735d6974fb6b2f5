"""`sumbench questeval`: QuestEval scores of summaries (leaderboard.evaluators.questeval.scoring).

    sumbench questeval (--summaries FILE | --pyramid DIR [--systems S ...])
                       [--protocol v0.2.4|v0.1.1|paper]
                       [--question-scores answerability,bertscore,f1]
                       [--weighter | --no-weighter] [--answers FILE | --spacy-pipeline NAME]
                       [--question-generator M] [--question-answerer M] [--weighter-model M]
                       [--bertscore-model M [--bertscore-layer N]]
                       [--source-windows [--window-stride N]] [--batch-size N]
                       [--cache FILE] [--device D] [--details] [--out FILE] [--scores-out FILE]

--summaries: JSON Lines, one object per summary: {"id", "summary", "source"?,
"references"?: [...], "system"?}. --pyramid: a REALSumm-layout folder; every system's
summaries against `documents.txt` (sources) and `references.txt`. Prints the corpus mean
(and per-system means); --out writes every summary's score, precision, recall and question
counts (--details: every question), with the configuration, the models' revisions and
provenance; with --pyramid, --scores-out writes {system: {example_id: score}}, the score file
`sumbench meta-eval --metric FILE` reads.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.commands import command_help, positive_int
from benchmark.commands.leaderboard_client import print_json
from benchmark.commands.options import add_option
from leaderboard.evaluators.qapyramid.autoqapyramid import system_means
from leaderboard.evaluators.questeval.evaluator import DEFAULTS, QuestEvalEvaluator
from leaderboard.evaluators.questeval.models import (
    QUESTION_ANSWERER,
    QUESTION_GENERATOR,
    WEIGHTER,
)
from leaderboard.evaluators.questeval.scoring import Summary
from tasks.metrics.questeval import PROTOCOLS, check_score_types
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_jsonl, write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.pyramid_data import load_pyramid_dataset


def register(subparsers) -> None:
    parser = subparsers.add_parser("questeval", help=command_help("questeval"),
                                   description="\n\n".join(__doc__.split("\n\n")[:2]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs = parser.add_mutually_exclusive_group(required=True)
    add_option(inputs, "summaries")
    add_option(inputs, "pyramid")
    add_option(parser, "systems")
    parser.add_argument("--protocol", choices=PROTOCOLS,
                        help="v0.2.4 (the current package, default), v0.1.1 (the paper's "
                             "code), paper (its equations 1-2 and harmonic mean)")
    parser.add_argument("--question-scores", type=_score_list, metavar="TYPES",
                        help="comma-separated: answerability, bertscore, f1 (default: the "
                             "protocol's; bertscore needs bert-score)")
    parser.add_argument("--weighter", action=argparse.BooleanOptionalAction, default=None,
                        help="weigh the source's questions (default: the protocol's)")
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument("--answers", metavar="FILE",
                         help="recorded answers, JSON Lines {text, answers, sentence_answers?}")
    add_option(answers, "spacy_pipeline")
    parser.add_argument("--question-generator", metavar="MODEL",
                        help=f"QG model (hub id or folder; default {QUESTION_GENERATOR})")
    parser.add_argument("--question-answerer", metavar="MODEL",
                        help=f"QA model (default {QUESTION_ANSWERER})")
    parser.add_argument("--weighter-model", metavar="MODEL",
                        help=f"the weighter (default {WEIGHTER})")
    parser.add_argument("--bertscore-model", metavar="MODEL",
                        help="the bertscore score's model (hub id or folder; default: the "
                             "official bert-base-multilingual-cased)")
    parser.add_argument("--bertscore-layer", type=positive_int, metavar="N",
                        help="the layer BERTScore reads (default: bert-score's for the model, "
                             "9 for the official one)")
    parser.add_argument("--source-windows", action="store_true",
                        help="an extension: answer the summary's questions in every window of "
                             "the source (480 tokens), keeping the most answerable answer")
    parser.add_argument("--window-stride", type=positive_int, metavar="N",
                        help=f"with --source-windows: tokens between window starts "
                             f"({DEFAULTS.window_stride})")
    parser.add_argument("--details", action="store_true",
                        help="--out holds every question, its answers and scores")
    parser.add_argument("--scores-out", metavar="FILE",
                        help="with --pyramid: {system: {example_id: score}}, the file "
                             "`sumbench meta-eval --metric FILE` correlates with humans")
    add_option(parser, "batch_size")
    add_option(parser, "cache")
    add_option(parser, "device")
    add_option(parser, "out_file")
    parser.set_defaults(handler=run_questeval)


def _score_list(text: str) -> tuple[str, ...]:
    try:
        return check_score_types([part.strip() for part in text.split(",") if part.strip()])
    except SumbenchError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def read_summaries(path: str):
    """The --summaries file as Summary records; errors name the line and field."""
    rows = []
    for number, record in enumerate(read_jsonl(path), start=1):
        where = {"path": path, "line": number}
        if not isinstance(record, dict):
            raise DataError("expected a JSON object", **where)
        for name in ("id", "summary"):
            if not isinstance(record.get(name), str):
                raise DataError("expected a string", field=name, **where)
        source, references = record.get("source"), record.get("references", [])
        if source is not None and not isinstance(source, str):
            raise DataError("expected a string", field="source", **where)
        if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
            raise DataError("expected a list of strings", field="references", **where)
        if source is None and not references:
            raise DataError("a summary needs a source or references", field="source", **where)
        rows.append(Summary(record["id"], record["summary"], source, tuple(references),
                            record.get("system")))
    if not rows:
        raise DataError("no summaries", path=path)
    return rows


def pyramid_summaries(root: str, systems):
    """Every system's summaries of a Pyramid folder (id `system/example`), each against its
    document and its reference."""
    data = load_pyramid_dataset(root, systems, unit_kinds=(), labels=False)
    return [Summary(f"{system}/{example}", data.summaries[system][index],
                    data.documents[index], (data.references[index],), system)
            for system in data.systems for index, example in enumerate(data.ids)]


def _by_system(rows) -> dict[str, dict[str, float]]:
    """{system: {summary id: score}} of the rows that name a system."""
    scores: dict[str, dict[str, float]] = {}
    for row in rows:
        if row.get("system") is not None:
            scores.setdefault(row["system"], {})[row["id"]] = row["score"]
    return scores


def score_file(rows) -> dict:
    """{system: {example_id: score}} of Pyramid rows (ids `system/example`): meta-eval's
    score file."""
    return {system: {key.split("/", 1)[1]: score for key, score in scores.items()}
            for system, scores in _by_system(rows).items()}


def _progress(role: str, total: int):
    from tqdm import tqdm

    names = {"generator": "questions", "answerer": "answers", "weighter": "weights",
             "bertscore": "BERTScores"}
    return tqdm(total=total, desc=f"QuestEval {names[role]}", unit="input", file=sys.stderr,
                disable=None)


def questeval_options(args) -> dict:
    """The evaluator's options (leaderboard.evaluators.questeval.evaluator.OPTIONS) the
    command line gives; what it leaves out takes the evaluator's default."""
    given = {"protocol": args.protocol, "question_scores": args.question_scores,
             "weighter": args.weighter, "answers": args.answers,
             "spacy_pipeline": args.spacy_pipeline,
             "question_generator": args.question_generator,
             "question_answerer": args.question_answerer,
             "weighter_model": args.weighter_model, "bertscore_model": args.bertscore_model,
             "bertscore_layer": args.bertscore_layer, "source_windows": args.source_windows,
             "window_stride": args.window_stride, "batch_size": args.batch_size,
             "device": args.device, "cache": args.cache}
    return {name: value for name, value in given.items() if value is not None}


def run_questeval(args) -> int:
    if args.scores_out and not args.pyramid:
        raise SumbenchError("--scores-out writes per-system scores of a --pyramid folder")
    evaluator = QuestEvalEvaluator(questeval_options(args))
    summaries = read_summaries(args.summaries) if args.summaries else \
        pyramid_summaries(args.pyramid, args.systems)
    result = evaluator.evaluate(summaries, _progress, details=args.details)
    systems = system_means(_by_system(result["summaries"]))
    summary = {"corpus_score": result["corpus_score"], "n_summaries": len(summaries),
               **({"systems": systems} if systems else {}), "computed": result["computed"],
               "without_answers": result["without_answers"]}
    print_json(summary)
    if args.scores_out:
        write_json(Path(args.scores_out), score_file(result["summaries"]))
    if args.out:
        write_json(Path(args.out), {**summary, "summaries": result["summaries"],
                                    "config": evaluator.run_config(),
                                    "provenance": provenance()})
    return 0
