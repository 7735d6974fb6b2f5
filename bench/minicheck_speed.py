"""Benchmark (not a test): `--presence minicheck` against MiniCheck's own `Inferencer` batching.

A classifier of MiniCheck-RoBERTa-Large's shape (roberta-large's config, 2 labels, random
weights; `--shape tiny` for a quick check) scores REALSumm (summary, SCU) pairs, evenly spaced
pairs (`--sample pairs`, the default: nearly every pair has a summary of its own) or every
system's summary against each SCU of evenly spaced examples (`--sample examples`, as a Pyramid
run pairs them; at least one example, about 250 pairs), two ways, alternated `--repeat` times
(bench/harness.py: min and median of each, ratio of medians):
  ours      MiniCheckBackend: each summary chunked once, every (chunk, claim) input of the
            sample longest first, in batches of at most `--batch-size` at least 4/5 filled;
  official  MiniCheck's `Inferencer.fact_check` (Liyan06/MiniCheck b58b9fa): pair by pair,
            each pair's chunks in batches of 16 (its default), on the same model object.
"identical": every probability within 1e-6 and the same labels. The official package is read
from `--official DIR` or $MINICHECK_OFFICIAL (DIR holds its `minicheck/` folder, e.g.
`git archive b58b9fa minicheck | tar -x -C DIR`); without it the benchmark says so and exits 2.

    python bench/minicheck_speed.py --official DIR [--subset 24] [--repeat 5] [--json]
                                    [--shape tiny] [--device cuda]
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
from presence_speed import DEFAULT_DATA, ROBERTA_LARGE, sample_pairs  # noqa: E402

from harness import add_options, compare_arms, cpus, report  # noqa: E402

TOLERANCE = 1e-6
OFFICIAL_BATCH = 16  # MiniCheck(batch_size=16), its default
OFFICIAL_FILES = ("inference.py", "minicheck.py", "utils.py")


def official_inference(folder: Path | None, workdir: Path):
    """The official `minicheck.inference` module, imported from a copy with a blank
    `__init__.py` (the original calls `nltk.download`); None when the files are absent."""
    if folder is None or not all((folder / "minicheck" / name).is_file()
                                 for name in OFFICIAL_FILES):
        return None
    package = workdir / "minicheck"
    package.mkdir()
    for name in OFFICIAL_FILES:
        shutil.copy(folder / "minicheck" / name, package / name)
    (package / "__init__.py").write_text("")
    sys.path.insert(0, str(workdir))
    import tasks.plumbing.punkt  # noqa: F401  (NLTK's English Punkt without a download)

    return importlib.import_module("minicheck.inference")


def official_checker(inference, model, tokenizer):
    """An official `Inferencer` holding our model object (its __init__ only loads from the
    hub), set up as `MiniCheck('roberta-large').score` sets it up."""
    import torch

    checker = object.__new__(inference.Inferencer)
    checker.model_name, checker.model, checker.tokenizer = "roberta-large", model, tokenizer
    checker.max_model_len, checker.batch_size, checker.chunk_size = 512, OFFICIAL_BATCH, 400
    checker.softmax = torch.nn.Softmax(dim=-1)
    return checker


def build_model(dataset, seed: int, shape: str):
    """A random 2-label RoBERTa classifier (roberta-large's config or a tiny one) and a
    RoBERTa-style BPE trained on the data (30,000 tokens at the real shape)."""
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from trainers.models.tiny import build_tiny_roberta_tokenizer, tiny_roberta_config

    texts = list(dataset.references) + [s for system in dataset.systems[:3]
                                        for s in dataset.summaries[system]]
    if shape == "tiny":
        tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=800)
        config = tiny_roberta_config(len(tokenizer), tokenizer.pad_token_id, dropout=0.0)
    else:
        tokenizer = build_tiny_roberta_tokenizer(texts, vocab_size=30000)
        config = RobertaConfig(**ROBERTA_LARGE, pad_token_id=tokenizer.pad_token_id)
    config.num_labels = 2
    torch.manual_seed(seed)
    return RobertaForSequenceClassification(config).eval(), tokenizer


def same(ours, official) -> bool:
    return len(ours) == len(official) and all(
        abs(a - b) <= TOLERANCE and (a > 0.5) == (b > 0.5) for a, b in zip(ours, official))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path,
                        default=os.environ.get("MINICHECK_OFFICIAL") or None,
                        help="folder holding the official minicheck/ package "
                             "(default: $MINICHECK_OFFICIAL)")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--subset", type=int, default=24, help="about this many pairs")
    parser.add_argument("--sample", choices=("pairs", "examples"), default="pairs")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shape", choices=("roberta-large", "tiny"), default="roberta-large")
    parser.add_argument("--threads", type=int, default=cpus())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    add_options(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        inference = official_inference(args.official, Path(workdir))
        if inference is None:
            print(f"skipped: the official MiniCheck package is not at {args.official} (give "
                  "--official DIR or $MINICHECK_OFFICIAL, DIR holding minicheck/"
                  f"{{{','.join(OFFICIAL_FILES)}}} of Liyan06/MiniCheck b58b9fa)")
            return 2
        return run(args, inference)


def run(args, inference) -> int:
    import torch

    from leaderboard.evaluators.pyramid.minicheck import MiniCheckBackend
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    torch.set_num_threads(args.threads)
    dataset = load_pyramid_dataset(args.data, labels=False)
    total = sum(len(units) for units in dataset.units["scus"]) * len(dataset.systems)
    pairs, described = sample_pairs(dataset, total, args.subset, args.sample)
    model, tokenizer = build_model(dataset, args.seed, args.shape)
    model.to(args.device)
    backend = MiniCheckBackend(model, tokenizer, batch_size=args.batch_size,
                               device=args.device)
    checker = official_checker(inference, model, tokenizer)
    documents, claims = [s for s, _ in pairs], [u for _, u in pairs]

    def ours():
        backend._chunk_memo.clear()  # each run chunks its summaries afresh
        backend.forward_calls = 0
        return [result.probability for result in backend.score(pairs)]

    def official():
        return checker.fact_check(documents, claims)[0]

    result = compare_arms(ours, official, repeat=args.repeat, same=same)
    extra = {"pairs": len(pairs), "distinct_summaries": len(set(documents)),
             "subset": described, "sample": args.sample, "shape": args.shape,
             "batch_size": args.batch_size,
             "official_batch_size": OFFICIAL_BATCH, "threads": args.threads,
             "device": args.device, "forward_calls": backend.forward_calls,
             "torch": torch.__version__}
    report("minicheck_speed", result, as_json=args.json, extra=extra,
           labels=("ours (chunked once, batched across pairs, sorted)",
                   "official Inferencer (pair by pair, batch 16)"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
