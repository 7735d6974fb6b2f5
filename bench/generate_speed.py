"""Benchmark: ABS generation, batched (ours) vs one generate() per example (official).

    python bench/generate_speed.py [--shape flan-t5-base] [--records 16] [--batch-size 16]
                                   [--num-beams 4] [--max-new-tokens 32] [--repeat 5] [--json]

Uses the shared USB fixture's abstractive-summarization test inputs, repeated to at least
`--records`, and random weights of a published config (`--shape flan-t5-base` by default;
`tiny` for a smoke run) with a BPE of up to 30,000 tokens trained on the data. Ours is
`trainers.inference.generation.generate_texts` (length-sorted batches, padding masked), as `sumbench
predict` runs text tasks; the baseline calls `generate` once per input without padding, as
the USB release's scripts do, with the same beams and cap, cut and decoded the same way.
"identical": every generated text is the same in both arms. Arms alternate `--repeat` times
(bench/harness.py); "ratio" is per-example generate / batched.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from classify_speed import task_windows  # noqa: E402

from harness import T5_SHAPES, add_options, compare_arms, report  # noqa: E402


def official_text(model, tokenizer, source: str, spec) -> str:
    """One `generate` call for one input (no padding), cut at EOS and decoded as ours."""
    import torch

    from trainers.inference.generation import (
        cut_generated,
        decode_texts,
        eos_token_ids,
        model_device,
    )

    encoded = tokenizer(source, return_tensors="pt", truncation=True,
                        max_length=spec.max_input_tokens)
    with torch.inference_mode():
        output = model.generate(encoded.input_ids.to(model_device(model)),
                                max_new_tokens=spec.max_new_tokens, num_beams=spec.num_beams,
                                do_sample=False)
    ids = cut_generated(output[0].tolist(), eos_token_ids(model, tokenizer))
    return decode_texts(tokenizer, [ids], spec.clean_up_tokenization_spaces)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("tiny", "flan-t5-base"), default="flan-t5-base")
    parser.add_argument("--records", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    add_options(parser)
    args = parser.parse_args(argv)

    from trainers.inference.generation import generate_texts
    from trainers.inference.predict import PredictSpec
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    spec = PredictSpec(batch_size=args.batch_size, device=args.device,
                       num_beams=args.num_beams, max_new_tokens=args.max_new_tokens)
    texts, _ = task_windows("ABS", args.records)
    tokenizer = build_tiny_tokenizer(texts, vocab_size=800 if args.shape == "tiny" else 30000)
    sources, _ = task_windows("ABS", args.records, tokenizer, spec.window_budget)
    model = build_tiny_t5(tokenizer, **T5_SHAPES[args.shape])
    generate_texts(model, tokenizer, sources, spec)           # warm-up, and the model prepared
    official_text(model, tokenizer, sources[0], spec)
    result = compare_arms(
        lambda: generate_texts(model, tokenizer, sources, spec),
        lambda: [official_text(model, tokenizer, source, spec) for source in sources],
        repeat=args.repeat)
    ours, official = result["outputs"]["ours"], result["outputs"]["baseline"]
    extra = {"task": "ABS", "records": len(sources), "batch_size": args.batch_size,
             "num_beams": args.num_beams, "max_new_tokens": args.max_new_tokens,
             "device": args.device, "shape": args.shape,
             "texts_equal": sum(a == b for a, b in zip(ours, official)),
             "input_tokens_mean": round(sum(len(tokenizer(s).input_ids) for s in sources)
                                        / len(sources), 1)}
    report("generate_speed", result, as_json=args.json, extra=extra,
           labels=("batched generate_texts", "one generate() per example (official)"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
