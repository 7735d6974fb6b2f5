"""`sumbench units stus` (`sumbench stus` is the same command): Lite³Pyramid's semantic
triplet units (STUs) of reference summaries, or Lite²·⁵Pyramid's mix of SCUs and STUs.

    sumbench units stus --references FILE (--frames FILE | --srl-model DIR
                  [--predicate-model DIR | --spacy-pipeline NAME]) [--coref FILE] --out STUs.txt
    sumbench units stus --references FILE --frames FILE [--coref FILE] --scus SCUs.txt
                  --percentage P (--easiness FILE | --regressor MODEL --trees FILE |
                  --regressor M1 --folds F1 --regressor M2 --folds F2 ... --ids FILE
                  --trees FILE) --out STUs_SCUs_percentageP.txt

References: one summary per line (as Pyramid folders' references.txt). The rules are the
official `extract_stus.py`'s (tasks.units.stus); the models are inputs:
`--frames` holds semantic-role frames, one JSON object per sentence ({"sentence", "words",
"verbs": [{"tags": [BIO tags]}]}, the shape of AllenNLP's SRL predictor's output), and
`--coref` coreference outputs ({"text", "document": [words], "clusters": [[[start, end],
...]]}), keyed by the reference text without <t> marks. Instead of recorded frames,
`--srl-model` runs an SRL token classifier in AllenNLP SRL BERT's convention (e.g. the
official structured-prediction-srl-bert archive converted by `sumbench srl-convert`) on
spaCy's words (`sumbench[stus]`) and the verbs a spaCy pipeline with a tagger tags VERB or
AUX (`--spacy-pipeline`; en_core_web_sm when installed, as the official predictor) or else
those a `--predicate-model` marks (leaderboard.evaluators.qapyramid.srl_frames). sumbench
ships no SRL or coreference model.

With `--scus`, the output is the official Lite²·⁵ mix (`mix_scus_stus`,
leaderboard.evaluators.pyramid.lite25): SCUs aligned to sentences, the sentences whose easiness is
above the top P% threshold take their STUs, the others their SCUs. Easiness per sentence:
`--easiness` (one line per reference, TAB-separated scores, one per sentence of its
extraction) or the official XGBoost regressor (`--regressor`, e.g. Lite2-3Pyramid's
regressors/TAC08/all_xgb.json; needs `sumbench[lite25]`) on recorded constituency trees
(`--trees`: {"sentence", "tokens", "trees"} per line, AllenNLP's parser's output). REALSumm's
reproduction scores each document by its cross-validation fold's regressor and pools the
threshold (`mix_scus_stus_by_folds`): `--folds` per fold with its `--regressor`, and `--ids`.

The output has one line per reference, its units TAB-separated (the `--units file` format
of `sumbench pyramid`).
"""
from __future__ import annotations

import sys

from benchmark.commands import command_help
from benchmark.commands.options import add_option, given_or_default
from leaderboard.evaluators.pyramid import lite25
from leaderboard.evaluators.qapyramid.srl_frames import ModelFrames, convert_allennlp_srl
from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_item_lines, read_text
from tasks.qapyramid.pyramid_data import read_units_file
from tasks.units.stus import RecordedCoref, RecordedFrames, reference_sentences
from trainers.inference.generation import resolve_device

#: the command's description (its usage lines and rules: the module's docstring after its
#: first paragraph)
STUS_HELP = __doc__.split("\n\n", 1)[1]


def register(subparsers) -> None:
    """`sumbench stus` (the same command as `sumbench units stus`), and `srl-convert`."""
    add_stus_arguments(subparsers.add_parser("stus", help=command_help("stus"),
                                             description=STUS_HELP))
    register_convert(subparsers)


def add_stus_arguments(parser) -> None:
    """The options and handler of the STU command (`units stus`, and `stus` as its alias)."""
    add_option(parser, "references", required=True)
    parser.add_argument("--frames", metavar="FILE",
                        help="semantic-role frames, one JSON object per sentence")
    parser.add_argument("--srl-model", metavar="DIR", help="instead of --frames: an SRL "
                        "token classifier (AllenNLP SRL BERT's convention; folder or hub id)")
    add_option(parser, "predicate_model")
    add_option(parser, "spacy_pipeline")  # with --srl-model: its VERB and AUX words are verbs
    add_option(parser, "device")
    add_option(parser, "coref")
    mix = parser.add_argument_group("Lite²·⁵ mix")
    add_option(mix, "scus")
    mix.add_argument("--percentage", type=int, metavar="P",
                     help="share of sentences (1..100) whose easiness sets the threshold")
    mix.add_argument("--easiness", metavar="FILE", help="easiness per sentence, one line per "
                     "reference, TAB-separated")
    mix.add_argument("--regressor", metavar="MODEL", action="append",
                     help="XGBoost easiness regressor (JSON); with --folds, one per fold, in "
                          "the folds' order")
    mix.add_argument("--folds", metavar="FILE", action="append",
                     help="document ids of one cross-validation fold, one per line (repeat per "
                          "fold, e.g. REALSumm's by_examples/fold1.id ...): each document's "
                          "sentences are scored by its fold's --regressor and the threshold is "
                          "pooled, as REALSumm's reproduction does (needs --ids)")
    mix.add_argument("--ids", metavar="FILE", help="with --folds: the references' document "
                     "ids, one line per reference (REALSumm's ids.txt)")
    mix.add_argument("--trees", metavar="FILE", help="constituency trees, one JSON object per "
                     "sentence (for --regressor)")
    add_option(parser, "out_file", required=True)
    parser.set_defaults(handler=run, out_inputs={
        "references": "--references file", "frames": "--frames file",
        "coref": "--coref file", "srl_model": "--srl-model folder",
        "predicate_model": "--predicate-model folder", "scus": "--scus file",
        "easiness": "--easiness file", "trees": "--trees file", "ids": "--ids file"})


def frame_source(args):
    """Recorded frames (--frames) or models (--srl-model + --predicate-model)."""
    if (args.frames is None) == (args.srl_model is None):
        raise SumbenchError("semantic-role frames are needed: --frames FILE (recorded) or "
                            "--srl-model DIR --predicate-model DIR (sumbench ships no SRL "
                            "model), not both")
    if args.frames:
        if args.predicate_model or args.spacy_pipeline:
            raise SumbenchError("--predicate-model and --spacy-pipeline go with --srl-model")

        return RecordedFrames(args.frames)

    return ModelFrames(args.srl_model, args.predicate_model,
                       device=resolve_device(given_or_default(args, "device")),
                       spacy_pipeline=args.spacy_pipeline)


def check_mix_options(args) -> None:
    """One-line errors for a mix asked for without what it needs, or mix options alone."""
    mix_options = ("percentage", "easiness", "regressor", "trees", "folds", "ids")
    if not args.scus:
        given = [name for name in mix_options if getattr(args, name) is not None]
        if given:
            raise SumbenchError(f"--{given[0]} is for the Lite²·⁵ mix: add --scus FILE")
        return
    if args.percentage is None:
        raise SumbenchError("--scus needs --percentage P")
    if (args.easiness is None) == (args.regressor is None):
        raise SumbenchError("--scus needs one easiness source: --easiness FILE or "
                            "--regressor MODEL --trees FILE")
    if (args.regressor is None) != (args.trees is None):
        raise SumbenchError("--regressor and --trees go together")
    if (args.folds is None) != (args.ids is None):
        raise SumbenchError("--folds and --ids go together")
    if args.folds is None and args.regressor and len(args.regressor) > 1:
        raise SumbenchError("several --regressor models need --folds (one per fold)")
    if args.folds and args.easiness:
        raise SumbenchError("--folds are for --regressor models (an --easiness file holds "
                            "the scores already)")


def mixed(args, references) -> tuple[list[list[str]], str]:
    """(the Lite²·⁵ units, a summary line)."""
    scus = read_units_file(args.scus, len(references), "references", what="SCUs file")
    if args.easiness:
        easiness = lite25.read_easiness(args.easiness, references)
    elif args.folds:
        ids = [line.strip() for line in read_item_lines(args.ids, len(references),
                                                       what="ids file", lines_for="references")]
        easiness = lite25.fold_easiness(args.regressor, args.folds, ids,
                                        lite25.RecordedTrees(args.trees), references)
    else:
        easiness = lite25.regressor_easiness(args.regressor[0],
                                             lite25.RecordedTrees(args.trees), references)
    units, counts = lite25.mix_units(references, scus, easiness, args.percentage)
    return units, (f"{counts['sentences']} sentences: {counts['stus']} with STUs, "
                   f"{counts['scus']} with SCUs, {counts['dropped']} without SCUs left out "
                   f"(threshold {counts['threshold']:.6g} at {args.percentage}%)")


def run(args) -> int:
    check_mix_options(args)
    frames = frame_source(args)
    coref = RecordedCoref(args.coref) if args.coref else None
    lines = read_text(args.references, what="references file").splitlines()
    references = [reference_sentences(line.strip(), frames, coref) for line in lines]
    if args.scus:
        units, summary = mixed(args, references)
    else:
        units = [reference.stus() for reference in references]
        count = sum(map(len, units))
        summary = f"{count} STUs ({count / max(1, len(units)):.2f} per reference)"
    with atomic_path(args.out) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write("\n".join("\t".join(row) for row in units))
    print(f"sumbench stus: {len(units)} references, {summary}: {args.out}", file=sys.stderr)
    return 0


def register_convert(subparsers) -> None:
    parser = subparsers.add_parser(
        "srl-convert", help=command_help("srl-convert"),
        description="Convert AllenNLP's SRL BERT (structured-prediction-srl-bert: weights.th "
                    "and vocabulary/labels.txt, as a .tar.gz or unpacked) into a transformers "
                    "BertForTokenClassification folder, with the config and tokenizer of "
                    "--bert (e.g. a local bert-base-uncased).")
    parser.add_argument("--archive", required=True, help="the AllenNLP archive or its folder")
    parser.add_argument("--bert", required=True, help="the BERT model folder it was built on")
    add_option(parser, "out_dir", required=True)
    parser.set_defaults(handler=run_convert, out_inputs={"archive": "--archive file",
                                                         "bert": "--bert folder"})


def run_convert(args) -> int:
    out = convert_allennlp_srl(args.archive, args.bert, args.out)
    print(f"sumbench srl-convert: {out}", file=sys.stderr)
    return 0
