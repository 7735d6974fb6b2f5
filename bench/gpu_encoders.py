"""The encoder checks of the GPU suite (bench/gpu_suite.py): USB Table 2's RoBERTa-Large
baselines at roberta-large's shape with random weights, in the roberta-large profile's precision
(bf16 autocast on a GPU that has it, fp32 elsewhere).

- Training steps of sumbench's encoder trainer (`accumulate_step`, clipping at 1.0, the
  profile's AdamW and schedule), one warm-up step, then `--encoder-steps` timed steps:
    FAC    Table 10's batch of 32 (evidence, summary) pairs of up to 512 tokens;
    EVEXT  Table 10's effective batch of 2,048 (source line, summary line) pairs of up to 128
           tokens, length-sorted micro-batches of `--encoder-microbatch-tokens` padded tokens.
  Reported: seconds per step, real (unpadded) tokens per second and MFU = model FLOPs per
  second / the device's dense bf16 peak, where a pair of n real tokens costs
  n x (6 x non-embedding parameters) + 12 x layers x hidden x n^2 FLOPs forward and backward
  (the standard count; padding is not counted). Goal: MFU >= 40%.
- Inference: bench/encoder_speed.py's inference part (the four tasks' probabilities batched,
  longest first, vs one forward per input), on the device in fp32, every probability within
  1e-5. Goal: >= 3x.

Synthetic inputs are encoder_speed's (lognormal lengths). `--shape tiny --device cpu` runs the
same code small.

    python bench/gpu_encoders.py [--device cuda] [--shape roberta-large] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from encoder_speed import (  # noqa: E402
    ROBERTA_SHAPES,
    build_encoder,
    evext_pairs,
    fac_inputs,
    timed_steps,
)
from gpu_training import device_name, failed_part, peak_flops  # noqa: E402

#: Table 10's effective batch of each task timed here, and its synthetic inputs
STEP_TASKS = {"FAC": (32, fac_inputs), "EVEXT": (2048, evext_pairs)}


def pair_flops(config, length: int) -> float:
    """Model FLOPs, forward and backward, of one pair of `length` real tokens."""
    hidden, layers = config.hidden_size, config.num_hidden_layers
    per_layer = 4 * hidden * hidden + 2 * hidden * config.intermediate_size
    return length * 6 * layers * per_layer + 12 * layers * hidden * length * length


def step_row(task: str, encoder, args) -> dict:
    """The timed steps of one task's Table 10 batch (see the module)."""
    import torch

    from trainers.encoders.batches import epoch_plan
    from trainers.encoders.heads import PairClassifier
    from trainers.encoders.prediction import autocast_dtype
    from trainers.encoders.spec import encoder_spec

    batch, make_inputs = STEP_TASKS[task]
    device = torch.device(args.device)
    spec = encoder_spec("roberta-large", task, model="random", seed=args.seed)
    features = make_inputs(batch * (args.encoder_steps + 1), encoder.config.vocab_size,
                           args.seed)
    budget = args.encoder_microbatch_tokens if task == "EVEXT" else None
    plan = epoch_plan(features, batch, args.seed, 0, budget)
    model = PairClassifier(encoder, seed=args.seed).to(device).train()
    dtype = autocast_dtype(spec.precision, device)
    steps = timed_steps(model, features, plan, spec, dtype)
    seconds, losses = steps["seconds"], steps["losses"]
    timed = plan[1:]  # the first step warms up
    lengths = [len(features[int(i)].input_ids) for step in timed for part in step
               for i in part]
    flops = sum(pair_flops(encoder.config, n) for n in lengths)
    elapsed = sum(seconds[1:])
    peak = peak_flops(device_name(args.device))
    rate = flops / elapsed
    return {"pairs_per_step": batch, "steps": len(timed),
            "micro_batches_per_step": round(sum(len(s) for s in timed) / len(timed), 1),
            "tokens_per_microbatch": budget, "precision": str(dtype or "fp32"),
            "seconds_per_step": round(elapsed / len(timed), 4),
            "tokens_per_s": round(sum(lengths) / elapsed, 1),
            "model_tflops_per_s": round(rate / 1e12, 2),
            "mfu": None if peak is None else round(rate / peak, 4),
            "losses": [round(value, 6) for value in losses]}


def inference_row(encoder, args) -> dict:
    """encoder_speed's inference part on the device (see the module)."""
    from encoder_speed import infer_part

    options = argparse.Namespace(records=args.encoder_records, seed=args.seed,
                                 predict_batch_size=args.encoder_predict_batch_size,
                                 repeat=args.encoder_repeat, shape=args.shape,
                                 device=args.device)
    result, extra = infer_part(options, encoder)
    return {"ratio": round(result["ratio"], 3), "identical": result["identical"],
            "ours_s": round(result["ours"]["median"], 4),
            "baseline_s": round(result["baseline"]["median"], 4),
            "tasks": extra["tasks"], "records": args.encoder_records,
            "max_abs_difference": extra["max_abs_difference"]}


def measure_encoders(args) -> dict:
    """{"FAC": ..., "EVEXT": ..., "inference": ...}; a part that fails is {"failed": [why]}
    and the others still run."""
    encoder = build_encoder(args.shape, args.seed)
    parts = {task: (lambda task=task: step_row(task, encoder, args)) for task in STEP_TASKS}
    parts["inference"] = lambda: inference_row(encoder, args)
    rows = {}
    for name, run in parts.items():
        try:
            rows[name] = run()
        except Exception as error:  # noqa: BLE001 - the other rows still count
            rows[name] = failed_part(error)
        finally:
            release_memory(args.device)
    return rows


def release_memory(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def add_encoder_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder-steps", type=int, default=3,
                        help="timed training steps of each task (after one warm-up step)")
    parser.add_argument("--encoder-microbatch-tokens", type=int, default=16384,
                        help="EVEXT's padded tokens per micro-batch")
    parser.add_argument("--encoder-records", type=int, default=256,
                        help="inputs of each task for the inference check")
    parser.add_argument("--encoder-predict-batch-size", type=int, default=64)
    parser.add_argument("--encoder-repeat", type=int, default=3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", choices=sorted(ROBERTA_SHAPES), default="roberta-large")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    add_encoder_options(parser)
    args = parser.parse_args(argv)
    rows = measure_encoders(args)
    print(json.dumps(rows, sort_keys=True) if args.json else json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
