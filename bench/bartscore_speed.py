"""Benchmark (not a test): sumbench's BARTScore against the official `BARTScorer` (neulab/
BARTScore `bart_score.py`, 248f511) at its default batch of 4, at a real shape with random
weights.

The official file is not on PyPI and is never copied here: `--official PATH` (or the
environment variable BARTSCORE_OFFICIAL) names a clone's `bart_score.py` (or the clone's
folder); without it the benchmark says so and exits 0 without timing anything.

`--shape bart-large-cnn` (default; also bart-base, and tiny for a quick look) builds a
`BartForConditionalGeneration` of that published config with random weights (dropout 0,
fp32, `--threads` torch threads) and a byte-level BPE tokenizer trained on the synthetic
words (the model keeps the shape's 50k vocabulary, so the output layer costs what it costs).
Both arms get the same model and tokenizer object (the official class's `from_pretrained`
calls are pointed at them).

Input, REALSumm-like: `--systems` systems' summaries of the same `--documents` documents,
one reference each; summaries of lognormal length (median 60 words, capped), references of
median 50 words. `--metric f` (default) is the official runner's BARTScore for each system
(`SUM/score.py:293-308`: `ref_hypo` and `hypo_ref`, then avg_f); `--metric r` only
`hypo_ref` (recall).
  ours      `BartScoreEvaluator("bartscore-<metric>").score` called system by system, as
            `meta-eval` calls it (a fresh scorer each run, so nothing is kept between runs):
            each distinct source encoded once (a reference is encoded once for every
            system), pairs run longest first in batches at least 4/5 filled (at most
            `--batch-size`, default 16);
  baseline  the official `BARTScorer.score(srcs, tgts, batch_size=4)` per system and
            direction, as the runner calls it.
The arms alternate `--repeat` times (bench/harness.py: medians, ratio > 1: ours faster).
"identical": every score within 1e-5 relative of the official (float32; batching changes
rounding). Goal: ratio >= 2 for `--metric f`.

Where the time goes: the official code wastes only padding (each batch of 4, in input
order, padded to its longest source and target) and repeated encoder passes (a reference is
encoded again for every system); the decoder and its 50k-word output layer at every real
target token, most of the work, are the same in both arms, which bounds the ratio on a CPU
(about 1.2-1.6x measured at the defaults on 2 busy cores; more with more systems, longer and
more varied texts, or on a GPU, where batches of 4 leave it idle). Sizes: a run per arm takes
tens of seconds at bart-base and a minute or more at bart-large-cnn on 2 CPU cores;
`--shape tiny` is a quick check that both arms agree.

    python bench/bartscore_speed.py --official /path/to/BARTScore/bart_score.py
        [--shape bart-large-cnn] [--metric f|r] [--systems 4] [--documents 6]
        [--batch-size 16] [--threads N] [--device cpu] [--seed 0] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import add_options, compare_arms, report  # noqa: E402

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his "
         "from at which but have an they you were her she there one all we their been has "
         "would when who will more if no out so said what up its about into than them can "
         "only other new some time could these two may then do first any my now such like "
         "our over man me even most made after also did many before must through back years "
         "where much your way well down should because each just those people police city "
         "government minister president court company market report week year official "
         "home team game match world country state family school water power storm").split()


def official_path(given: str | None) -> Path | None:
    """The official `bart_score.py` named by `--official` or BARTSCORE_OFFICIAL, if any."""
    text = given or os.environ.get("BARTSCORE_OFFICIAL")
    if not text:
        return None
    path = Path(text).expanduser()
    path = path / "bart_score.py" if path.is_dir() else path
    return path if path.is_file() else None


def load_official(path: Path, model, tokenizer):
    """The official module, its `from_pretrained` calls answering with `model`, `tokenizer`."""
    spec = importlib.util.spec_from_file_location("official_bart_score", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Given:
        def __init__(self, value):
            self.value = value

        def from_pretrained(self, *args, **kwargs):
            return self.value

    module.BartForConditionalGeneration = Given(model)
    module.BartTokenizer = Given(tokenizer)
    return module


def synthetic_text(rng, words: int) -> str:
    """`words` random words in sentences of about 20 words."""
    chosen = rng.choice(WORDS, size=max(1, words)).tolist()
    sentences = [" ".join(chosen[start:start + 20]) for start in range(0, len(chosen), 20)]
    return " ".join(sentence.capitalize() + "." for sentence in sentences)


def workload(systems: int, documents: int, seed: int) -> tuple[dict[str, list[str]], list[str]]:
    """(system -> its summary of each document, the reference of each document)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(50), 0.4, documents), 10, 400).astype(int)
    references = [synthetic_text(rng, n) for n in lengths]
    summaries = {}
    for index in range(systems):
        lengths = np.clip(rng.lognormal(np.log(60), 0.5, documents), 10, 600).astype(int)
        summaries[f"system{index}"] = [synthetic_text(rng, n) for n in lengths]
    return summaries, references


def build(shape: str, seed: int, folder: Path):
    from trainers.models.tiny_bart import build_tiny_bart, build_tiny_bart_tokenizer

    corpus = [" ".join(WORDS)] * 50 + [word.capitalize() + "." for word in WORDS]
    tokenizer = build_tiny_bart_tokenizer(corpus, folder, vocab_size=1000)
    return build_tiny_bart(tokenizer, seed=seed, shape=shape, init_std=0.02,
                           positions=1024), tokenizer


def run_ours(model, tokenizer, summaries, references, args) -> list[float]:
    from leaderboard.evaluators.bartscore.evaluator import BartScoreEvaluator
    from leaderboard.evaluators.bartscore.scoring import BartScorer

    scorer = BartScorer(model, tokenizer, device=args.device)
    evaluator = BartScoreEvaluator(f"bartscore-{args.metric}",
                                   {"batch_size": args.batch_size}, scorer=scorer)
    lists = [[reference] for reference in references]
    return [value for texts in summaries.values()
            for value in evaluator.score(texts, lists, None)]


def run_official(scorer, summaries, references, metric: str) -> list[float]:
    """As SUM/score.py: per system, ref_hypo and hypo_ref at batch 4, then avg_f."""
    values: list[float] = []
    for texts in summaries.values():
        hypo_ref = np.array(scorer.score(texts, references, batch_size=4))
        if metric == "r":
            values += hypo_ref.tolist()
            continue
        ref_hypo = np.array(scorer.score(references, texts, batch_size=4))
        values += ((ref_hypo + hypo_ref) / 2).tolist()
    return values


def same(first: list[float], second: list[float]) -> bool:
    return len(first) == len(second) and all(
        abs(a - b) <= 1e-5 * abs(b) for a, b in zip(first, second))


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", help="the official bart_score.py (or its clone's "
                                           "folder); default: $BARTSCORE_OFFICIAL")
    parser.add_argument("--shape", default="bart-large-cnn",
                        choices=("tiny", "bart-base", "bart-large-cnn"))
    parser.add_argument("--metric", default="f", choices=("f", "r"))
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--documents", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16, help="sumbench's batch")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    for name in ("systems", "documents", "batch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = official_path(args.official)
    if path is None:
        print("bartscore_speed: skipped: the official bart_score.py was not found (give "
              "--official PATH or BARTSCORE_OFFICIAL; it is in github.com/neulab/BARTScore)")
        return 0
    import torch

    torch.set_num_threads(args.threads)
    summaries, references = workload(args.systems, args.documents, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        model, tokenizer = build(args.shape, args.seed, Path(folder))
    model.to(args.device)
    official = load_official(path, model, tokenizer).BARTScorer(device=args.device)
    result = compare_arms(
        lambda: run_ours(model, tokenizer, summaries, references, args),
        lambda: run_official(official, summaries, references, args.metric),
        repeat=args.repeat, same=same)
    pairs = args.systems * args.documents
    tokens = sum(len(ids) for ids in tokenizer(references + [t for texts in summaries.values()
                                                               for t in texts])["input_ids"])
    extra = {"shape": args.shape, "metric": f"bartscore-{args.metric}",
             "systems": args.systems, "documents": args.documents, "summaries": pairs,
             "batch_size": args.batch_size, "official_batch_size": 4, "device": args.device,
             "threads": torch.get_num_threads(), "tokens": tokens,
             "official_sha256": __import__("hashlib").sha256(path.read_bytes()).hexdigest()}
    report("bartscore_speed", result, as_json=args.json, extra=extra,
           labels=("sumbench bartscore (distinct sources encoded once, length-sorted)",
                   "official BARTScorer.score, batch 4, per system and direction"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
