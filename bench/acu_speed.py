"""Benchmark (not a test): A2CU's matching, the classifier over (summary, ACU) pairs, sumbench's
(leaderboard.evaluators.acu.a2cu.UnitMatcher) against the official `autoacu==0.1.0`
`A2CU.acu_matching` (bench/acu_official.py: installed with `pip install --no-deps --target
.ci-autoacu autoacu==0.1.0`, only its CUDA device and hub tokenizer shimmed), at a real shape
with random weights, on CPU.

`--shape xlarge` is the real classifier's (`Yale-LILY/a2cu-classifier` is DeBERTa-XLarge: 48
layers of 1024, 16 heads, a 50,265-token vocabulary); `large` (24 layers) and `base` (12 of
768) are smaller DeBERTa v1 shapes for machines where xlarge is too slow (two CPU cores take
seconds per xlarge pair), `tiny` a quick look. Weights are random (seeded), their entailment
output spread over the pairs so that both verdicts occur (bench/acu_official.spread_head).

The input is `--summaries` synthetic summaries of about 60 words (REALSumm's CNN/DM
summaries) with `--units` ACUs of 4 to 12 words each (RoSE's references have about ten),
words drawn from a seeded vocabulary, tokenized by a byte-level BPE trained on them. Arms,
alternated `--repeat` times (bench/harness.py: the ratio of medians, > 1: ours faster):
  ours      `unit_recall` over the pairs: each distinct text tokenized once, the pairs sorted
            by length and run `--batch-size` at a time (default 32, the evaluator's);
  baseline  `acu_matching` as `A2CU.score` calls it (its files, one pair per batch: its
            default `matching_batch_size=1`), or `--baseline-batch-size`.
Each run of ours starts from an empty verdict cache (the timing is of the work, not of
reuse). "identical": every summary's score the same in both arms. Goal: ratio >= 2.

The gain is the batching: with `--baseline-batch-size 32` the two arms take the same time on
two CPU cores (base shape: 0.98x), since these pairs differ little in length. The official
code offers batches but `A2CU.score` defaults to one pair per batch; batching pays most where
a call's fixed cost is large (a loaded machine, small shapes, a GPU). What meta-eval saves
beyond this is reuse, which is not timed here: a reference's units generated once for every
system, and `a2cu-f` after `a2cu-r` classifying nothing new.

    python bench/acu_speed.py --shape base --summaries 4 --units 8 [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.acu_official import (  # noqa: E402
    DEBERTA_SHAPES,
    build_classifier,
    build_deberta_tokenizer,
    official_autoacu,
    official_folder,
)
from bench.harness import add_options, compare_arms, report  # noqa: E402


def synthetic(summaries: int, units: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    """`summaries` texts of about 60 words and `units` short units for each."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in
                          range(rng.randint(2, 9))) for _ in range(3000)]

    def words(count: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(count)).capitalize() + "."
    texts = [words(rng.randint(45, 75)) for _ in range(summaries)]
    return texts, [[words(rng.randint(4, 12)) for _ in range(units)] for _ in texts]


def official_arm(acu, folder: Path, texts, units, batch_size: int):
    def run() -> list[float]:
        with tempfile.TemporaryDirectory() as scratch:
            paths = {name: Path(scratch) / name for name in ("ref", "cand", "acus", "out")}
            paths["ref"].write_text("".join(text + "\n" for text in texts))
            paths["cand"].write_text("".join(text + "\n" for text in texts))
            paths["acus"].write_text("".join(json.dumps({"acus": row}) + "\n" for row in units))
            acu.acu_matching(*(str(paths[name]) for name in ("ref", "cand", "acus", "out")),
                             scratch, batch_size)
            return [float(line) for line in paths["out"].read_text().split()]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(DEBERTA_SHAPES), default="xlarge")
    parser.add_argument("--summaries", type=int, default=8)
    parser.add_argument("--units", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--baseline-batch-size", type=int, default=1)
    parser.add_argument("--device", default="cpu",
                        help="cpu (default), cuda, cuda:N: both arms' classifier")
    add_options(parser)
    args = parser.parse_args()
    folder = official_folder()
    if folder is None:
        sys.exit("the official autoacu 0.1.0 is not installed: pip install --no-deps --target "
                 ".ci-autoacu autoacu==0.1.0")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from leaderboard.evaluators.acu.a2cu import UnitMatcher, unit_recall

    torch.set_grad_enabled(False)
    texts, units = synthetic(args.summaries, args.units)
    root = Path(tempfile.mkdtemp(prefix="acu-speed-"))
    tokenizer = build_deberta_tokenizer(texts + sum(units, []), vocab_size=8000)
    pairs = [(text, unit) for text, row in zip(texts, units) for unit in row]
    build_classifier(tokenizer, root, shape=args.shape, pairs=pairs)
    model = AutoModelForSequenceClassification.from_pretrained(root).eval().to(args.device)
    tokenizer = AutoTokenizer.from_pretrained(root)

    def ours() -> list[float]:
        return unit_recall(UnitMatcher(model, tokenizer, args.batch_size), texts, units)
    with official_autoacu(folder, {"microsoft/deberta-xlarge-mnli": root}) as autoacu:
        official = autoacu.A2CU.__new__(autoacu.A2CU)  # only the matching half is timed
        official.matching_model, official.matching_tok = model, tokenizer
        # its batches go to f"cuda:{device}", which the shim turns into `device`
        official.device, official.no_ref = args.device, True
        result = compare_arms(ours, official_arm(official, root, texts, units,
                                                 args.baseline_batch_size),
                              repeat=args.repeat)
    report("a2cu_matching_speed", result, as_json=args.json, extra={
        "shape": args.shape, "pairs": len(pairs), "batch_size": args.batch_size,
        "baseline_batch_size": args.baseline_batch_size, "device": args.device,
        "scores": sorted(set(result["outputs"]["ours"]))})


if __name__ == "__main__":
    main()
