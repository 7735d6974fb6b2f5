"""The GPU checks, one script for a lent device (about 3 minutes on an H200): random weights of
Flan-T5-Large's config, no download.

1. Training: `--train-steps` bf16 optimizer steps of sumbench's finetune (ABS and TOPIC of the
   shared USB fixture, `--batch-size` examples of at most `--max-input` tokens). Model FLOPs
   utilisation = 6 x parameters x (source + target tokens) per second of step time (the
   encoder reads the source and the decoder the target, each half the weights: an
   approximation of the usual 6ND) / the device's dense bf16 peak. Goal: >= 40% on an H100.
2. Label probabilities: FAC's Yes-probabilities (`trainers.inference.label_probs`) for `--records`
   inputs (the fixture's FAC test items repeated), batched as `sumbench predict` runs them,
   by the shape's weights edited to answer Yes or No and stop as a fine-tuned model does.
   Goal: the whole job under 60 s. Against the official way, one `generate` per example,
   timed on the first `--official-sample` inputs and scaled to all: "ratio" (goal >= 5).

    python bench/gpu_suite.py [--json] [--device cuda] [--shape flan-t5-large]

`--shape tiny --device cpu` runs the same code small (a smoke test; no MFU on a CPU).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from classify_speed import fac_sources  # noqa: E402
from trainer_speed import DATA, build_model, timed_steps  # noqa: E402

from harness import T5_SHAPES, machine  # noqa: E402

#: dense bf16 peak FLOP/s by device name (the datasheets' figures without sparsity)
PEAK_BF16 = (("H100 PCIe", 756e12), ("H100", 989.4e12), ("H200", 989.4e12),
             ("A100", 312e12), ("L4", 121e12))


def peak_flops(device_name: str) -> float | None:
    for name, flops in PEAK_BF16:
        if name in device_name:
            return flops
    return None


def training(model_dir: str, args) -> dict:
    from tasks.plumbing.io import read_jsonl
    from trainers.finetuning.finetune import finetune
    from trainers.finetuning.profiles import get_profile

    spec = get_profile("tiny", model=model_dir, batch_size=args.batch_size,
                       per_device_batch_size=args.batch_size, max_steps=args.train_steps,
                       max_input_tokens=args.max_input, max_output_tokens=256,
                       precision="bf16" if args.device.startswith("cuda") else "fp32",
                       learning_rate=5e-5, num_epochs=1000)
    with tempfile.TemporaryDirectory() as out:
        finetune(spec, ["ABS", "TOPIC"], data_dir=str(DATA), out_dir=Path(out) / "run",
                 device=args.device)
        log = [row for row in read_jsonl(Path(out) / "run" / "train_log.jsonl")
               if "loss" in row]
        config = json.loads((Path(out) / "run" / "train_config.json").read_text())
    timed = timed_steps(log)                          # the first step warms up
    seconds = statistics.median(row["seconds_per_step"] for row in timed)
    parameters = config["config"]["model"]["parameters"]
    tokens = _tokens_per_step(spec, args)
    peak = peak_flops(_device_name(args.device))
    achieved = 6 * parameters / 2 * tokens / seconds
    return {"steps": len(log), "seconds_per_step": round(seconds, 4),
            "tokens_per_step": tokens, "target_tokens_per_s": statistics.median(
                row["target_tokens_per_s"] for row in timed),
            "model_tflops_per_s": round(achieved / 1e12, 2),
            "mfu": None if peak is None else round(achieved / peak, 4)}


def _tokens_per_step(spec, args) -> float:
    """Mean source + target tokens of a step's examples (the data the steps draw from)."""
    from transformers import AutoTokenizer

    from trainers.finetuning import data as train_data

    tokenizer = AutoTokenizer.from_pretrained(spec.model)
    examples = train_data.spec_examples(spec, ["ABS", "TOPIC"], "train", str(DATA), tokenizer)
    per_example = (examples.source_lengths + examples.target_lengths).mean()
    return float(per_example * args.batch_size)


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") \
        else "cpu"


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


def main(argv: list[str] | None = None) -> int:
    from benchmark.commands import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(T5_SHAPES), default="flan-t5-large")
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-input", type=int, default=1024)
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--label-batch-size", type=int, default=64)
    parser.add_argument("--official-sample", type=positive_int, default=300,
                        help="inputs timed one generate() each, the official way")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_suite: no CUDA device here (the suite runs on a lent GPU; "
                         "--device cpu --shape tiny for a smoke test)")
    with tempfile.TemporaryDirectory() as folder:
        build_model(Path(folder), args.shape)
        line = {"benchmark": "gpu_suite", "shape": args.shape, "device": args.device,
                "device_name": _device_name(args.device), "training": training(folder, args),
                "labels": label_job(folder, args), "machine": machine()}
    line["identical"] = True
    print(json.dumps(line, sort_keys=True) if args.json else json.dumps(line, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
