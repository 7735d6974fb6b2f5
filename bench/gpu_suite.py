"""The GPU checks, one script for a lent device (at most about 9 minutes on an H200, start-up
aside): random weights of Flan-T5-Large's config, no download.

1. Training (`bench/gpu_training.py`, under `--training-budget-s`): the flan-t5-large
   profile's effective batch and budgets on long ABS inputs; sumbench's trainer with its
   `auto` micro-batch plan (MFU, tokens per second, a torch.profiler summary), then a plain
   `Seq2SeqTrainer` at the release's settings and at sumbench's micro-batch, `--compile`, and
   4-beam ABS generation, in that order while the budget lasts. Goals: MFU >= 40% of the
   dense bf16 peak, >= 1.5x the Seq2SeqTrainer's tokens per second.
2. Label probabilities: FAC's Yes-probabilities (`trainers.inference.label_probs`) for `--records`
   inputs (the fixture's FAC test items repeated), batched as `sumbench predict` runs them,
   by the shape's weights edited to answer Yes or No and stop as a fine-tuned model does.
   Goal: the whole job under 60 s. Against the official way, one `generate` per example,
   timed on the first `--official-sample` inputs and scaled to all: "ratio" (goal >= 5).
3. Encoders (`bench/gpu_encoders.py`): USB Table 2's RoBERTa-Large baselines at
   roberta-large's shape, the profile's bf16 training steps of FAC (32 pairs of up to 512
   tokens) and EVEXT (2,048 pairs of up to 128 tokens in 16,384-token micro-batches): MFU (goal
   >= 40%); and the four tasks' probabilities batched vs one forward per input (goal >= 3x).
   Each part that fails is recorded as such; the others still run.

    python bench/gpu_suite.py [--json] [--device cuda] [--shape flan-t5-large]

`--shape tiny --encoder-shape tiny --device cpu --max-input 256` runs the same code small (a
smoke test; no MFU on a CPU).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from classify_speed import fac_sources  # noqa: E402
from encoder_speed import ROBERTA_SHAPES  # noqa: E402
from gpu_encoders import add_encoder_options, measure_encoders  # noqa: E402
from gpu_training import device_name, failed_part, measure  # noqa: E402
from trainer_speed import build_model  # noqa: E402

from harness import T5_SHAPES, machine  # noqa: E402


def label_job(model_dir: str, args) -> dict:
    """The FAC job with the shape's weights edited to answer Yes or No and stop, as a
    fine-tuned model does (trainers.inference.label_probs.build_tiny_labeler), capped at 8 new
    tokens."""
    import torch
    from transformers import AutoTokenizer

    from trainers.inference.label_probs import build_tiny_labeler, official_label_probabilities
    from trainers.inference.predict import PredictSpec, label_probabilities

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    sources = fac_sources(args.records)
    model = build_tiny_labeler(tokenizer, sorted(set(sources)), **T5_SHAPES[args.shape])
    model = model.to(args.device, dtype)
    spec = PredictSpec(batch_size=args.label_batch_size, device=args.device, max_new_tokens=8,
                       dtype="bfloat16" if args.device.startswith("cuda") else "float32")
    label_probabilities(model, tokenizer, sources[:args.label_batch_size], spec)  # warm-up
    start = time.perf_counter()
    values = label_probabilities(model, tokenizer, sources, spec)
    seconds = time.perf_counter() - start
    sample = sources[:args.official_sample]
    official_label_probabilities(model, tokenizer, sample[0], spec)  # warm-up
    start = time.perf_counter()
    for source in sample:
        official_label_probabilities(model, tokenizer, source, spec)
    official_s = (time.perf_counter() - start) / len(sample) * len(sources)
    return {"records": len(sources), "seconds": round(seconds, 2),
            "records_per_s": round(len(sources) / seconds, 1),
            "labelled": sum(bool(row) for row in values), "under_a_minute": seconds < 60,
            "official_sample": len(sample), "official_seconds_scaled": round(official_s, 1),
            "ratio": round(official_s / seconds, 2)}


def training_options(args) -> argparse.Namespace:
    """gpu_training's options for this suite's run."""
    from gpu_training import parse

    return parse(["--device", args.device, "--shape", args.shape,
                  "--steps", str(args.train_steps), "--max-input", str(args.max_input),
                  "--budget-s", str(args.training_budget_s)])


def main(argv: list[str] | None = None) -> int:
    from benchmark.commands import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(T5_SHAPES), default="flan-t5-large")
    parser.add_argument("--train-steps", type=int, default=7)
    parser.add_argument("--max-input", type=int, default=8192)
    parser.add_argument("--training-budget-s", type=float, default=270.0)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--label-batch-size", type=int, default=64)
    parser.add_argument("--official-sample", type=positive_int, default=300,
                        help="inputs timed one generate() each, the official way")
    parser.add_argument("--encoder-shape", choices=sorted(ROBERTA_SHAPES),
                        default="roberta-large")
    parser.add_argument("--seed", type=int, default=0)
    add_encoder_options(parser)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_suite: no CUDA device here (the suite runs on a lent GPU; "
                         "--device cpu --shape tiny for a smoke test)")
    try:
        training = measure(training_options(args))
    except Exception as error:  # noqa: BLE001 - the label rows still count
        training = failed_part(error)
    with tempfile.TemporaryDirectory() as folder:
        build_model(Path(folder), args.shape)
        line = {"benchmark": "gpu_suite", "shape": args.shape, "device": args.device,
                "device_name": device_name(args.device), "training": training,
                "labels": label_job(folder, args), "machine": machine()}
    line["encoders"] = measure_encoders(argparse.Namespace(**{**vars(args),
                                                             "shape": args.encoder_shape}))
    line["identical"] = True
    print(json.dumps(line, sort_keys=True) if args.json else json.dumps(line, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
