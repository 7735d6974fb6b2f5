"""Benchmark (not a test): the RoBERTa encoder baselines on CPU, sumbench's trainer and batched
prediction (trainers/encoders) against the plain ways, at a real shape with random weights.

`--shape roberta-large` (default; also roberta-base, and tiny for a quick look) builds a
`RobertaModel` of that published config with random weights and dropout 0 (so both arms of a
part compute the same thing), fp32, `--threads` torch threads. Each part alternates its two arms
`--repeat` times (bench/harness.py: min and median of each, ratio of medians, > 1: ours faster).

`--part train` (the benchmark "encoder_train_speed"): EVEXT fine-tuning. `--pairs` synthetic
EVEXT pairs `<s> source sentence </s></s> summary sentence </s>` with a long-tailed length mix
(lognormal token counts of each sentence, the pair capped at 128 tokens as Table 10's EVEXT
input; about 5% positive), the PairClassifier head, `--steps` optimizer steps of `--batch-size`
pairs (the effective batch), the same pairs in each step, spec and seed in both arms:
  ours      sumbench's encoder trainer steps: `epoch_plan` (the step's pairs sorted by length,
            cut into micro-batches of at most `--tokens-per-microbatch` padded tokens, each
            padded to its longest pair), `accumulate_step` (BCE summed over the step / its
            pairs), gradient clipping, `build_optimizer`'s AdamW and linear schedule;
  baseline  a plain `transformers.Trainer` on the same steps' pairs in the same order (a
            sequential sampler), every pair padded to 128 tokens, the same PairClassifier
            wrapped so that its forward returns {"loss": mean BCE (heads.bce_loss)}, micro-
            batches of the same memory bound (`--tokens-per-microbatch` // 128 pairs, the largest
            such divisor of the batch) with gradient accumulation up to the effective batch,
            AdamW (adamw_torch) with the spec's learning rate, betas, epsilon, no decay, linear
            schedule without warmup, clipping at 1.0.
Only the optimizer steps are timed (a Trainer callback around each; setup is not counted).
"pairs_per_s" of each arm; goal: ratio >= 1.5. "identical": the losses of the first two steps
(the second after one update) agree within 1e-4 (relative) in every run.

`--part infer` (the benchmark "encoder_infer_speed"): the probabilities of the four tasks at the
shape, `--records` synthetic inputs of each (FAC pairs and UNSUP summary+evidence inputs of up
to 512 tokens, EVEXT pairs of up to 128, EXT articles of up to 128 sentences of up to 128
tokens; lognormal lengths), their heads (PairClassifier, TokenTagger, HierarchicalTagger) on one
encoder:
  ours      `predict_probabilities` (batches of `--predict-batch-size` inputs, longest first,
            each padded to its longest);
  baseline  one forward per input (a pair, a UNSUP input, an EXT article), unpadded.
Both on `--device` (default cpu; bench/gpu_encoders.py runs it on a GPU).
"ratio": summed over the four tasks (each task's ratio among the figures); goal >= 3.
"identical": every probability within 1e-5 (batching changes float rounding).

Sizes: roberta-large in fp32 trains roughly 30 padded tokens/s and predicts roughly 60-90 on
2 CPU cores, so the defaults are small: 2 steps of 4 pairs, 256-token micro-batches (2 pairs
of 128 for the baseline), 4 inputs of each task (EXT articles of 12 sentences at the median,
shorter than USB's), 5 repeats: about 5 minutes a part at roberta-large on 2 idle cores (more
on a shared machine; setup adds about half a minute, and the run needs about 9 GiB of memory).
`ratio_of_minimums` (fastest runs) is among the figures for a machine busy with other work.
Bigger batches let the length sort save more padding: `--batch-size 32
--tokens-per-microbatch 1024` is closer to Table 10's EVEXT (2,048 pairs, 16,384-token
micro-batches) where the time allows. `--part both` runs the training part, then the inference
part, each printing its own report (with `--json`, its own line; bench/report.py keeps only a
run's last line, so record each part on its own).

    python bench/encoder_speed.py [--part train|infer|both] [--shape roberta-large]
                                  [--pairs 8] [--batch-size 4] [--steps 2]
                                  [--tokens-per-microbatch 256] [--records 4]
                                  [--predict-batch-size 32] [--threads N] [--seed 0]
                                  [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import add_options, compare_arms, report  # noqa: E402

#: published RoBERTa configs ("tiny": the test shape)
ROBERTA_SHAPES = {
    "tiny": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "vocab_size": 1000, "max_position_embeddings": 514},
    "roberta-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                     "intermediate_size": 3072, "vocab_size": 50265,
                     "max_position_embeddings": 514},
    "roberta-large": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                      "intermediate_size": 4096, "vocab_size": 50265,
                      "max_position_embeddings": 514},
}
BOS, PAD, EOS = 0, 1, 2  # RoBERTa's <s>, <pad>, </s>
EVEXT_TOKENS, LONG_TOKENS, EXT_SENTENCES = 128, 512, 128  # Table 10's limits


def build_encoder(shape: str, seed: int):
    """A random `RobertaModel` of the shape's config, dropout 0."""
    from transformers import RobertaConfig

    from trainers.encoders.heads import build_random_encoder

    config = RobertaConfig(**ROBERTA_SHAPES[shape], type_vocab_size=1, layer_norm_eps=1e-5,
                           pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return build_random_encoder(config, seed)


# ---- synthetic inputs ---------------------------------------------------------------------
def _words(rng, count: int, vocab: int) -> list[int]:
    return rng.integers(EOS + 1, vocab, size=int(count)).tolist()


def _pair_ids(rng, first: int, second: int, limit: int, vocab: int) -> list[int]:
    """`<s> A </s></s> B </s>` with A, B of `first`, `second` tokens, cut longest-first."""
    while first + second + 4 > limit:
        if first >= second:
            first -= 1
        else:
            second -= 1
    return [BOS, *_words(rng, first, vocab), EOS, EOS, *_words(rng, second, vocab), EOS]


def evext_pairs(count: int, vocab: int, seed: int):
    """EVEXT pairs (source sentence, summary sentence), lognormal sentence lengths (median
    about 24 source and 20 summary tokens, a long tail), capped at 128 tokens; ~5% positive."""
    from trainers.encoders.inputs import PairInput

    rng = np.random.default_rng([seed, 1])
    sources = np.maximum(1, rng.lognormal(np.log(24), 0.75, count)).astype(int)
    summaries = np.maximum(1, rng.lognormal(np.log(20), 0.5, count)).astype(int)
    labels = rng.random(count) < 0.05
    return [PairInput(_pair_ids(rng, a, b, EVEXT_TOKENS, vocab), int(label))
            for a, b, label in zip(sources, summaries, labels)]


def fac_inputs(count: int, vocab: int, seed: int):
    """FAC pairs (evidence lines, summary sentence) of up to 512 tokens."""
    from trainers.encoders.inputs import PairInput

    rng = np.random.default_rng([seed, 2])
    evidence = np.maximum(1, rng.lognormal(np.log(110), 0.7, count)).astype(int)
    summaries = np.maximum(1, rng.lognormal(np.log(22), 0.4, count)).astype(int)
    return [PairInput(_pair_ids(rng, a, b, LONG_TOKENS, vocab), int(rng.random() < 0.5))
            for a, b in zip(evidence, summaries)]


def unsup_inputs(count: int, vocab: int, seed: int):
    """UNSUP inputs (summary, evidence) of up to 512 tokens, the summary's tokens labelled."""
    from trainers.encoders.inputs import IGNORED, TokenInput

    rng = np.random.default_rng([seed, 3])
    summaries = np.maximum(1, rng.lognormal(np.log(22), 0.4, count)).astype(int)
    evidence = np.maximum(1, rng.lognormal(np.log(110), 0.7, count)).astype(int)
    inputs = []
    for summary, rest in zip(summaries, evidence):
        ids = _pair_ids(rng, summary, rest, LONG_TOKENS, vocab)
        kept = min(int(summary), len(ids) - 4)
        labels = [IGNORED] + rng.integers(0, 2, kept).tolist() + [IGNORED] * (len(ids) - kept - 1)
        words = [None] + list(range(kept)) + [None] * (len(ids) - kept - 1)
        inputs.append(TokenInput(ids, labels, words))
    return inputs


def ext_inputs(count: int, vocab: int, seed: int):
    """EXT articles: lognormal sentence counts (median 12, at most 128), each `<s> sentence
    </s>` of lognormal length (median 25, at most 128 tokens)."""
    from trainers.encoders.inputs import ArticleInput

    rng = np.random.default_rng([seed, 4])
    articles = []
    for sentences in np.clip(rng.lognormal(np.log(12), 0.6, count), 1, EXT_SENTENCES).astype(int):
        lengths = np.clip(rng.lognormal(np.log(25), 0.5, sentences), 1, EVEXT_TOKENS - 2)
        ids = [[BOS, *_words(rng, n, vocab), EOS] for n in lengths.astype(int)]
        articles.append(ArticleInput(ids, rng.integers(0, 2, len(ids)).tolist(), 0))
    return articles


# ---- training -----------------------------------------------------------------------------
def training_spec(args):
    from trainers.encoders.spec import encoder_spec

    return encoder_spec("roberta-large", "EVEXT", model="random", batch_size=args.batch_size,
                        dropout=0.0, precision="fp32", seed=args.seed)


def trainer_micro_batch(batch_size: int, budget: int) -> int:
    """The baseline's micro-batch: the largest divisor of the batch within the token budget at
    128 tokens a pair (equal micro-batches, so the Trainer's mean of their means is the step's
    mean)."""
    most = max(1, budget // EVEXT_TOKENS)
    return max(size for size in range(1, min(most, batch_size) + 1) if batch_size % size == 0)


def run_ours(model, initial: dict, features, plan, spec) -> dict:
    """sumbench's encoder trainer steps: seconds and loss of each."""
    model.load_state_dict(initial)
    return timed_steps(model.train(), features, plan, spec)


def timed_steps(model, features, plan, spec, dtype=None) -> dict:
    """The plan's steps as sumbench's encoder trainer takes them (`accumulate_step` under
    `dtype`'s autocast, clipping, the spec's AdamW and schedule): {"seconds", "losses"} of each,
    the device synchronised around each step."""
    import torch

    from trainers.encoders.training import (
        accumulate_step,
        build_optimizer,
        model_device,
        pad_token_id,
    )

    optimizer, scheduler = build_optimizer(spec, model, len(plan))
    parameters = [p for p in model.parameters() if p.requires_grad]
    pad_id, device = pad_token_id(model), model_device(model)
    seconds, losses = [], []
    for step in plan:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        loss = accumulate_step(model, features, step, pad_id, dtype)
        torch.nn.utils.clip_grad_norm_(parameters, spec.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))  # reads the loss: the step has finished on the device
        seconds.append(time.perf_counter() - started)
    return {"seconds": seconds, "losses": losses}


def with_bce_loss(classifier):
    """The PairClassifier as a Trainer model: forward(..., labels) -> {"loss", "logits"}, the
    loss heads.bce_loss (mean BCE over the pairs)."""
    from torch import nn

    from trainers.encoders.heads import bce_loss

    class PairClassifierWithLoss(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, labels=None):
            logits = self.inner(input_ids, attention_mask)
            if labels is None:
                return {"logits": logits}
            return {"loss": bce_loss(logits, labels), "logits": logits}

    return PairClassifierWithLoss(classifier)


def padded_rows(features, order) -> list[dict]:
    """The pairs at `order`, each padded to 128 tokens."""
    rows = []
    for index in order:
        feature = features[int(index)]
        padding = EVEXT_TOKENS - len(feature.input_ids)
        rows.append({"input_ids": feature.input_ids + [PAD] * padding,
                     "attention_mask": [1] * len(feature.input_ids) + [0] * padding,
                     "labels": feature.label})
    return rows


def run_trainer(model, initial: dict, rows: list[dict], spec, steps: int, micro: int,
                out_dir: str) -> dict:
    """A plain transformers Trainer on `rows` in order: seconds and loss of each step."""
    import torch
    from transformers import (
        PrinterCallback,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
    )

    model.load_state_dict(initial)
    timing: dict = {"seconds": [], "losses": [], "pending": 0.0}

    class Timer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            timing["start"] = time.perf_counter()

        def on_step_end(self, *_, **__):
            timing["seconds"].append(time.perf_counter() - timing.pop("start"))
            timing["losses"].append(timing["pending"])
            timing["pending"] = 0.0

    class InOrder(Trainer):
        def _get_train_sampler(self, *_, **__):
            return torch.utils.data.SequentialSampler(self.train_dataset)

        def training_step(self, *args, **kwargs):
            loss = super().training_step(*args, **kwargs)  # already / accumulation steps
            timing["pending"] += float(loss)
            return loss

    settings = TrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=micro,
        gradient_accumulation_steps=spec.batch_size // micro, max_steps=steps,
        learning_rate=spec.learning_rate, weight_decay=spec.weight_decay,
        adam_beta1=spec.adam_betas[0], adam_beta2=spec.adam_betas[1],
        adam_epsilon=spec.adam_epsilon, lr_scheduler_type="linear", warmup_steps=0,
        max_grad_norm=spec.max_grad_norm, optim="adamw_torch", use_cpu=True, seed=spec.seed,
        save_strategy="no", logging_strategy="no", report_to=[], disable_tqdm=True,
        dataloader_num_workers=0, remove_unused_columns=False)
    trainer = InOrder(model=with_bce_loss(model), args=settings, train_dataset=rows,
                      data_collator=default_data_collator, callbacks=[Timer()])
    trainer.remove_callback(PrinterCallback)  # its summary line would mix with --json's
    trainer.train()
    return {"seconds": timing["seconds"], "losses": timing["losses"]}


def relative_difference(first: float, second: float) -> float:
    return abs(first - second) / max(abs(second), 1e-12)


def ratio_of_minimums(result: dict) -> float:
    """The baseline's fastest run / ours: less sensitive than the medians to other work on a
    busy machine."""
    return result["baseline"]["min"] / result["ours"]["min"]


def train_part(args, encoder) -> tuple[dict, dict]:
    """(compare_arms-like result, figures) of the training part."""
    import torch

    from trainers.encoders.batches import epoch_plan, epoch_steps, padded_size, trainable_indices
    from trainers.encoders.heads import PairClassifier

    spec = training_spec(args)
    features = evext_pairs(max(args.pairs, args.batch_size * args.steps),
                           encoder.config.vocab_size, args.seed)
    plan = epoch_plan(features, spec.batch_size, spec.seed, 0, args.tokens_per_microbatch)
    plan = plan[:args.steps]
    order = np.concatenate(epoch_steps(trainable_indices(features), spec.batch_size, spec.seed,
                                       0)[:args.steps])
    if sorted(order.tolist()) != sorted(np.concatenate([np.concatenate(s) for s in plan]).tolist()):
        raise SystemExit("encoder_speed: the two arms' steps differ")
    rows = padded_rows(features, order)
    micro = trainer_micro_batch(spec.batch_size, args.tokens_per_microbatch)
    model = PairClassifier(encoder, seed=args.seed)
    initial = {name: value.detach().clone() for name, value in model.state_dict().items()}
    # warm-up: one forward and backward of the largest micro-batch either arm forms
    warm = with_bce_loss(model).train()
    batch = {key: torch.tensor([row[key] for row in rows[:micro]]) for key in rows[0]}
    warm(**batch)["loss"].backward()
    model.zero_grad(set_to_none=True)

    runs: dict[str, list[dict]] = {"ours": [], "baseline": []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(max(1, args.repeat)):
            arms = ("ours", "baseline") if index % 2 == 0 else ("baseline", "ours")
            for arm in arms:
                runs[arm].append(
                    run_ours(model, initial, features, plan, spec) if arm == "ours" else
                    run_trainer(model, initial, rows, spec, len(plan), micro, folder))
    checked = min(2, len(plan))
    identical = all(relative_difference(a, b) <= 1e-4
                    for ours, theirs in zip(runs["ours"], runs["baseline"])
                    for a, b in zip(ours["losses"][:checked], theirs["losses"][:checked]))
    result: dict = {"identical": identical}
    pairs = len(order)
    for arm, arm_runs in runs.items():
        totals = [sum(run["seconds"]) for run in arm_runs]
        result[arm] = {"runs": [round(t, 4) for t in totals], "min": min(totals),
                       "median": statistics.median(totals)}
    result["ratio"] = result["baseline"]["median"] / result["ours"]["median"]
    real = sum(len(features[int(i)].input_ids) for i in order)
    extra = {"shape": args.shape, "ratio_of_minimums": round(ratio_of_minimums(result), 3),
             "pairs": pairs, "batch_size": spec.batch_size,
             "steps": len(plan), "threads": torch.get_num_threads(),
             "tokens_per_microbatch": args.tokens_per_microbatch,
             "microbatches": {"ours": sum(len(step) for step in plan),
                              "baseline": pairs // micro},
             "pairs_per_s": {arm: round(pairs / result[arm]["median"], 2)
                             for arm in ("ours", "baseline")},
             "tokens": {"real": real,
                        "ours_padded": sum(padded_size(features, piece)
                                           for step in plan for piece in step),
                        "baseline_padded": pairs * EVEXT_TOKENS},
             "pair_tokens_median": int(np.median([len(f.input_ids) for f in features])),
             "losses": {arm: [round(v, 6) for v in runs[arm][-1]["losses"]]
                        for arm in ("ours", "baseline")},
             "max_relative_loss_difference": max(
                 relative_difference(a, b) for ours, theirs in
                 zip(runs["ours"], runs["baseline"])
                 for a, b in zip(ours["losses"][:checked], theirs["losses"][:checked]))}
    return result, extra


# ---- inference ----------------------------------------------------------------------------
def task_models_and_inputs(encoder, records: int, seed: int) -> dict:
    """task -> (model, inputs) for the four tasks, on one encoder."""
    from trainers.encoders.heads import HierarchicalTagger, PairClassifier, TokenTagger

    vocab = encoder.config.vocab_size
    pairs = PairClassifier(encoder, seed=seed).eval()
    return {"FAC": (pairs, fac_inputs(records, vocab, seed)),
            "EVEXT": (pairs, evext_pairs(records, vocab, seed)),
            "UNSUP": (TokenTagger(encoder, seed=seed).eval(), unsup_inputs(records, vocab, seed)),
            "EXT": (HierarchicalTagger(encoder, seed=seed).eval(),
                    ext_inputs(records, vocab, seed))}


def one_at_a_time(model, features) -> list:
    """One forward per input, unpadded: σ(logit) per pair, per token or per sentence."""
    import torch

    from trainers.encoders.batches import collate
    from trainers.encoders.training import logits_of, model_device, to_device

    results = []
    device = model_device(model)
    model.eval()
    with torch.no_grad():
        for index in range(len(features)):
            batch = to_device(collate(features, [index], PAD), device)
            values = torch.sigmoid(logits_of(model, batch).float())
            results.append(values[0].tolist())
    return results


def max_difference(ours: list, theirs: list) -> float:
    flat_ours = [np.ravel(np.asarray(value, dtype=float)) for value in ours]
    flat_theirs = [np.ravel(np.asarray(value, dtype=float)) for value in theirs]
    if [len(v) for v in flat_ours] != [len(v) for v in flat_theirs]:
        return float("inf")
    return max((float(np.abs(a - b).max(initial=0.0)) for a, b in zip(flat_ours, flat_theirs)),
               default=0.0)


def infer_part(args, encoder) -> tuple[dict, dict]:
    import torch

    from trainers.encoders.prediction import predict_probabilities

    tasks = task_models_and_inputs(encoder, args.records, args.seed)
    per_task, figures = {}, {}
    for task, (model, features) in tasks.items():
        model.to(args.device)
        # warm-up of both arms, so that neither pays first-call costs in its first timed run
        predict_probabilities(model, features[:2], batch_size=args.predict_batch_size)
        one_at_a_time(model, features[:2])
        per_task[task] = compare_arms(
            lambda m=model, f=features: predict_probabilities(
                m, f, batch_size=args.predict_batch_size),
            lambda m=model, f=features: one_at_a_time(m, f),
            repeat=args.repeat, same=lambda a, b: max_difference(a, b) <= 1e-5)
        outputs = per_task[task]["outputs"]
        figures[task] = {"ratio": round(per_task[task]["ratio"], 3),
                         "ours_s": round(per_task[task]["ours"]["median"], 4),
                         "baseline_s": round(per_task[task]["baseline"]["median"], 4),
                         "max_abs_difference": max_difference(outputs["ours"],
                                                              outputs["baseline"])}
    result: dict = {"identical": all(r["identical"] for r in per_task.values())}
    for arm in ("ours", "baseline"):
        runs = [sum(times) for times in zip(*(r[arm]["runs"] for r in per_task.values()))]
        result[arm] = {"runs": [round(t, 4) for t in runs], "min": min(runs),
                       "median": sum(r[arm]["median"] for r in per_task.values())}
    result["ratio"] = result["baseline"]["median"] / result["ours"]["median"]
    extra = {"shape": args.shape, "ratio_of_minimums": round(ratio_of_minimums(result), 3),
             "records": args.records, "tasks": figures,
             "predict_batch_size": args.predict_batch_size, "threads": torch.get_num_threads(),
             "max_abs_difference": max(f["max_abs_difference"] for f in figures.values())}
    return result, extra


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("train", "infer", "both"), default="both")
    parser.add_argument("--shape", choices=sorted(ROBERTA_SHAPES), default="roberta-large",
                        help="a published RoBERTa config with random weights (default "
                             "roberta-large), or the tiny test shape")
    parser.add_argument("--pairs", type=int, default=8,
                        help="synthetic EVEXT pairs (at least batch size x steps are made)")
    parser.add_argument("--batch-size", type=int, default=4,
                        help="effective batch of a training step, in pairs (Table 10: 2048)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps of each run")
    parser.add_argument("--tokens-per-microbatch", type=int, default=256,
                        help="padded tokens of a micro-batch: sumbench's budget, and the "
                             "baseline's micro-batch of that many 128-token pairs")
    parser.add_argument("--records", type=int, default=4,
                        help="inputs of each of the four tasks for the inference part")
    parser.add_argument("--predict-batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch intra-op threads (default: the CPUs this process may use)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu",
                        help="where the inference part runs (the training part: the CPU)")
    add_options(parser)
    args = parser.parse_args(argv)
    for name in ("pairs", "batch_size", "steps", "tokens_per_microbatch", "records",
                 "predict_batch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    encoder = build_encoder(args.shape, args.seed)
    identical = True
    if args.part in ("train", "both"):
        result, extra = train_part(args, encoder)
        report("encoder_train_speed", result, as_json=args.json, extra=extra,
               labels=("sumbench encoder trainer (length-sorted token-budget micro-batches)",
                       "plain transformers Trainer (every pair padded to 128)"))
        identical &= result["identical"]
    if args.part in ("infer", "both"):
        result, extra = infer_part(args, encoder)
        report("encoder_infer_speed", result, as_json=args.json, extra=extra,
               labels=("predict_probabilities (batched, longest first)",
                       "one forward per input"))
        identical &= result["identical"]
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
