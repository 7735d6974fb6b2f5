"""Training throughput: length-grouped dynamic padding vs padding every batch to the maximum.

A benchmark, not a test (never collected by pytest). On a tiny T5 (trainers.models.tiny) and a
synthetic long-tailed length mix like USB documents (lognormal source lengths with a few very
long ones, shorter lognormal targets), it runs the same optimizer steps (same examples per
step, same loss code as trainers.finetuning.finetune) three ways in one process:

  (a) grouped:   trainers.finetuning.data.plan_epoch batches (similar lengths), padded to the
  batch's longest;
  (b) random:    random batches, padded to the batch's longest (dynamic padding only);
  (c) max:       the same random batches padded to the longest example of the data set;

and reports real (non-padding) tokens per second of each. The arms alternate `--repeat` times
(bench/harness.py: min and median, ratio of medians); "ratio" is grouped vs random-order
batches with dynamic padding (the realistic baseline), "ratio_vs_max" grouped vs pad-to-max;
"identical": every arm processed the same real tokens (the same examples once).

    python3 bench/train_speed.py [--examples 192] [--batch-size 8] [--max-source 1024]
                                 [--threads 1] [--seed 0] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import add_options, compare_arms, report  # noqa: E402


def synthetic_examples(count: int, max_source: int, max_target: int, vocab: int, seed: int):
    """TrainingExamples with lognormal lengths; ids are random non-special tokens + EOS (1)."""
    from trainers.finetuning.data import TrainingExamples

    rng = np.random.default_rng(seed)
    sources = np.clip(rng.lognormal(5.0, 0.9, count), 16, max_source).astype(int)
    targets = np.clip(rng.lognormal(3.3, 0.6, count), 4, max_target).astype(int)
    long_ones = rng.choice(count, size=max(1, count // 50), replace=False)
    sources[long_ones] = max_source                     # a few documents hit the budget

    def ids(length):
        return rng.integers(3, vocab, size=length - 1).tolist() + [1]
    return TrainingExamples([ids(n) for n in sources], [ids(n) for n in targets],
                            ["task"] * count, [f"doc{i}" for i in range(count)], ("task",))


def pad_to(batch: dict, source_len: int, target_len: int) -> dict:
    import torch.nn.functional as F

    values = {"input_ids": 0, "attention_mask": 0, "decoder_input_ids": 0, "labels": -100}
    return {key: F.pad(tensor, (0, (source_len if key in ("input_ids", "attention_mask")
                                    else target_len) - tensor.shape[1]), value=values[key])
            for key, tensor in batch.items()}


def time_steps(model, examples, steps, pad_max: tuple[int, int] | None) -> tuple[float, int]:
    """Seconds for one forward/backward/AdamW step per batch, and real tokens processed."""
    import torch
    import torch.nn.functional as F

    from trainers.finetuning.data import collate

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    real_tokens = 0
    started = time.perf_counter()
    for indices in steps:
        batch = collate(examples, indices, pad_token_id=0, decoder_start_token_id=0)
        real_tokens += int(batch["attention_mask"].sum()) + int((batch["labels"] >= 0).sum())
        if pad_max is not None:
            batch = pad_to(batch, *pad_max)
        labels = batch.pop("labels")
        logits = model(**batch, use_cache=False).logits
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started, real_tokens


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-source", type=int, default=1024)
    parser.add_argument("--max-target", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import torch

    from trainers.finetuning.data import plan_epoch
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    torch.set_num_threads(args.threads)
    tokenizer = build_tiny_tokenizer(["a tiny corpus for the benchmark tokenizer"] * 10)
    examples = synthetic_examples(args.examples, args.max_source, args.max_target,
                                  len(tokenizer), args.seed)
    lengths = examples.source_lengths
    grouped = [np.concatenate(step) for step in plan_epoch(
        np.arange(len(examples)), lengths, examples.target_lengths, args.batch_size, 1,
        args.seed, 0, megabatch_steps=50)]
    rng = np.random.default_rng(args.seed)
    shuffled = rng.permutation(len(examples))
    random_steps = [shuffled[i:i + args.batch_size]
                    for i in range(0, len(shuffled), args.batch_size)]
    longest = (int(lengths.max()), int(examples.target_lengths.max()))

    def arm(steps, pad_max):
        def run():
            model = build_tiny_t5(tokenizer, seed=args.seed).train()
            return time_steps(model, examples, steps, pad_max)[1]  # real tokens processed
        return run

    arm(grouped[:2], None)()  # warm-up
    versus_random = compare_arms(arm(grouped, None), arm(random_steps, None),
                                 repeat=args.repeat)
    versus_max = compare_arms(arm(grouped, None), arm(random_steps, longest),
                              repeat=max(1, args.repeat // 2))
    tokens = versus_random["outputs"]["ours"]
    extra = {"examples": len(examples), "batch_size": args.batch_size, "threads": args.threads,
             "real_tokens": tokens, "source_median": int(np.median(lengths)),
             "source_max": longest[0],
             "tokens_per_s": {"grouped": round(tokens / versus_random["ours"]["median"]),
                              "random": round(tokens / versus_random["baseline"]["median"]),
                              "max": round(tokens / versus_max["baseline"]["median"])},
             "ratio_vs_max": round(versus_max["ratio"], 3),
             "identical_vs_max": versus_max["identical"]}
    report("train_speed", versus_random, as_json=args.json, extra=extra,
           labels=("length-grouped batches, dynamic padding",
                   "random-order batches, dynamic padding"))
    return 0 if versus_random["identical"] and versus_max["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
