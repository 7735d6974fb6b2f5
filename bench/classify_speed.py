"""Benchmark: label probabilities, batched (ours) vs one generate() per example (official).

    python bench/classify_speed.py [--task FAC|EXT|EVEXT] [--records 504] [--batch-size 64]
                                   [--device cpu]
                                   [--shape flan-t5-base --records 128 --max-new-tokens 8]

Uses the shared USB fixture's test records of `--task` (FAC by default; EXT and EVEXT as
windows of `sumbench predict`'s default budget, each window's values fitted to its lines as
the official scorer does), repeated to at least --records inputs, and a tiny T5 edited to
answer "Yes"/"No" (trainers.inference.label_probs.build_tiny_labeler), so both paths see real label
tokens: for FAC it then stops, as a fine-tuned FAC model; for EXT and EVEXT it labels every
step up to `--max-new-tokens` (a fine-tuned model writes "SENT0 Yes SENT1 No ...", about 3
tokens a line: a cap of 3 x lines decodes as long). Prints the time of each path, the
speed-up, and the largest absolute difference of the probabilities ("identical": <= 1e-5,
batching changes float rounding). The batched path decodes greedily with `generate` and a
recorder of each step's Yes/No probability. For FAC, also times the "positional" rule, which
reads the label off the first decoder step alone. Arms alternate `--repeat` times
(bench/harness.py); `--json` prints one line whose "ratio" is per-example generate / batched
official rule.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from harness import T5_SHAPES, add_options, compare_arms, report, timed  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
TASK_DATA = SHARED / "fixtures/usb/task_datasets/all"


def task_windows(name: str, count: int, tokenizer=None, budget: int | None = None
                 ) -> tuple[list[str], list[int | None]]:
    """The model inputs of the fixture's `name` test items (windows of `budget` tokens where
    the task has them), repeated to at least `count`, and each one's number of lines."""
    from tasks import get_task

    task = get_task(name)
    path = TASK_DATA / task.name / "test.jsonl"
    if not path.is_file():
        raise SystemExit(f"shared fixture not found: {path}")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    inputs = [model_input for instance in task.instances(records)
              for model_input in task.format(instance, tokenizer, budget)]
    windows = [(m.source, None if m.lines is None else m.lines[1] - m.lines[0]) for m in inputs]
    windows = (windows * -(-count // len(windows)))[:max(count, len(windows))]
    return [source for source, _ in windows], [lines for _, lines in windows]


def fac_sources(count: int) -> list[str]:
    return task_windows("FAC", count)[0]


def official_values(model, tokenizer, source: str, n_lines: int | None, spec) -> list[float]:
    """One generate() per input, the official way; a windowed input's values truncated or
    padded with 0.0 to its lines, as the official scorer does per window."""
    from trainers.inference.label_probs import fit_to_lines, official_label_probabilities

    values = official_label_probabilities(model, tokenizer, source, spec)
    return values if n_lines is None else list(
        fit_to_lines(values, [None] * len(values), n_lines).values)


def max_difference(ours: list[list[float]], theirs: list[list[float]]) -> float:
    if [len(p) for p in ours] != [len(p) for p in theirs]:
        raise SystemExit("the two paths found different numbers of label positions")
    return max((abs(a - b) for p, q in zip(ours, theirs) for a, b in zip(p, q)), default=0.0)


def encoder_seconds(model, tokenizer, sources: list[str], spec) -> float:
    """Seconds of the encoder alone over the batches the batched path forms (median of 3)."""
    import statistics

    import torch

    from trainers.inference.generation import (
        encode_sources,
        length_sorted_batches,
        model_device,
        pad_batch,
    )

    encoded = encode_sources(tokenizer, sources, spec.max_input_tokens)
    batches = length_sorted_batches(encoded, spec.batch_size)
    encoder, device = model.get_encoder(), model_device(model)

    def run() -> None:
        with torch.inference_mode():
            for batch in batches:
                input_ids, mask = pad_batch(batch, tokenizer.pad_token_id, device)
                encoder(input_ids=input_ids, attention_mask=mask)

    return statistics.median(timed(run)[0] for _ in range(3))


def labeler_and_inputs(args, spec):
    """(tokenizer, labeler, sources, lines per source) for `args.task` at `args.shape`."""
    from trainers.inference.label_probs import build_tiny_labeler
    from trainers.models.tiny import build_tiny_tokenizer

    texts, _ = task_windows(args.task, args.records)
    # at a real shape, a BPE of up to 30,000 tokens: about as many tokens per word as T5's
    tokenizer = build_tiny_tokenizer(texts, vocab_size=800 if args.shape == "tiny" else 30000)
    sources, n_lines = task_windows(args.task, args.records, tokenizer, spec.window_budget)
    # a windowed task's model writes a label per line: the labeler then labels every step
    model = build_tiny_labeler(tokenizer, sorted(set(sources)),
                               stop_after_label=args.task == "FAC", **T5_SHAPES[args.shape])
    return tokenizer, model, sources, n_lines


def positional_figures(model, tokenizer, sources, spec, official, baseline_s: float) -> dict:
    """FAC's positional rule (the first decoder step alone): its ratio and difference."""
    import dataclasses

    from trainers.inference.predict import label_probabilities

    first_spec = dataclasses.replace(spec, label_rule="positional")
    first_s, first = timed(lambda: label_probabilities(model, tokenizer, sources, first_spec))
    return {"positional_ratio": round(baseline_s / first_s, 2),
            "positional_max_abs_difference": max(
                (abs(p[0] - q[0]) for p, q in zip(first, official) if p and q), default=0.0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=504)
    parser.add_argument("--task", choices=("FAC", "EXT", "EVEXT"), default="FAC",
                        help="the label task whose fixture test inputs are used (EXT and "
                             "EVEXT: windows of sumbench predict's default budget)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", choices=("tiny", "flan-t5-base"), default="tiny",
                        help="the tiny test shape (default) or Flan-T5-base's config")
    parser.add_argument("--max-new-tokens", type=int,
                        help="generation cap of both paths (default: sumbench predict's); a "
                             "fine-tuned FAC model stops after its label, the labeler at a "
                             "real shape not always")
    add_options(parser)
    args = parser.parse_args(argv)

    from trainers.inference.label_probs import official_label_probabilities
    from trainers.inference.predict import PredictSpec, label_probabilities

    caps = {} if args.max_new_tokens is None else {"max_new_tokens": args.max_new_tokens}
    spec = PredictSpec(batch_size=args.batch_size, device=args.device, **caps)
    tokenizer, model, sources, n_lines = labeler_and_inputs(args, spec)
    # warm-up: every batch shape of the batched path, every distinct input of the official one
    label_probabilities(model, tokenizer, sources, spec, n_lines)
    found = {source: len(official_label_probabilities(model, tokenizer, source, spec))
             for source in sorted(set(sources))}
    result = compare_arms(
        lambda: label_probabilities(model, tokenizer, sources, spec, n_lines),
        lambda: [official_values(model, tokenizer, s, n, spec) for s, n in zip(sources, n_lines)],
        repeat=args.repeat, same=lambda a, b: max_difference(a, b) <= 1e-5)
    official = result["outputs"]["baseline"]
    floor_s = encoder_seconds(model, tokenizer, sources, spec)
    extra = {"task": args.task, "records": len(sources), "batch_size": args.batch_size,
             "device": args.device, "shape": args.shape, "max_new_tokens": spec.max_new_tokens,
             "max_abs_difference": max_difference(result["outputs"]["ours"], official),
             "records_with_a_label": sum(found[source] > 0 for source in sources),
             "encoder_seconds": round(floor_s, 3),
             "ceiling_ratio": round(result["baseline"]["median"] / floor_s, 2)}
    if args.task == "FAC":
        extra.update(positional_figures(model, tokenizer, sources, spec, official,
                                        result["baseline"]["median"]))
    else:
        extra.update(lines=sum(n_lines), labels_generated=sum(
            min(found[source], lines) for source, lines in zip(sources, n_lines)))
    report("classify_speed", result, as_json=args.json, extra=extra,
           labels=("batched, official rule", "one generate() per example (official)"))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
