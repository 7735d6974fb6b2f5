"""Record the official BARTScore's outputs on a tiny BART (run by hand; the tests
call only `build_model`, to rebuild it; tests/data/bartscore_official/README.md says how).

    python tests/data/bartscore_official/record.py --official /tmp/bs/bart_score.py [--build]

`--official`: the official `bart_score.py` (neulab/BARTScore, copied out of a clone; it is
imported from there, never copied into the repository). `--build`: (re)build `model/` (the
tiny BART of trainers.models.tiny_bart, seed 0, its tokenizer trained on TEXTS); otherwise
a model built here before is used. Writes `recorded.json`: every case's inputs and the
official outputs.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

TEXTS = [
    "Police said the man was arrested on Tuesday.",
    "The cat sat on the mat. It was happy there. Nobody moved it.",
    "Officials in the city said the bridge would reopen next week after repairs.",
    "A storm hit the coast on Monday. Thousands lost power. Schools were closed.",
    "The company reported higher profits and said it would hire more workers.",
    "",
    "Scientists found water on the moon. They said more tests are needed.",
    "The team won the final 3-1. Fans celebrated in the streets until dawn.",
    "Prices rose again in May, the third monthly increase in a row.",
    "He said: \"We will not give up.\" The crowd cheered.",
]
#: texts far over 32 tokens (both sides are cut at max_length 32)
LONG = [
    " ".join(TEXTS[1:5]),
    " ".join(TEXTS[6:10] + TEXTS[0:2]),
]


def load_official(path: Path):
    spec = importlib.util.spec_from_file_location("official_bart_score", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_model(folder: Path) -> None:
    from trainers.models.tiny_bart import build_tiny_bart, build_tiny_bart_tokenizer

    corpus = [text for text in TEXTS if text] * 20
    tokenizer = build_tiny_bart_tokenizer(corpus, folder, vocab_size=400)
    build_tiny_bart(tokenizer, folder, seed=0)


def pair_cases() -> tuple[list[str], list[str]]:
    """Every ordered pair of short texts (the empty one included), then long ones."""
    some = TEXTS[::3] + [""]
    sources = [a for a in TEXTS for b in some] + LONG + [LONG[0], TEXTS[0], ""]
    targets = [b for a in TEXTS for b in some] + LONG[::-1] + [TEXTS[2], LONG[1], LONG[0]]
    return sources, targets


def multi_ref_case(scorer) -> dict:
    """SUM/score.py's multi-reference loop (two references each), both aggregations."""
    summaries = TEXTS[0:6]
    references = [[TEXTS[(i + 3) % 10], TEXTS[(i + 6) % 10]] for i in range(6)]
    out = {"summaries": summaries, "references": references}
    for agg in ("mean", "max"):
        hypo_ref = np.array(scorer.multi_ref_score(summaries, references, agg=agg, batch_size=4))
        per_ref = [scorer.score([refs[i] for refs in references], summaries, batch_size=4)
                   for i in range(2)]
        ref_hypo = np.mean(per_ref, axis=0) if agg == "mean" else np.max(per_ref, axis=0)
        out[agg] = {"hypo_ref": hypo_ref.tolist(), "ref_hypo": ref_hypo.tolist(),
                    "avg_f": ((ref_hypo + hypo_ref) / 2).tolist(),
                    "harm_f": ((ref_hypo * hypo_ref) / (ref_hypo + hypo_ref)).tolist()}
    return out


def record(official: Path, folder: Path) -> dict:
    import torch
    import transformers

    module = load_official(official)
    cases = {}
    for max_length in (32, 1024):
        scorer = module.BARTScorer(device="cpu", max_length=max_length, checkpoint=str(folder))
        sources, targets = pair_cases() if max_length == 32 else (TEXTS, TEXTS[::-1])
        scores = scorer.score(sources, targets, batch_size=4)
        cases[str(max_length)] = {"sources": sources, "targets": targets, "scores": scores}
        if max_length == 1024:
            cases["multi_ref"] = multi_ref_case(scorer)
        lengths = [len(scorer.tokenizer(text)["input_ids"]) for text in sources + targets]
        cases[str(max_length)]["longest_tokens"] = max(lengths)
    return {"official": {"file": "bart_score.py", "repository": "neulab/BARTScore",
                         "commit": "248f511",
                         "sha256": hashlib.sha256(official.read_bytes()).hexdigest()},
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
            "batch_size": 4, "device": "cpu", "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True)
    parser.add_argument("--build", action="store_true")
    args = parser.parse_args()
    folder = HERE / "model"
    if args.build:
        build_model(folder)
    result = record(args.official.resolve(), folder)
    (HERE / "recorded.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
