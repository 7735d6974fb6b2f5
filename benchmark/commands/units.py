"""`sumbench units`: the SCU-approximation study's units (Nawrath et al., NAACL 2024) and
their intrinsic easiness.

    sumbench units sgus --references FILE --one-shot SGU_FILE --model NAME [...]
    sumbench units smus (--amr FILE | --amr-parser DIR --references FILE) [--trees-out FILE]
                        [--amr-generator MODEL [--tagged FILE | --untagged] --out FILE
                         [--json-out FILE]] [--spacy-pipeline NAME]
    sumbench units ngrams --references FILE [--coref FILE] [--spacy-pipeline NAME]
                          [--seed S] --out FILE [--json-out FILE]
    sumbench units sentences --references FILE [--coref FILE] [--spacy-pipeline NAME]
                             --out FILE [--json-out FILE]
    sumbench units easiness --scus FILE --units-file FILE [--units-kind KIND]
                            [--rouge rouge155|rouge-score] [--skip-zero] [--out FILE]
    sumbench units stus --references FILE (--frames FILE | --srl-model DIR ...) --out FILE
                        (as `sumbench stus`: `sumbench units stus --help`)

`ngrams` and `sentences` read references one per line (as references.txt) and write units
one line per reference, TAB-separated (`pyramid --units file --units-file FILE` reads it;
`--json-out` also writes the paper's JSON). The text is the reference resolved by `--coref`
(recorded coreference, the format `stus --coref` reads: each pronoun and later mention
replaced by its cluster's first name, as the paper's pipeline did), else the reference
itself. Sentences: its `<t>` marks, else the spaCy pipeline's (`--spacy-pipeline`,
en_core_web_sm by default; a folder works). `sentences` gives the paper's SSUs (spaCy
sentences of the coreference-resolved reference: without `--coref` the paper's row cannot be
matched); `ngrams` floor(5%) of the 3-, 4- and 5-grams within sentences, drawn with `--seed`
(each reference its own generator; the paper's seed is unknown, so its sample cannot be
recreated).

`easiness`: per reference, R (each SCU's best ROUGE-1 F1 over the units, averaged over SCUs),
P (the same with the roles swapped) and the best match of each SCU and unit ([index of the
first maximum, its F1]); the macro means over references (`--skip-zero`: skipping references
whose value is 0, as the paper's interface averages). Both files are TAB-separated (one line
per reference) or the paper's JSON. As the paper's JSON was made, SCUs and STUs without a
space are dropped (`--units-kind` says a TAB units file's kind; a JSON file names its own);
units without ROUGE tokens are dropped, and the candidates `&` and `$` skipped. ROUGE-1 is
ROUGE-1.5.5's (`--rouge rouge155`, the default: tasks.metrics.rouge155, Porter stemming with
the WordNet-2.0 exceptions) or rouge-score's with stemming. Prints a table; `--out` writes
{"R", "P", "examples": [{"id", "R", "P", "best_R", "best_P"}]} with the configuration and
provenance.
"""
from __future__ import annotations

import argparse
import random

from benchmark.commands import command_help
from benchmark.commands.options import add_option
from benchmark.commands.stus import STUS_HELP, add_stus_arguments
from benchmark.commands.units_sgus import add_sgus_parser
from leaderboard.evaluators.units.smus import (
    add_smu_text,
    parse_references,
    read_graphs,
    sentence_tags,
    spacy_splitter,
    subgraph_records,
)
from tasks.metrics.easiness import ROUGE_VARIANTS, easiness, unigram_scorer
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_lines, write_json
from tasks.plumbing.provenance import provenance
from tasks.units.approx_units import sample_ngrams, sentences_of
from tasks.units.stus import RecordedCoref, replace_coreferences
from tasks.units.unit_files import (
    KINDS,
    aligned_ids,
    paper_units,
    read_unit_file,
    write_unit_rows,
)


def register(subparsers) -> None:
    parser = subparsers.add_parser("units", help=command_help("units"),
                                   description="\n\n".join(__doc__.split("\n\n")[:2]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="units_command", metavar="SUBCOMMAND")
    commands.required = True
    for name, what in (("ngrams", "the n-gram baseline: 5%% of a reference's 3-5-grams"),
                       ("sentences", "SSUs: the (coreference-resolved) reference's sentences")):
        maker = commands.add_parser(name, help=what)
        add_option(maker, "references", required=True)
        add_option(maker, "coref")
        add_option(maker, "spacy_pipeline")
        if name == "ngrams":
            add_option(maker, "seed")
        add_option(maker, "out_file", required=True)
        add_option(maker, "json_out")
        maker.set_defaults(handler=run_maker, kind=name, out_inputs={
            "references": "--references file", "coref": "--coref file"})
    add_sgus_parser(commands)
    add_stus_arguments(commands.add_parser(
        "stus", help="STUs (Lite³Pyramid's semantic triplets), or Lite²·⁵'s mix of SCUs and "
        "STUs (`sumbench stus` is the same command)", description=STUS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter))
    smus = commands.add_parser("smus", help="AMR units (sg2 subgraphs) of recorded graphs",
                               description=SMUS_HELP)
    graphs = smus.add_mutually_exclusive_group(required=True)
    graphs.add_argument("--amr", metavar="FILE",
                        help="recorded PENMAN graphs: the paper's SMU JSON (summary_trees per "
                             "reference)")
    graphs.add_argument("--amr-parser", metavar="DIR",
                        help="instead: amrlib's parse_xfm_bart_large model folder (needs "
                             "amrlib; 4 beams, graphs up to 700 tokens as the paper's run) on "
                             "--references")
    add_option(smus, "spacy_pipeline")
    add_option(smus, "references")
    smus.add_argument("--trees-out", metavar="FILE",
                      help="each reference's subgraphs, the released `tree` shape (JSON)")
    smus.add_argument("--amr-generator", metavar="MODEL",
                      help="a seq2seq AMR-to-text model (amrlib's generate_t5wtense as a "
                           "folder, or any): writes the SMUs' text")
    tags = smus.add_mutually_exclusive_group()
    tags.add_argument("--tagged", metavar="FILE",
                      help="with --amr-generator: recorded POS-tagged one-line graphs, a JSON "
                           "list per reference of one string per sentence; default: tagged "
                           "here by the spaCy pipeline (--spacy-pipeline) and amrlib's aligner")
    tags.add_argument("--untagged", action="store_true",
                      help="with --amr-generator: feed untagged subgraphs (not the paper's "
                           "input)")
    add_option(smus, "device")
    add_option(smus, "out_file")
    add_option(smus, "json_out")
    smus.set_defaults(handler=run_smus, out_inputs={"amr": "--amr file",
                                                    "references": "--references file",
                                                    "tagged": "--tagged file"})
    ease = commands.add_parser("easiness", help="intrinsic easiness R and P of units against "
                               "SCUs (the paper's Table 2)",
                               description=__doc__.split("\n\n")[2],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    add_option(ease, "scus", required=True)
    add_option(ease, "units_file", required=True)
    ease.add_argument("--units-kind", choices=KINDS,
                      help="the kind of a TAB-separated --units-file (scus and stus lose "
                           "their units without a space, as the paper's JSON did)")
    ease.add_argument("--rouge", choices=ROUGE_VARIANTS, default="rouge155",
                      help="ROUGE-1.5.5 exactly (default) or rouge-score with stemming")
    ease.add_argument("--skip-zero", action="store_true",
                      help="means skip references whose value is 0 (the paper's interface)")
    add_option(ease, "out_file")
    ease.set_defaults(handler=run_easiness, out_inputs={"scus": "--scus file",
                                                        "units_file": "--units-file file"})


SMUS_HELP = """Subgraphs of each sentence's AMR graph by the paper's sg2 rules
(tasks.units.amr_units, penman 1.2.1), from recorded graphs (--amr: the paper's JSON,
a list of {instance_id, summary, summary_trees: [PENMAN graph per sentence]}; --references,
when given, must hold as many lines). --trees-out writes them in the released shape. With
--amr-generator (amrlib's generate_t5wtense, not shipped, or any seq2seq folder), each
subgraph on one line, with its sentence's POS tags put in (the authors' generate_taged
input), becomes an SMU. The tags are made as the authors' parser made them: the sentence
graph's `# ::snt` tagged by a spaCy pipeline (--spacy-pipeline, en_core_web_sm by default,
which the paper used) and aligned by amrlib's RBW aligner (needs amrlib); or read from
recorded tagged graphs (--tagged); --untagged feeds the bare subgraphs (not the paper's
input). --out writes them one line per reference, TAB-separated, --json-out the paper's JSON."""


def run_smus(args) -> int:
    if args.amr_parser and not args.references:
        raise SumbenchError("--amr-parser parses --references FILE")
    records = read_graphs(args.amr) if args.amr else parse_references(
        args.references, args.amr_parser, args.spacy_pipeline, args.device)
    if args.references and args.amr:
        lines = read_lines(args.references, what="references")
        if len(lines) != len(records):
            raise DataError(f"{len(records)} references in {args.amr} but {len(lines)} lines",
                            path=args.references)
    out = subgraph_records(records, args.amr)
    if not (args.trees_out or args.out or args.json_out):
        raise SumbenchError("give --trees-out FILE (and, with --amr-generator, --out FILE)")
    if (args.out or args.json_out) and not args.amr_generator:
        raise SumbenchError("the SMUs' text needs --amr-generator MODEL (amrlib's "
                            "generate_t5wtense); without one, write the trees (--trees-out)")
    tags = None
    if args.amr_generator:
        tagger, tags = sentence_tags(records, args.tagged, args.untagged, args.spacy_pipeline,
                                     args.amr or args.references)
        add_smu_text(out, records, args.amr_generator, args.device, tagger)
    if args.trees_out:
        write_json(args.trees_out, [{k: v for k, v in r.items() if k != "smus"} for r in out])
    if args.out:
        write_unit_rows(args.out, [record["smus"] for record in out])
    if args.json_out:
        write_json(args.json_out, out)
    print(f"smus: {sum(len(r['tree']) for r in out)} subgraphs for {len(out)} references"
          f"{f'; POS tags: {tags}' if tags else ' (their text needs --amr-generator)'}")
    return 0


def run_easiness(args) -> int:
    scus, units = read_unit_file(args.scus), read_unit_file(args.units_file)
    kind = units.kind or args.units_kind
    if kind is None:
        raise SumbenchError(f"{args.units_file}: a TAB-separated units file does not say its "
                            f"kind: give --units-kind ({', '.join(KINDS)})")
    if units.kind and args.units_kind and units.kind != args.units_kind:
        raise SumbenchError(f"{args.units_file} holds {units.kind}, not {args.units_kind}")
    ids = aligned_ids(scus, units)
    result = easiness(ids, paper_units(scus, "scus"), paper_units(units, kind),
                      unigram_scorer(args.rouge), skip_zero=args.skip_zero)
    print(f"{'units':<12} {'R':>8} {'P':>8} {'refs':>6}")
    print(f"{kind:<12} {result['R']:>8.4f} {result['P']:>8.4f} {len(ids):>6}")
    if args.out:
        config = {"scus": args.scus, "units_file": args.units_file, "units_kind": kind,
                  "rouge": args.rouge, "skip_zero": args.skip_zero}
        write_json(args.out, {**result, "config": config, "provenance": provenance(config)})
    return 0


def reference_texts(args) -> tuple[list[str], list[str]]:
    """(the references as read, the texts units are made from: coreference-resolved when
    --coref is given)."""
    references = [line.strip() for line in read_lines(args.references, what="references")]
    if not args.coref:
        return references, references
    coref = RecordedCoref(args.coref)
    resolved = []
    for reference in references:
        output = coref(reference.replace("<t>", " ").replace("</t>", " ").strip())
        resolved.append(replace_coreferences(output["document"], output["clusters"])[0])
    return references, resolved


def run_maker(args) -> int:
    references, texts = reference_texts(args)
    split = spacy_splitter(args.spacy_pipeline)
    units = []
    for number, text in enumerate(texts, start=1):
        found = sentences_of(text, split)
        if not found:
            raise DataError("a reference with no sentences", path=args.references,
                            line=number)
        units.append([" ".join(s.split()) for s in found] if args.kind == "sentences" else
                     sample_ngrams(found, random.Random(f"{args.seed or 0}:{number}")))
    write_unit_rows(args.out, units)
    if args.json_out:
        write_json(args.json_out, [{"instance_id": str(index), "summary": reference,
                                    args.kind: row}
                                   for index, (reference, row) in enumerate(zip(references,
                                                                                units))])
    print(f"{args.kind}: {sum(map(len, units))} units for {len(units)} references -> "
          f"{args.out}")
    return 0
