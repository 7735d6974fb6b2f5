"""`sumbench stus`: Lite³Pyramid's semantic triplet units (STUs) of reference summaries.

    sumbench stus --references FILE --frames FILE [--coref FILE] --out STUs.txt

References: one summary per line (as Pyramid folders' references.txt). The rules are the
official `extract_stus.py`'s (leaderboard.evaluators.stu_extraction); the models are inputs:
`--frames` holds semantic-role frames, one JSON object per sentence ({"sentence", "words",
"verbs": [{"tags": [BIO tags]}]}, the shape of AllenNLP's SRL predictor's output), and
`--coref` coreference outputs ({"text", "document": [words], "clusters": [[[start, end],
...]]}), keyed by the reference text without <t> marks. sumbench ships no SRL or
coreference model. The output has one line per reference, its STUs TAB-separated (the
`--units file` format of `sumbench pyramid`).
"""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "stus", help="Lite³Pyramid STUs of references, from recorded semantic-role frames",
        description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--references", required=True, metavar="FILE",
                        help="one reference summary per line")
    parser.add_argument("--frames", required=True, metavar="FILE",
                        help="semantic-role frames, one JSON object per sentence")
    parser.add_argument("--coref", metavar="FILE",
                        help="coreference outputs, one JSON object per reference")
    parser.add_argument("--out", required=True, metavar="FILE", help="STUs.txt to write")
    parser.set_defaults(handler=run, out_inputs={
        "references": "--references file", "frames": "--frames file",
        "coref": "--coref file"})


def run(args) -> int:
    from leaderboard.evaluators.stu_extraction import (
        RecordedCoref,
        RecordedFrames,
        reference_units,
    )
    from tasks.atomic import atomic_path
    from tasks.io import read_text

    frames = RecordedFrames(args.frames)
    coref = RecordedCoref(args.coref) if args.coref else None
    references = read_text(args.references, what="references file").splitlines()
    units = [reference_units(reference.strip(), frames, coref) for reference in references]
    with atomic_path(args.out) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write("\n".join("\t".join(row) for row in units))
    count = sum(map(len, units))
    print(f"sumbench stus: {len(units)} references, {count} STUs "
          f"({count / max(1, len(units)):.2f} per reference): {args.out}", file=sys.stderr)
    return 0
