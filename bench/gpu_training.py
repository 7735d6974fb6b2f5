"""The training row of the GPU suite: Flan-T5-Large's shape (random weights, dropout 0) at
the `flan-t5-large` profile's budgets and effective batch (32 examples a step), on ABS inputs
as long as the budgets allow, sumbench's trainer against a plain `Seq2SeqTrainer`.

Inputs: the shared fixture's documents concatenated, seeded, to source lengths drawn
uniformly between a quarter of `--max-input` and all of it (the fixture's own examples
average about 264 tokens, which starves a GPU); targets are the fixture's ABS summaries.
Arms, each its own process, in priority order under one time budget (`--budget-s`; an arm
that would not fit is reported as skipped):

  ours          sumbench finetune, the profile as users run it: tokens_per_microbatch auto
                (a probe), gradient checkpointing auto, bf16, fused AdamW; with a
                torch.profiler summary of two steps (top kernels; shares of attention,
                matmuls, the optimizer, host-to-device copies)
  trainer       Seq2SeqTrainer as the release's settings give it: per-device batch 2,
                accumulation 16, gradient checkpointing, bf16
  trainer-plan  Seq2SeqTrainer at sumbench's micro-batch (the most examples of ours' plan
                that divide the step), checkpointing as ours' plan
  compile       ours with torch.compile
  generate      ABS inputs, 4 beams, exactly `--new-tokens` new tokens each (no early stop):
                generated tokens per second

  nondeterministic  ours with deterministic=false (what torch's deterministic kernels cost)

sumbench's arms run `--steps` optimizer steps, the Seq2SeqTrainer's `--trainer-steps`, on
the same examples in the same order; the first step (warm-up) and the profiled ones are not
timed. Model FLOPs per example: 6 x half the
parameters x (source + target tokens) plus attention's 12 x layers x d_model x (S^2 + T^2 +
S x T); MFU = model FLOPs per second / the device's dense bf16 peak.

    python bench/gpu_training.py [--shape flan-t5-large] [--steps 7] [--budget-s 450] [--json]

`--shape tiny --device cpu --max-input 256 --steps 3` runs everything small (a smoke test).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from gpu_profile import profile_summary, profiled, profiled_steps  # noqa: E402
from trainer_speed import DATA, build_model, timed_trainer_run  # noqa: E402

from harness import machine  # noqa: E402

ABS = "abstractive_summarization"
ARMS = ("ours", "trainer", "trainer-plan", "compile", "generate", "nondeterministic")
#: dense bf16 peak FLOP/s by device name (the datasheets' figures without sparsity)
PEAK_BF16 = (("H100 PCIe", 756e12), ("H100", 989.4e12), ("H200", 989.4e12),
             ("A100", 312e12), ("L4", 121e12))


def peak_flops(device_name: str) -> float | None:
    return next((flops for name, flops in PEAK_BF16 if name in device_name), None)


# ---- the data ------------------------------------------------------------------------------

def long_data(folder: Path, model_dir: str, args) -> Path:
    """A task-data folder whose ABS train split holds steps x 32 examples of long inputs."""
    import random

    from transformers import AutoTokenizer

    from tasks.plumbing.io import read_jsonl, write_jsonl

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    fixture = list(read_jsonl(DATA / "all" / ABS / "train.jsonl"))
    lines = [line for path in sorted((DATA / "all").glob("*/train.jsonl"))
             for record in read_jsonl(path) for line in record["input_lines"]]
    sizes = [len(ids) for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]]
    rng = random.Random(0)
    records = []
    for number in range(args.steps * 32):
        wanted, taken, total = rng.randint(args.max_input // 4, args.max_input), [], 0
        while total < wanted:
            index = rng.randrange(len(lines))
            taken.append(lines[index])
            total += sizes[index]
        summary = fixture[number % len(fixture)]
        records.append({"id": f"long/{number}", "input_lines": taken,
                        "output_lines": summary["output_lines"]})
    out = folder / "data" / "all" / ABS
    out.mkdir(parents=True)
    write_jsonl(out / "train.jsonl", records)
    for split in ("validation", "test"):
        write_jsonl(out / f"{split}.jsonl", list(read_jsonl(DATA / "all" / ABS /
                                                            f"{split}.jsonl")))
    return folder / "data"


def spec_for(model_dir: str, args, **changes):
    from trainers.finetuning.profiles import get_profile

    cpu = args.device == "cpu"
    return get_profile("flan-t5-large", model=model_dir, max_steps=args.steps,
                       max_input_tokens=args.max_input, log_every_steps=1,
                       save_every_steps=None, early_stopping_patience=None,
                       precision="fp32" if cpu else "bf16", num_epochs=1000).override(changes)


def step_examples(spec, data_dir: Path, tokenizer):
    """(examples, the optimizer steps' example indices in sumbench's order)."""
    import numpy as np

    from trainers.finetuning import data as train_data

    examples = train_data.spec_examples(spec, ["ABS"], "train", str(data_dir), tokenizer)
    steps = train_data.epoch_steps(np.arange(len(examples)), examples.source_lengths,
                                   examples.target_lengths, spec.batch_size, spec.seed, 0,
                                   spec.megabatch_steps)
    return examples, steps


def model_flops(config, parameters: int, source: int, target: int) -> float:
    attention = 12 * config["num_layers"] * config["d_model"] * (
        source ** 2 + target ** 2 + source * target)
    return 6 * parameters / 2 * (source + target) + attention


# ---- the arms (each in its own process) ---------------------------------------------------

def run_ours(model_dir: str, data_dir: Path, out: Path, args, compile_: bool = False,
             deterministic: bool = True) -> dict:
    from tasks.plumbing.io import read_jsonl
    from trainers.finetuning import finetune as loop

    spec = spec_for(model_dir, args, compile=compile_, deterministic=deterministic,
                    tokens_per_microbatch=args.tokens_per_microbatch)
    profile = args.profile and not compile_ and deterministic
    with profiled(loop, args.device, args.steps, enabled=profile) as trace:
        loop.finetune(spec, ["ABS"], data_dir=str(data_dir), out_dir=out, device=args.device)
    log = list(read_jsonl(out / "train_log.jsonl"))
    config = json.loads((out / "train_config.json").read_text())["config"]
    result = {"seconds_per_step": [row["seconds_per_step"] for row in log],
              "padding_fraction": [row["padding_fraction"] for row in log],
              "micro_batches": [row["micro_batches"] for row in log],
              "losses": [row["loss"] for row in log],
              "plan": config["micro_batch_plan"], "fast_path": config["fast_path"]}
    if trace is not None:
        result["profile"] = profile_summary(trace)
        result["untimed_steps"] = profiled_steps(args.steps)
    return result


def run_trainer(model_dir: str, data_dir: Path, out: Path, args, per_device: int,
                checkpointing: bool) -> dict:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    spec = spec_for(model_dir, args)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    examples, steps = step_examples(spec, data_dir, tokenizer)
    rows = [{"input_ids": list(examples.input_ids[i]), "labels": list(examples.labels[i])}
            for step in steps[:args.trainer_steps] for i in step]
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=torch.float32)
    cuda = args.device != "cpu"
    timing = timed_trainer_run(
        model, tokenizer, rows, output_dir=str(out), per_device_train_batch_size=per_device,
        gradient_accumulation_steps=spec.batch_size // per_device, max_steps=args.trainer_steps,
        learning_rate=spec.learning_rate, bf16=cuda, gradient_checkpointing=checkpointing,
        use_cpu=not cuda, seed=spec.seed)
    return {"seconds_per_step": timing["seconds"], "per_device": per_device,
            "gradient_checkpointing": checkpointing}


def run_generate(model_dir: str, data_dir: Path, args) -> dict:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    spec = spec_for(model_dir, args)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    examples, _ = step_examples(spec, data_dir, tokenizer)
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=dtype).to(args.device).eval()
    order = sorted(range(len(examples)), key=lambda i: -len(examples.input_ids[i]))
    batches = [order[i:i + args.generate_batch] for i in range(0, args.generate_rows,
                                                                 args.generate_batch)]
    timed, tokens = 0.0, 0
    for number, batch in enumerate(batches):
        encoded = tokenizer.pad({"input_ids": [examples.input_ids[i] for i in batch]},
                                return_tensors="pt").to(args.device)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**encoded, num_beams=4, max_new_tokens=args.new_tokens,
                                 min_new_tokens=args.new_tokens, do_sample=False)
        if args.device != "cpu":
            torch.cuda.synchronize()
        if number:                              # the first batch warms up
            timed += time.perf_counter() - start
            tokens += (out.shape[1] - 1) * len(batch)
    return {"generated_tokens_per_s": round(tokens / timed, 1) if timed else None,
            "rows": sum(map(len, batches[1:])), "new_tokens": args.new_tokens,
            "batch": args.generate_batch, "beams": 4}


def child(args) -> int:
    data_dir = Path(args.data_dir)
    with tempfile.TemporaryDirectory() as out:
        run = Path(out) / "run"
        if args.arm in ("ours", "compile", "nondeterministic"):
            result = run_ours(args.model_dir, data_dir, run, args, args.arm == "compile",
                              deterministic=args.arm != "nondeterministic")
        elif args.arm == "generate":
            result = run_generate(args.model_dir, data_dir, args)
        else:
            result = run_trainer(args.model_dir, data_dir, run, args, args.per_device,
                                 args.checkpointing)
    print(json.dumps(result))
    return 0


# ---- the orchestration ------------------------------------------------------------------------

def run_arm(arm: str, args, folder: Path, timeout: float, **extra) -> dict:
    command = [sys.executable, __file__, "--arm", arm, "--model-dir", str(folder / "model"),
               "--data-dir", str(folder / "data"), "--device", args.device,
               "--steps", str(args.steps), "--trainer-steps", str(args.trainer_steps),
               "--max-input", str(args.max_input),
               "--tokens-per-microbatch", str(args.tokens_per_microbatch),
               "--new-tokens", str(args.new_tokens),
               "--generate-rows", str(args.generate_rows),
               "--generate-batch", str(args.generate_batch),
               *([] if args.profile else ["--no-profile"]),
               *[item for key, value in extra.items()
                 for item in ((f"--{key}",) if value is True else (f"--{key}", str(value)))]]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        return {"skipped": f"stopped after {timeout:.0f} s (the time budget)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"failed": done.stderr.strip().splitlines()[-1:] or ["no output"]}
    return json.loads(lines[-1])


def plan_examples(plan: dict, longest: int, batch_size: int) -> int:
    """The most examples a Seq2SeqTrainer micro-batch can take under ours' plan (a divisor
    of the step)."""
    most = max(1, (plan["tokens_per_microbatch"] or 0) // max(1, longest)) \
        if plan["tokens_per_microbatch"] else plan["per_device_batch_size"]
    return max(d for d in range(1, batch_size + 1) if batch_size % d == 0 and d <= most)


def throughput(result: dict, tokens: list[int], flops: list[float], peak) -> dict:
    """Tokens per second and MFU over the timed steps: all but the first (it warms up) and
    the profiled ones."""
    untimed = {1, *result.get("untimed_steps", [])}
    timed = [number for number in range(1, len(result["seconds_per_step"]) + 1)
             if number not in untimed] or [len(result["seconds_per_step"])]
    seconds = sum(result["seconds_per_step"][number - 1] for number in timed)
    rate = sum(flops[number - 1] for number in timed) / seconds
    return {"tokens_per_s": round(sum(tokens[number - 1] for number in timed) / seconds, 1),
            "seconds_per_step": round(seconds / len(timed), 4), "timed_steps": timed,
            "model_tflops_per_s": round(rate / 1e12, 2),
            "mfu": None if peak is None else round(rate / peak, 4)}


def measure(args) -> dict:
    from transformers import AutoConfig, AutoTokenizer

    started = time.monotonic()
    remaining = lambda: args.budget_s - (time.monotonic() - started)  # noqa: E731
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        build_model(folder / "model", args.shape)
        long_data(folder, str(folder / "model"), args)
        spec = spec_for(str(folder / "model"), args)
        examples, steps = step_examples(spec, folder / "data",
                                        AutoTokenizer.from_pretrained(folder / "model"))
        config = AutoConfig.from_pretrained(folder / "model").to_dict()
        parameters = _parameters(folder / "model")
        steps = steps[:args.steps]
        tokens = [int(examples.source_lengths[s].sum() + examples.target_lengths[s].sum())
                  for s in steps]
        flops = [sum(model_flops(config, parameters, int(examples.source_lengths[i]),
                                 int(examples.target_lengths[i])) for i in s) for s in steps]
        peak = peak_flops(device_name(args.device))
        rows: dict = {"tokens_per_step": round(sum(tokens) / len(tokens)),
                      "examples_per_step": spec.batch_size, "max_input": args.max_input}
        ours = run_arm("ours", args, folder, remaining())
        rows["ours"] = {**ours, **(throughput(ours, tokens, flops, peak)
                                   if "seconds_per_step" in ours else {})}
        rows["trainer"] = _trainer_row(args, folder, remaining(), tokens, flops, peak, 2, True)
        if "plan" in ours:
            longest = int(max(examples.source_lengths) + max(examples.target_lengths))
            per_device = plan_examples(ours["plan"], longest, spec.batch_size)
            rows["trainer_plan"] = _trainer_row(args, folder, remaining(), tokens, flops, peak,
                                                per_device,
                                                ours["plan"]["gradient_checkpointing"])
        compiled = run_arm("compile", args, folder, remaining())
        rows["compile"] = {**compiled, **(throughput(compiled, tokens, flops, peak)
                                          if "seconds_per_step" in compiled else {})}
        rows["generate"] = run_arm("generate", args, folder, remaining())
        loose = run_arm("nondeterministic", args, folder, remaining())
        rows["nondeterministic"] = {**loose, **(throughput(loose, tokens, flops, peak)
                                                if "seconds_per_step" in loose else {})}
    return {**rows, **_ratios(rows), "seconds": round(time.monotonic() - started, 1)}


def _trainer_row(args, folder, timeout, tokens, flops, peak, per_device, checkpointing):
    result = run_arm("trainer", args, folder, timeout, **{"per-device": per_device},
                     **({"checkpointing": True} if checkpointing else {}))
    if "seconds_per_step" in result:
        result.update(throughput(result, tokens, flops, peak))
    return result


def _ratios(rows: dict) -> dict:
    ours = rows["ours"].get("tokens_per_s")

    def ratio(name):
        other = rows.get(name, {}).get("tokens_per_s")
        return round(ours / other, 2) if ours and other else None
    return {"ratio_vs_trainer": ratio("trainer"), "ratio_vs_trainer_plan": ratio("trainer_plan"),
            "compile_ratio": None if not ours or not rows["compile"].get("tokens_per_s")
            else round(rows["compile"]["tokens_per_s"] / ours, 2)}


def _parameters(model_dir: Path) -> int:
    import math

    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as handle:
        return sum(math.prod(handle.get_slice(key).get_shape()) for key in handle.keys())


def failed_part(error: Exception) -> dict:
    """A part of the GPU checks that raised: its record ("failed": the error in one line),
    which the page shows as not measured; the other parts still run."""
    return {"failed": [f"{type(error).__name__}: {error}"[:300]]}


def device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") \
        else "cpu"


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", default="flan-t5-large")
    parser.add_argument("--steps", type=int, default=7,
                        help="optimizer steps of sumbench's arms (the first and the last "
                             "three, profiled, are not timed)")
    parser.add_argument("--trainer-steps", type=int, default=3,
                        help="optimizer steps of the Seq2SeqTrainer arms (the first is not "
                             "timed)")
    parser.add_argument("--max-input", type=int, default=8192)
    parser.add_argument("--tokens-per-microbatch", default="auto")
    parser.add_argument("--budget-s", type=float, default=450.0)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--generate-rows", type=int, default=96)
    parser.add_argument("--generate-batch", type=int, default=16)
    parser.add_argument("--no-profile", dest="profile", action="store_false")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--per-device", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.arm:
        return child(args)
    line = {"benchmark": "gpu_training", "shape": args.shape, "device": args.device,
            "device_name": device_name(args.device), "training": measure(args),
            "machine": machine()}
    print(json.dumps(line, sort_keys=True) if args.json else json.dumps(line, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
