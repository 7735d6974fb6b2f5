"""`sumbench demo`: the whole pipeline offline on a synthetic corpus, in a minute or two on a CPU.

Steps (all under --out): a seeded synthetic corpus in the raw USB schema (raw/), the eight task
datasets derived from it (data/), a tiny tokenizer and T5 built locally (tiny-model/), LoRA
fine-tuning on FAC and ABS together (train/), predictions of all eight tasks on the test split
(predictions/), scores and results.json with provenance. Running the same demo again in the
same folder reuses every finished step.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.commands import non_negative_int, positive_int

DEMO_FILE = "demo.json"
DEMO_FORMAT = "sumbench-demo/1"
DEFAULT_OUT = "sumbench-demo"
TRAIN_TASKS = ("factuality_classification", "abstractive_summarization")
#: the demo's fine-tuning settings on top of the `tiny` profile (fast on 2 CPU cores)
DEMO_OVERRIDES = {"learning_rate": 1e-2, "max_input_tokens": 384, "max_output_tokens": 48,
                  "batch_size": 8, "per_device_batch_size": 8, "lora_r": 8, "lora_alpha": 16,
                  "mixing": "temperature"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the whole pipeline offline on a synthetic corpus with a tiny model",
        description="Generate a synthetic USB-format corpus, derive the eight tasks, build a "
                    "tiny T5, fine-tune it with LoRA on FAC and ABS, predict and score all "
                    "eight tasks, print the results table and write DIR/results.json. "
                    "Needs no network; about a minute on two CPU cores.")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"output folder (default ./{DEFAULT_OUT})")
    parser.add_argument("--docs", type=positive_int, default=30,
                        help="synthetic documents (default 30: 18 train, 6 validation, 6 test)")
    parser.add_argument("--max-steps", type=positive_int, default=80,
                        help="fine-tuning steps (default 80)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="corpus, model and training seed")
    parser.add_argument("--batch-size", type=positive_int, default=16,
                        help="prediction batch size (never changes results)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch CPU threads (default 1: tiny models run fastest on one)")
    parser.set_defaults(handler=run)


def demo_settings(docs: int, max_steps: int, seed: int) -> dict:
    from benchmark.synthetic import SyntheticSpec

    return {"format": DEMO_FORMAT, "synthetic": SyntheticSpec(seed=seed, docs=docs).to_dict(),
            "max_steps": max_steps, "seed": seed, "train_tasks": list(TRAIN_TASKS),
            "overrides": DEMO_OVERRIDES}


def claim_folder(out: Path, settings: dict) -> bool:
    """True when `out` holds this same demo already (reuse it); False for a new folder.
    A folder with other content, or a demo with other settings, is refused."""
    from tasks.errors import SumbenchError
    from tasks.io import read_json, write_json

    marker = out / DEMO_FILE
    if marker.is_file():
        if read_json(marker) != settings:
            raise SumbenchError(f"{out} holds a demo with other settings; choose another "
                                f"folder (--out)")
        return True
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SumbenchError(f"{out} exists and is not an empty folder; choose another (--out)")
    write_json(marker, settings)
    return False


def build_corpus(out: Path, docs: int, seed: int, log) -> Path:
    """raw/ (synthetic corpus) and data/ (derived task datasets); reused when present."""
    from benchmark.synthetic import SyntheticSpec, generate_corpus, read_corpus_info
    from tasks.usb.derive import BUILD_INFO_FILE, build_task_datasets

    spec = SyntheticSpec(seed=seed, docs=docs)
    raw, data = out / "raw", out / "data"
    info = read_corpus_info(raw)
    if info is None or info["spec"] != spec.to_dict():
        log(f"generating {docs} synthetic documents in {raw}")
        generate_corpus(raw, spec)
    if not (data / BUILD_INFO_FILE).is_file():
        log(f"deriving the eight task datasets into {data}")
        build_task_datasets(raw, data, variants=["all"])
    return data


def training_texts(data_dir: Path) -> list[str]:
    """Model inputs and targets of every task's train split (the tokenizer's corpus)."""
    from tasks import get_task, task_names

    texts = []
    for name in task_names("usb"):
        task = get_task(name)
        for instance in task.instances(task.load("train", "all", str(data_dir))):
            for model_input in task.format(instance):
                texts.extend((model_input.source, model_input.target))
    return texts


def build_model(out: Path, data_dir: Path, seed: int, log) -> Path:
    """tiny-model/: a byte-level BPE tokenizer and a seeded random T5, built once."""
    from tasks.io import atomic_directory
    from trainers.tiny import build_tiny_t5, build_tiny_tokenizer

    folder = out / "tiny-model"
    if (folder / "config.json").is_file():
        return folder
    log(f"building a tiny tokenizer and T5 in {folder}")
    with atomic_directory(folder) as staging:
        tokenizer = build_tiny_tokenizer(training_texts(data_dir))
        build_tiny_t5(tokenizer, save_dir=staging, seed=seed)
    return folder


def demo_run_spec(model: Path, data_dir: Path, max_steps: int, seed: int, batch_size: int):
    from benchmark.results import RunSpec
    from tasks import task_names

    return RunSpec(
        model=str(model.resolve()), tasks=tuple(task_names("usb")), mode="finetune",
        variant="all", split="test", seed=seed, data_dir=str(data_dir.resolve()),
        profile="tiny", lora=True, training="multitask", train_tasks=TRAIN_TASKS,
        early_stopping="none", train_overrides={**DEMO_OVERRIDES, "max_steps": max_steps},
        batch_size=batch_size)


def run_demo(out_dir: str | Path, *, docs: int = 30, max_steps: int = 80, seed: int = 0,
             batch_size: int = 16, log=None) -> dict:
    """Run the demo in `out_dir`; returns the results document (also in results.json)."""
    from benchmark.run import run_benchmark

    log = log or demo_log
    out = Path(out_dir).resolve()
    settings = demo_settings(docs, max_steps, seed)
    reuse = claim_folder(out, settings)
    data_dir = build_corpus(out, docs, seed, log)
    model = build_model(out, data_dir, seed, log)
    spec = demo_run_spec(model, data_dir, max_steps, seed, batch_size)
    resume = reuse or (out / "run_spec.json").is_file()
    return run_benchmark(spec, out, resume=resume, extra_config={"demo": settings}, log=log)


def demo_log(message: str) -> None:
    print(f"sumbench demo: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    import time

    import torch

    from benchmark.commands.run import print_results

    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    results = run_demo(args.out, docs=args.docs, max_steps=args.max_steps, seed=args.seed,
                       batch_size=args.batch_size, log=demo_log)
    print_results(results, args.out)
    print(f"demo finished in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0
