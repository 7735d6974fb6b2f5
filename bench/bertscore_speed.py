"""Benchmark (not a test; the benchmark "bertscore_speed"): BERTScore P/R/F of REALSumm-sized
input, sumbench's evaluators (leaderboard/evaluators/bertscore) against the official
`bert_score.score` called once per system, as users call it.

Input: `--systems` systems (REALSumm: 25) of `--summaries` summaries each (REALSumm: 100), one
reference each, the same references for every system; synthetic English-like texts of
REALSumm's lengths (lognormal word counts, median about 60 words for references and 65 for
system summaries, 3 to 4 sentences). The model: `--shape roberta-large` (default; also
roberta-base, and tiny for a quick look), a `RobertaModel` of that published config with random
weights (seeded), saved with a byte-level BPE trained on the texts as a `RobertaTokenizer`
whose saved setting adds the prefix space (so the official code, under transformers 5, encodes
as it did under transformers 4: see leaderboard/evaluators/bertscore/encoder.py), at
bert-score's layer for the shape (17, 10; tiny: 2).
  ours      one evaluator load (the encoder kept) and, system after system, `bertscore-p`,
            `-r` and `-f` of its summaries: the references embedded once, each text once;
  baseline  `bert_score.score(cands, refs, model_type=FOLDER, num_layers=N, batch_size=64)`
            per system: the model loaded and every reference embedded again in each call.
Both arms alternate `--repeat` times (bench/harness.py); ratio = median baseline / median
ours, goal >= 1.5. "identical": every P, R and F of every summary within 1e-5 (batching
changes float rounding); the script fails when they are not.

Sizes: roberta-large in fp32 embeds a few hundred tokens a second on 2 CPU cores, so the real
input (25 x 100 summaries, about 5,000 texts a baseline run) takes hours a run there: on such a
machine run a smaller shape or input, e.g. `--shape tiny --repeat 3` (seconds) or
`--shape roberta-base --systems 5 --summaries 20 --repeat 3`, and the real shape where there
are cores (or a GPU: `--device cuda`).

    python bench/bertscore_speed.py [--shape roberta-large] [--systems 25] [--summaries 100]
                                    [--batch-size 64] [--device cpu] [--threads N]
                                    [--seed 0] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from encoder_speed import ROBERTA_SHAPES  # noqa: E402

from harness import add_options, compare_arms, cpus, report  # noqa: E402

#: bert-score's layer of each shape (bert_score/utils.py model2layers; tiny: its last)
LAYERS = {"roberta-large": 17, "roberta-base": 10, "tiny": 2}
TOLERANCE = 1e-5
SYLLABLES = ("ka", "lo", "mer", "tan", "ri", "sel", "po", "den", "vi", "gar", "un", "bis",
             "tro", "ma", "fel", "ont", "sa", "re", "quil", "ber")
SMALL_WORDS = ("the", "a", "of", "in", "to", "and", "was", "on", "for", "with", "by", "said")


def _text(rng: np.random.Generator, words: list[str], median_words: float) -> str:
    """3-4 sentences of about `median_words` words in all (lognormal)."""
    count = int(np.clip(rng.lognormal(np.log(median_words), 0.3), 15, 160))
    sentences = int(rng.integers(3, 5))
    cuts = sorted(rng.choice(np.arange(4, count - 3), size=sentences - 1, replace=False))
    chosen = [words[i] if rng.random() < 0.7 else SMALL_WORDS[i % len(SMALL_WORDS)]
              for i in rng.integers(0, len(words), size=count)]
    parts = np.split(np.array(chosen, dtype=object), cuts)
    return " ".join(" ".join(part).capitalize() + "." for part in parts)


def synthetic_input(systems: int, summaries: int, seed: int):
    """(references, {system: summaries}) of REALSumm's shape (see the module)."""
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4))))
             for _ in range(3000)]
    references = [_text(rng, words, 60) for _ in range(summaries)]
    outputs = {f"system{number:02d}": [_text(rng, words, 65) for _ in range(summaries)]
               for number in range(systems)}
    return references, outputs


def build_model_folder(shape: str, texts: list[str], folder: Path, seed: int) -> str:
    """A random RobertaModel of the shape and a BPE trained on `texts`, saved in `folder`."""
    from transformers import RobertaConfig, RobertaTokenizer

    from trainers.encoders.heads import build_random_encoder
    from trainers.models.tiny import build_tiny_roberta_tokenizer

    fast = build_tiny_roberta_tokenizer(texts, vocab_size=8000 if shape != "tiny" else 1000)
    tokenizer = RobertaTokenizer(vocab=fast.get_vocab(), merges=_merges(fast),
                                 add_prefix_space=True, model_max_length=512)
    config = RobertaConfig(**ROBERTA_SHAPES[shape], type_vocab_size=1, layer_norm_eps=1e-5,
                           pad_token_id=1, bos_token_id=0, eos_token_id=2)
    build_random_encoder(config, seed).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _merges(fast) -> list[tuple[str, str]]:
    import json

    merges = json.loads(fast.backend_tokenizer.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in merges]


def ours_arm(folder: str, layer: int, references, outputs, batch_size: int, device: str):
    from leaderboard.evaluators.bertscore.encoder import load_encoder
    from leaderboard.evaluators.bertscore.evaluator import BertScoreEvaluator

    encoder = load_encoder(folder, layer, device=device)
    options = {"model": folder, "layer": layer, "batch_size": batch_size, "device": device}
    sides = [BertScoreEvaluator(side, options, encoder=encoder) for side in "prf"]
    lists = [[reference] for reference in references]
    return {system: [side.score(texts, lists, None) for side in sides]
            for system, texts in outputs.items()}


def official_arm(folder: str, layer: int, references, outputs, batch_size: int, device: str):
    from bert_score import score

    return {system: [values.tolist() for values in score(
                texts, references, model_type=folder, num_layers=layer, device=device,
                batch_size=batch_size)]
            for system, texts in outputs.items()}


def largest_difference(first: dict, second: dict) -> float:
    return max(abs(a - b) for system in first for side_a, side_b in
               zip(first[system], second[system]) for a, b in zip(side_a, side_b))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(ROBERTA_SHAPES), default="roberta-large")
    parser.add_argument("--systems", type=int, default=25)
    parser.add_argument("--summaries", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    import bert_score  # noqa: F401  (both arms' imports outside the timings)

    import leaderboard.evaluators.bertscore.evaluator  # noqa: F401
    torch.set_num_threads(args.threads or cpus())
    references, outputs = synthetic_input(args.systems, args.summaries, args.seed)
    layer = LAYERS[args.shape]
    with tempfile.TemporaryDirectory(prefix="bertscore-speed-") as root:
        texts = references + [text for texts in outputs.values() for text in texts]
        folder = build_model_folder(args.shape, texts, Path(root) / args.shape, args.seed)
        arm_args = (folder, layer, references, outputs, args.batch_size, args.device)
        result = compare_arms(lambda: ours_arm(*arm_args), lambda: official_arm(*arm_args),
                              repeat=args.repeat,
                              same=lambda a, b: largest_difference(a, b) <= TOLERANCE)
    difference = largest_difference(result["outputs"]["ours"], result["outputs"]["baseline"])
    summaries = args.systems * args.summaries
    report("bertscore_speed", result, as_json=args.json,
           extra={"shape": args.shape, "layer": layer, "systems": args.systems,
                  "summaries": summaries, "device": args.device,
                  "largest_difference": difference,
                  "summaries_per_s": round(summaries / result["ours"]["median"], 2),
                  "baseline_summaries_per_s": round(summaries / result["baseline"]["median"],
                                                    2)},
           labels=("sumbench bertscore-p/-r/-f (one load, references embedded once)",
                   "bert_score.score once per system"))
    assert result["identical"], f"P/R/F differ by up to {difference}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
