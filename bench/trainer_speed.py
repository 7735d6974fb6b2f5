"""Benchmark (not a test): fine-tuning at a real shape, sumbench's trainer vs a plain
transformers `Seq2SeqTrainer` on the same batches, precision and optimizer.

Random weights of a published config (`--shape flan-t5-large` by default; dropout 0 so both
arms compute the same thing) are saved once; each run of an arm is its own process (so its
peak RSS is its own), alternating `--repeat` times:
  ours      trainers.finetuning.finetune.finetune on FAC of the shared USB fixture (`--steps`
  optimizer
            steps of `--batch-size` examples, logged every step);
  baseline  Seq2SeqTrainer on the very examples of those steps in the same order (sumbench's
            length-grouped plan, a sequential sampler), DataCollatorForSeq2Seq, AdamW with the
            same learning rate, schedule, decay and clipping, the model prepared (LoRA) by the
            same code.
"ratio": the baseline's median seconds per step / ours (> 1: ours is faster; the first step of
each run warms up and is not counted); tokens/s are target tokens per second of step time;
"identical": the last step's loss agrees within 1e-4 (relative) in every run. `--lora` trains
LoRA r=16 adapters instead of every weight.

    python bench/trainer_speed.py [--shape flan-t5-large] [--lora] [--steps 6]
                                  [--batch-size 2] [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import T5_SHAPES, add_options, report  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
DATA = SHARED / "fixtures" / "usb" / "task_datasets"


def spec_for(model_dir: str, args):
    from trainers.finetuning.profiles import get_profile

    return get_profile("tiny", model=model_dir, batch_size=args.batch_size,
                       per_device_batch_size=args.batch_size, max_steps=args.steps,
                       learning_rate=1e-4, lora=args.lora, lora_r=16, lora_alpha=32,
                       lora_dropout=0.0, max_input_tokens=256, max_output_tokens=16)


def build_model(folder: Path, shape: str) -> None:
    from tasks.plumbing.io import read_jsonl
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    texts = [" ".join(record["input_lines"]) for path in sorted((DATA / "all").glob(
        "*/train.jsonl")) for record in read_jsonl(path)]
    tokenizer = build_tiny_tokenizer(texts)
    model = build_tiny_t5(tokenizer, **T5_SHAPES[shape])
    model.config.dropout_rate = 0.0
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(model_dir: str, out: Path, args) -> dict:
    from tasks.plumbing.io import read_jsonl
    from trainers.finetuning.finetune import finetune

    finetune(spec_for(model_dir, args), ["FAC"], data_dir=str(DATA), out_dir=out,
             device="cpu")
    log = [row for row in read_jsonl(out / "train_log.jsonl") if "loss" in row]
    return {"seconds_per_step": [row["seconds_per_step"] for row in log],
            "tokens_per_s": [row["target_tokens_per_s"] for row in log],
            "losses": [row["loss"] for row in log]}


def planned_examples(model_dir: str, args):
    """The examples of sumbench's first `--steps` steps, in its order, and their tokens."""
    import math

    from transformers import AutoTokenizer

    from trainers.finetuning import data as train_data

    spec = spec_for(model_dir, args)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    examples = train_data.spec_examples(spec, ["FAC"], "train", str(DATA), tokenizer)
    indices = train_data.epoch_example_indices(examples.task_indices(), spec.mixing,
                                               spec.mixing_temperature, spec.seed, 0)
    plan = train_data.plan_epoch(indices, examples.source_lengths, examples.target_lengths,
                                 spec.batch_size, 1, spec.seed, 0, spec.megabatch_steps)
    order = [int(i) for step in plan[:args.steps] for piece in step for i in piece]
    rows = [{"input_ids": list(examples.input_ids[i]), "labels": list(examples.labels[i])}
            for i in order]
    steps = math.ceil(len(rows) / args.batch_size)
    return spec, tokenizer, rows, steps


def timed_trainer_run(model, tokenizer, rows: list[dict], **arguments) -> dict:
    """A plain Seq2SeqTrainer on `rows` in their order (a sequential sampler),
    DataCollatorForSeq2Seq, logging every step: {"seconds": per optimizer step (the device
    synchronised around each on CUDA), "losses": the logged ones}. `arguments` go to
    Seq2SeqTrainingArguments (output_dir included)."""
    import time

    import torch
    from transformers import (
        DataCollatorForSeq2Seq,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        TrainerCallback,
    )

    timing: dict[str, list] = {"seconds": [], "losses": []}
    cuda = not arguments.get("use_cpu", False) and torch.cuda.is_available()

    class Timer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            timing["start"] = time.perf_counter()

        def on_step_end(self, *_, **__):
            if cuda:
                torch.cuda.synchronize()
            timing["seconds"].append(time.perf_counter() - timing.pop("start"))

        def on_log(self, _args, _state, _control, logs=None, **__):
            if logs and "loss" in logs:
                timing["losses"].append(logs["loss"])

    class InOrder(Seq2SeqTrainer):
        def _get_train_sampler(self, *_, **__):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    settings = Seq2SeqTrainingArguments(logging_steps=1, save_strategy="no", report_to=[],
                                        dataloader_num_workers=0, remove_unused_columns=False,
                                        **arguments)
    InOrder(model=model, args=settings, train_dataset=rows,
            data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
            callbacks=[Timer()]).train()
    return timing


def run_trainer(model_dir: str, out: Path, args) -> dict:
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from trainers.finetuning.model_setup import prepare_for_training

    spec, tokenizer, rows, steps = planned_examples(model_dir, args)
    model = prepare_for_training(AutoModelForSeq2SeqLM.from_pretrained(
        model_dir, dtype=torch.float32), spec)
    timing = timed_trainer_run(
        model, tokenizer, rows, output_dir=str(out), per_device_train_batch_size=args.batch_size,
        max_steps=steps, learning_rate=spec.learning_rate, weight_decay=spec.weight_decay,
        lr_scheduler_type=spec.lr_scheduler, warmup_steps=0, max_grad_norm=spec.max_grad_norm,
        optim="adamw_torch", use_cpu=True, seed=spec.seed)
    tokens = [sum(len(row["labels"]) for row in rows[i:i + args.batch_size])
              for i in range(0, len(rows), args.batch_size)]
    return {"seconds_per_step": timing["seconds"], "losses": timing["losses"],
            "tokens_per_s": [t / s for t, s in zip(tokens, timing["seconds"])]}


def child(args) -> int:
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as out:
        arm = run_ours if args.arm == "ours" else run_trainer
        result = arm(args.model_dir, Path(out) / "run", args)
    print(json.dumps({**result, "peak_rss_mib": round(peak_rss_mib(), 1)}))
    return 0


def run_arm(arm: str, model_dir: str, args) -> dict:
    command = [sys.executable, __file__, "--arm", arm, "--model-dir", model_dir,
               "--steps", str(args.steps), "--batch-size", str(args.batch_size),
               "--threads", str(args.threads), *(["--lora"] if args.lora else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"trainer_speed: the {arm} arm failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def timed_steps(values: list) -> list:
    """The steps that count: all but the first (which warms up) when there are several."""
    return values[1:] if len(values) > 1 else values


def summary(runs: list[dict]) -> dict:
    per_run = [statistics.mean(timed_steps(run["seconds_per_step"])) for run in runs]
    return {"runs": [round(s, 4) for s in per_run], "min": min(per_run),
            "median": statistics.median(per_run),
            "tokens_per_s": statistics.median(statistics.mean(timed_steps(run["tokens_per_s"]))
                                              for run in runs),
            "peak_rss_mib": max(run["peak_rss_mib"] for run in runs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(T5_SHAPES), default="flan-t5-large")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--arm", choices=("ours", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.arm:
        return child(args)
    with tempfile.TemporaryDirectory() as folder:
        build_model(Path(folder), args.shape)
        runs: dict[str, list[dict]] = {"ours": [], "baseline": []}
        for index in range(max(1, args.repeat)):
            order = ("ours", "baseline") if index % 2 == 0 else ("baseline", "ours")
            for arm in order:
                runs[arm].append(run_arm(arm, folder, args))
    identical = all(abs(a["losses"][-1] - b["losses"][-1]) <= 1e-4 * abs(b["losses"][-1])
                    for a, b in zip(runs["ours"], runs["baseline"]))
    ours, baseline = summary(runs["ours"]), summary(runs["baseline"])
    result = {"ours": ours, "baseline": baseline, "ratio": baseline["median"] / ours["median"],
              "identical": identical}
    extra = {"shape": args.shape, "lora": args.lora, "steps": args.steps,
             "batch_size": args.batch_size, "threads": args.threads,
             "memory_ratio": round(ours["peak_rss_mib"] / baseline["peak_rss_mib"], 3),
             "tokens_per_s": {"ours": round(ours["tokens_per_s"], 2),
                              "baseline": round(baseline["tokens_per_s"], 2)},
             "peak_rss_mib": {"ours": ours["peak_rss_mib"],
                              "baseline": baseline["peak_rss_mib"]},
             "last_loss": {"ours": runs["ours"][-1]["losses"][-1],
                           "baseline": runs["baseline"][-1]["losses"][-1]}}
    report("trainer_speed", result, as_json=args.json, extra=extra,
           labels=("sumbench finetune", "plain Seq2SeqTrainer"))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
