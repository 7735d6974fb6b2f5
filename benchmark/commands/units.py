"""`sumbench units`: the SCU-approximation study's units (Nawrath et al., NAACL 2024) and
their intrinsic easiness.

    sumbench units easiness --scus FILE --units-file FILE [--units-kind KIND]
                            [--rouge rouge155|rouge-score] [--skip-zero] [--out FILE]

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

from benchmark.commands import command_help
from benchmark.commands.options import add_option
from tasks.metrics.easiness import ROUGE_VARIANTS, easiness, unigram_scorer
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import write_json
from tasks.plumbing.provenance import provenance
from tasks.qapyramid.unit_files import KINDS, aligned_ids, paper_units, read_unit_file


def register(subparsers) -> None:
    parser = subparsers.add_parser("units", help=command_help("units"),
                                   description="\n\n".join(__doc__.split("\n\n")[:2]),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="units_command", metavar="SUBCOMMAND")
    commands.required = True
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
