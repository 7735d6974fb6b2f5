"""Benchmark (not a test): NLI presence over (summary, SCU) pairs of REALSumm.

A tiny randomly initialised classifier (trainers.models.tiny.build_tiny_classifier) scores about
`--subset` of the 26,400 pairs three ways, alternated `--repeat` times (bench/harness.py: min
and median of each, ratio of medians). `--sample pairs` (default) takes evenly spaced pairs
(nearly every pair has its own summary); `--sample examples` takes evenly spaced whole examples
(every system's summary against each of the example's SCUs, as a Pyramid run pairs them, so
each summary comes with ~11 units and a few pairs repeat):
  ours      NLIBackend: longest first, batches of at most `--batch-size` at least 4/5
            filled (each padded to its longest pair), each distinct pair once;
  baseline  the real Lite²Pyramid loop: batches of 32 in data order padded to 400 tokens
            ("ratio");
  one pair  one pair per forward pass, truncated at 400 tokens too ("ratio_one_pair").
"identical": every probability within 1e-5 (padding changes float rounding). `--full` also
streams all pairs and reports RSS at 25/50/100%: memory stays flat (one chunk at a time;
`malloc_trim` after each chunk unless `--no-trim`, since glibc keeps freed tensor buffers).
`--threads`: torch intra-op threads for every arm, by default the CPUs this process may use.

    python bench/presence_speed.py [--subset 800] [--sample pairs|examples] [--repeat 5]
                                   [--json] [--full] [--device cuda]
                                   [--shape roberta-large --subset 64 --no-one-pair]
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "bench"))
sys.path.insert(0, str(REPO_ROOT))
from harness import add_options, compare_arms, cpus, report, timings  # noqa: E402

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "pyramid" / "realsumm"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mib() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except OSError:
        return float("nan")


def malloc_trim() -> bool:
    """glibc `malloc_trim(0)`: give free heap memory back to the OS (False where unavailable)."""
    import ctypes
    import ctypes.util

    try:
        return bool(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def iter_pairs(dataset) -> Iterator[tuple[str, str]]:
    """Every (summary, SCU) pair, example by example (all systems of an example together, so
    each quarter of the stream has a similar length mix), without building a list."""
    for position, units in enumerate(dataset.units["scus"]):
        for system in dataset.systems:
            summary = dataset.summaries[system][position]
            for unit in units:
                yield summary, unit


def sample_pairs(dataset, total: int, subset: int, how: str) -> tuple[list, str]:
    """About `subset` pairs: evenly spaced pairs, or every pair of evenly spaced examples."""
    if how == "pairs":
        stride = max(1, total // subset)
        chosen = list(itertools.islice(iter_pairs(dataset), 0, None, stride))[:subset]
        return chosen, f"every {stride}th of {total} (summary, SCU) pairs"
    count = len(dataset)
    wanted = min(count, max(1, round(subset * count / total)))
    examples = [round(i * count / wanted) for i in range(wanted)]
    chosen = [(dataset.summaries[system][i], unit) for i in examples
              for system in dataset.systems for unit in dataset.units["scus"][i]]
    return chosen, (f"all {len(chosen)} pairs of examples {examples} "
                    f"({len(dataset.systems)} systems each)")


#: roberta-large's published config (the shape of Lite²Pyramid's NLI models)
ROBERTA_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                 "intermediate_size": 4096, "vocab_size": 50265, "max_position_embeddings": 514,
                 "type_vocab_size": 1, "layer_norm_eps": 1e-5}


def build_model(dataset, seed: int, shape: str = "tiny"):
    """A random classifier and a tokenizer trained on the data: the tiny test shape, or
    roberta-large's config (3 NLI labels) with a BPE of up to 30,000 tokens, which cuts these
    texts into about as many tokens per word as roberta's own BPE (the tiny 800-token one
    doubles them, and with them the padding the baseline adds)."""
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    texts = list(dataset.references) + [s for system in dataset.systems[:3]
                                        for s in dataset.summaries[system]]
    tokenizer = build_tiny_tokenizer(texts, vocab_size=800 if shape == "tiny" else 30000)
    if shape == "tiny":
        return build_tiny_classifier(tokenizer, seed=seed), tokenizer
    labels = ("contradiction", "neutral", "entailment")
    config = RobertaConfig(**ROBERTA_LARGE, pad_token_id=tokenizer.pad_token_id, num_labels=3,
                           id2label=dict(enumerate(labels)),
                           label2id={name: i for i, name in enumerate(labels)})
    torch.manual_seed(seed)
    return RobertaForSequenceClassification(config).eval(), tokenizer


def run_full(backend, dataset, total: int, trim: bool) -> dict:
    """Stream every pair through the batched backend; RSS at 25%, 50%, 100%."""
    marks = {round(total * f): f"{int(f * 100)}%" for f in (0.25, 0.5, 1.0)}
    memory, start = {}, time.perf_counter()
    for count, _ in enumerate(backend.score_iter(iter_pairs(dataset)), start=1):
        if trim and count % backend.chunk_size == 0:
            malloc_trim()
        if count in marks:
            memory[marks[count]] = {"peak_rss_mib": round(peak_rss_mib(), 1),
                                    "current_rss_mib": round(current_rss_mib(), 1),
                                    "seconds": round(time.perf_counter() - start, 2)}
    seconds = time.perf_counter() - start
    return {"pairs": total, "seconds": round(seconds, 2), "pairs_per_s": round(total / seconds, 1),
            "forward_calls": backend.forward_calls, "memory": memory}


def naive_scores(model, tokenizer, pairs) -> list[float]:
    """The plain loop: tokenize one pair (truncated at 400 tokens, as ours and the release),
    one forward pass, softmax over the entailment class."""
    import torch

    from leaderboard.evaluators.pyramid.nli_outputs import NLI_MAX_LENGTH
    from leaderboard.evaluators.pyramid.presence_models import entailment_index
    from trainers.inference.generation import model_device

    entail = entailment_index(model.config.id2label, model.config.label2id)
    values = []
    with torch.inference_mode():
        for summary, unit in pairs:
            encoded = tokenizer(summary, unit, truncation=True, max_length=NLI_MAX_LENGTH,
                                return_tensors="pt").to(model_device(model))
            values.append(torch.softmax(model(**encoded).logits[0], -1)[entail].item())
    return values


def lite2pyramid_loop(model, tokenizer, pairs, batch_size: int = 32,
                      max_length: int = 400) -> list[float]:
    """The real Lite²Pyramid loop: batches of 32 in data order, every batch padded to 400
    tokens (padding="max_length"), softmax, the 3-class entailment probability."""
    import torch

    from leaderboard.evaluators.pyramid.presence_models import entailment_index
    from trainers.inference.generation import model_device

    entail = entailment_index(model.config.id2label, model.config.label2id)
    values = []
    with torch.inference_mode():
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start:start + batch_size]
            encoded = tokenizer([s for s, _ in batch], [u for _, u in batch], truncation=True,
                                max_length=max_length, padding="max_length",
                                return_tensors="pt").to(model_device(model))
            probabilities = torch.softmax(model(**encoded).logits, -1)[:, entail]
            values.extend(probabilities.tolist())
    return values


def close(first, second) -> bool:
    return len(first) == len(second) and max(
        (abs(a - b) for a, b in zip(first, second)), default=0.0) <= 1e-5


def compare(model, tokenizer, dataset, total: int, args) -> tuple[dict, dict, dict]:
    """Ours (NLIBackend: length-sorted batches, dynamic padding, each distinct pair once) vs
    the Lite²Pyramid loop and vs one pair per forward, on the same sample (`--sample`)."""
    from leaderboard.evaluators.pyramid.presence import NLIBackend

    pairs, described = sample_pairs(dataset, total, args.subset, args.sample)
    backend = NLIBackend(model, tokenizer, batch_size=args.batch_size,
                         chunk_size=args.chunk_size, device=args.device)

    def ours():
        return [r.details["p3"] for r in backend.score(pairs)]

    versus_loop = compare_arms(ours, lambda: lite2pyramid_loop(model, tokenizer, pairs),
                               repeat=args.repeat, same=close)
    extra = {"pairs": len(pairs), "distinct_pairs": len(set(pairs)),
             "distinct_summaries": len({summary for summary, _ in pairs}),
             "sample": args.sample, "subset": described, "shape": args.shape,
             "identical_one_pair": None}
    if args.no_one_pair:
        return versus_loop, None, extra
    versus_one = compare_arms(ours, lambda: naive_scores(model, tokenizer, pairs),
                              repeat=args.repeat, same=close)
    extra.update(ratio_one_pair=round(versus_one["ratio"], 3),
                 identical_one_pair=versus_one["identical"],
                 one_pair=timings(versus_one, "baseline", ("min", "median")))
    return versus_loop, versus_one, extra


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--chunk-size", type=int, default=2048)
    parser.add_argument("--subset", type=int, default=800)
    parser.add_argument("--sample", choices=("pairs", "examples"), default="pairs",
                        help="evenly spaced pairs (default) or whole examples")
    parser.add_argument("--threads", type=int, default=cpus(),
                        help="torch intra-op threads (default: the CPUs available)")
    parser.add_argument("--full", action="store_true",
                        help="also stream all 26,400 pairs: RSS at 25/50/100%%, and the time "
                             "with and without the pair encoder")
    parser.add_argument("--no-trim", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")
    parser.add_argument("--shape", choices=("tiny", "roberta-large"), default="tiny",
                        help="random weights of the tiny test shape (default) or of "
                             "roberta-large's published config")
    parser.add_argument("--no-one-pair", action="store_true",
                        help="skip the one-pair-per-forward arm (slow at real shapes)")
    add_options(parser)
    args = parser.parse_args(argv)

    import torch

    from leaderboard.evaluators.pyramid.presence import NLIBackend
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    torch.set_num_threads(args.threads)
    dataset = load_pyramid_dataset(args.data, labels=False)
    total = sum(len(dataset.units["scus"][i]) for i in range(len(dataset))) * len(dataset.systems)
    model, tokenizer = build_model(dataset, args.seed, args.shape)
    model.to(args.device)
    versus_loop, _, extra = compare(model, tokenizer, dataset, total, args)
    extra.update(batch_size=args.batch_size, threads=args.threads, device=args.device,
                 torch=torch.__version__)
    if args.full:
        extra["full_run"] = run_full(NLIBackend(model, tokenizer, batch_size=args.batch_size,
                                                chunk_size=args.chunk_size,
                                                device=args.device),
                                     dataset, total, not args.no_trim)
    report("presence_speed", versus_loop, as_json=args.json, extra=extra,
           labels=("ours (sorted, dynamic padding, distinct pairs)",
                   "Lite²Pyramid loop (batch 32, pad to 400)"))
    return 0 if versus_loop["identical"] and extra["identical_one_pair"] is not False else 1


if __name__ == "__main__":
    sys.exit(main())
