"""Benchmark: what each fast path is worth at a real model shape on a CPU.

A fast path earns its code only at >= 1.15x (median of `--repeat` alternated runs) with the
same outputs (every probability within 1e-5). Each path is timed on (as shipped) and off,
everything else as shipped, on random weights of a published config:

  roberta-large's config (24 layers, 1024 wide, 16 heads of 64), NLI presence (NLIBackend)
  on `--pairs` evenly spaced REALSumm (summary, SCU) pairs, batches of `--batch-size`, with a
  byte-level BPE tokenizer trained here on REALSumm's texts (RoBERTa's special tokens and
  post-processor):
    first_token_shortcut  the last layer for the first position only (trainers.first_token)
    workers               two batches at a time on CPU worker threads (trainers.cpu_workers)
    pair_encoding         each distinct text tokenized once (trainers.pair_encoding)
    pair_template         untruncated pairs joined from the post-processor's template
    batch_plan            batches cut by estimated cost (trainers.batch_plan) vs fixed-size
    padded_keys           keys padded to a multiple of 16; shipped only for heads of at most
                          32, so at roberta-large's 64 it is forced on for the "on" arm
  Flan-T5-base's config (12+12 layers, 768 wide, d_ff 2048, vocabulary 32128), FAC label
  probabilities on `--records` inputs of the USB fixture, edited to answer Yes/No then stop
  (trainers.label_probs.build_tiny_labeler):
    lean_t5               greedy decoding without `generate` (trainers.lean_t5)

    python bench/fast_paths.py [--paths a,b] [--pairs 32] [--batch-size 8] [--records 64]
                               [--repeat 5] [--json]

`--json` prints one line: {"benchmark": "fast_paths", "paths": {name: {"ratio", "identical",
"on", "off", "shape"}}, ...}; bench/report.py turns it into the fast-path table.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from classify_speed import FAC_TEST, fac_sources, max_difference  # noqa: E402
from presence_speed import DEFAULT_DATA, close, iter_pairs  # noqa: E402

from harness import add_options, compare_arms, cpus, machine, timings  # noqa: E402

#: the shortest worth of a fast path (ratio of medians, off / on)
WORTH = 1.15
NLI_PATHS = ("first_token_shortcut", "workers", "pair_encoding", "pair_template", "batch_plan",
             "padded_keys")
DECODING_PATHS = ("lean_t5",)
#: roberta-large's published config, less what random weights make irrelevant
ROBERTA_LARGE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                     intermediate_size=4096, vocab_size=50265, max_position_embeddings=514,
                     type_vocab_size=1, layer_norm_eps=1e-5)
#: Flan-T5-base's published config, as trainers.tiny.build_tiny_t5 options
FLAN_T5_BASE = dict(d_model=768, num_layers=12, num_heads=12, d_ff=2048, relative_buckets=32,
                    vocab_size=32128)


def roberta_tokenizer(texts: list[str], vocab_size: int = 16000):
    """A byte-level BPE tokenizer with RoBERTa's special tokens, post-processor and inputs."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    backend = Tokenizer(models.BPE(unk_token=None))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                   sep_token="</s>", cls_token="<s>", pad_token="<pad>",
                                   unk_token="<unk>", mask_token="<mask>",
                                   model_input_names=["input_ids", "attention_mask"])


def roberta_large(tokenizer, seed: int):
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(**ROBERTA_LARGE, pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=0, eos_token_id=2, num_labels=3,
                           id2label={0: "contradiction", 1: "neutral", 2: "entailment"},
                           label2id={"contradiction": 0, "neutral": 1, "entailment": 2})
    torch.manual_seed(seed)
    return RobertaForSequenceClassification(config).eval()


@contextlib.contextmanager
def forced_padded_keys():
    """The keys of 64-wide heads padded too (shipped: only heads of at most 32)."""
    import trainers.first_token as first_token

    shipped = first_token.KEY_BLOCK_HEAD_SIZE
    first_token.KEY_BLOCK_HEAD_SIZE = 64
    try:
        yield
    finally:
        first_token.KEY_BLOCK_HEAD_SIZE = shipped


def nli_arm(model, tokenizer, pairs, batch_size: int, path: str, on: bool):
    """A warmed-up callable scoring `pairs` with `path` on (as shipped) or off."""
    from leaderboard.evaluators.presence import NLIBackend

    options = {"first_token_shortcut": {"first_token_shortcut": on},
               "workers": {"workers": None if on else 1},
               "pair_encoding": {"pair_encoding": on}}.get(path, {})
    backend = NLIBackend(model, tokenizer, batch_size=batch_size, **options)
    if path == "pair_template" and not on:
        backend.pair_encoder._template = None
    if path == "batch_plan":
        backend.plan_batches = on
    forced = path == "padded_keys" and on

    def run():
        with forced_padded_keys() if forced else contextlib.nullcontext():
            return [result.details["p3"] for result in backend.score(pairs)]

    run()  # settles the first-batch checks
    return run, backend


def nli_paths(names: list[str], args) -> dict:
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    dataset = load_pyramid_dataset(args.data, labels=False)
    texts = list(dataset.references) + [summary for system in dataset.systems
                                        for summary in dataset.summaries[system]]
    tokenizer = roberta_tokenizer(texts)
    model = roberta_large(tokenizer, args.seed)
    every = list(iter_pairs(dataset))
    pairs = every[::max(1, len(every) // args.pairs)][:args.pairs]
    results = {}
    for name in names:
        on, backend = nli_arm(model, tokenizer, pairs, args.batch_size, name, True)
        off, _ = nli_arm(model, tokenizer, pairs, args.batch_size, name, False)
        result = compare_arms(on, off, repeat=args.repeat, same=close)
        results[name] = summary(result, "roberta-large", backend.fast_paths())
        print(f"{name}: {results[name]['ratio']:.3f}x", file=sys.stderr)
    return results


def decoding_paths(names: list[str], args) -> dict:
    from trainers.label_probs import build_tiny_labeler, label_decoder, label_probabilities
    from trainers.predict import PredictSpec
    from trainers.tiny import build_tiny_tokenizer

    sources = fac_sources(args.records)
    tokenizer = build_tiny_tokenizer(sources, vocab_size=8000)
    model = build_tiny_labeler(tokenizer, sorted(set(sources)), seed=args.seed, **FLAN_T5_BASE)
    spec = PredictSpec(batch_size=args.batch_size)
    results = {}
    for name in names:  # lean_t5 only
        arms = [lambda lean=lean: label_probabilities(model, tokenizer, sources, spec, lean=lean)
                for lean in (True, False)]
        for arm in arms:
            arm()  # warm-up; the first lean batch is checked against generate
        result = compare_arms(*arms, repeat=args.repeat,
                              same=lambda a, b: max_difference(a, b) <= 1e-5)
        results[name] = summary(result, "flan-t5-base", {"label_decoder":
                                                         label_decoder(model, spec)})
        print(f"{name}: {results[name]['ratio']:.3f}x", file=sys.stderr)
    return results


def summary(result: dict, shape: str, states: dict) -> dict:
    return {"ratio": round(result["ratio"], 3), "identical": result["identical"],
            "worth_keeping": result["identical"] and result["ratio"] >= WORTH, "shape": shape,
            "on": timings(result, "ours"), "off": timings(result, "baseline"),
            "states": states}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default=",".join(NLI_PATHS + DECODING_PATHS),
                        help="comma-separated fast paths (default: all)")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--records", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.paths.split(",") if name.strip()]
    unknown = sorted(set(names) - set(NLI_PATHS + DECODING_PATHS))
    if unknown:
        parser.error(f"unknown fast path(s) {', '.join(unknown)} (known: "
                     f"{', '.join(NLI_PATHS + DECODING_PATHS)})")
    if not FAC_TEST.is_file() or not Path(args.data).is_dir():
        raise SystemExit(f"shared data not found: {FAC_TEST} or {args.data}")
    import torch

    torch.set_num_threads(cpus())
    paths = {**nli_paths([n for n in names if n in NLI_PATHS], args),
             **decoding_paths([n for n in names if n in DECODING_PATHS], args)}
    line = {"benchmark": "fast_paths", "paths": paths, "worth": WORTH, "pairs": args.pairs,
            "records": args.records, "batch_size": args.batch_size, "cpus": cpus(),
            "identical": all(path["identical"] for path in paths.values()),
            "machine": machine()}
    if args.json:
        import json

        print(json.dumps(line, sort_keys=True))
    else:
        for name, path in paths.items():
            print(f"{name} ({path['shape']}): {path['ratio']:.3f}x, on "
                  f"{path['on']['median']:.2f} s, off {path['off']['median']:.2f} s, "
                  f"{'identical' if path['identical'] else 'OUTPUTS DIFFER'}, "
                  f"{'keep' if path['worth_keeping'] else 'delete'}")
    return 0 if line["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
