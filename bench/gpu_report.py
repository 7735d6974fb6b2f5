"""The performance page's GPU section (bench/report.py): the latest run of bench/gpu_suite.py,
check by check, or rows saying what has not been measured."""
from __future__ import annotations


def gpu_rows(lines: list[dict]) -> list[str]:
    """The GPU checks (`bench/gpu_suite.py`, run only where a GPU is lent): its latest run,
    or a row saying it has not run."""
    runs = [line for line in lines if line.get("benchmark") == "gpu_suite"]
    rows = ["", "## GPU checks", "",
            "`python bench/gpu_suite.py` (one script, at most about 9 minutes): Flan-T5-Large "
            "fine-tuning at the release's effective batch on long inputs, bf16 model FLOPs "
            "utilisation (goal >= 40%) and tokens per second against a plain Seq2SeqTrainer "
            "(goal >= 1.5x); the USB-test-sized FAC label-probability job (goal < 60 s), and "
            "its ratio to one `generate` per example (goal >= 5); RoBERTa-Large's FAC and "
            "EVEXT training steps at Table 10's batches, bf16 MFU (goal >= 40%), and the "
            "four encoder tasks' probabilities batched vs one forward per input (goal >= 3x; "
            "`bench/gpu_encoders.py`).", "",
            "| check | result | goal | device | date |", "| --- | --- | --- | --- | --- |"]
    if not runs:
        return rows + ["| training MFU | not measured: no GPU lent yet | >= 40% | — | — |",
                       "| label-probability job | not measured: no GPU lent yet | < 60 s | — "
                       "| — |",
                       "| label probabilities vs one generate per example | not measured: no "
                       "GPU lent yet | >= 5x | — | — |"] + [
            f"| {check} | {result} | {goal} | — | — |"
            for check, result, goal in encoder_rows(None, "no GPU lent yet")]
    line = runs[-1]
    where = f"{line.get('device_name', '?')} | {line.get('date', '')} |"
    labels = line["labels"]
    checks = [*training_rows(line["training"]),
              ("label-probability job", f"{labels['seconds']} s for {labels['records']} "
               f"records", "< 60 s"),
              ("label probabilities vs one generate per example",
               f"{str(labels['ratio']) + 'x' if 'ratio' in labels else '—'}", ">= 5x"),
              *encoder_rows(line.get("encoders"))]
    return rows + [f"| {check} | {result} | {goal} | {where}" for check, result, goal in checks]


def training_rows(training: dict) -> list[tuple[str, str, str]]:
    """(check, result, goal) of a training record: today's arms, or the first suite's one row
    (the tiny profile's loop at the shape, before micro-batch plans)."""
    if "failed" in training:
        return [("training MFU, sumbench (auto plan)", not_measured(training), ">= 40%")]
    if "ours" not in training:
        return [("training MFU (before micro-batch plans)",
                 f"{percent(training.get('mfu'))} ({training['model_tflops_per_s']} TFLOP/s; "
                 f"{training['seconds_per_step']} s per step of "
                 f"{training['tokens_per_step']:.0f} tokens)", ">= 40%")]
    ours = training["ours"]
    plan = ours.get("plan") or {}
    rows = [("training MFU, sumbench (auto plan)",
             arm_text(ours) + (f"; {plan_text(plan)}" if plan else ""), ">= 40%"),
            ("tokens/s vs Seq2SeqTrainer (release settings)",
             ratio_text(training.get("ratio_vs_trainer"), training.get("trainer")), ">= 1.5x"),
            ("tokens/s vs Seq2SeqTrainer (sumbench's micro-batch)",
             ratio_text(training.get("ratio_vs_trainer_plan"), training.get("trainer_plan")),
             "— (what the loop gains)"),
            ("--compile vs without", ratio_text(training.get("compile_ratio"),
                                                training.get("compile")), "kept if > 1")]
    loose = training.get("nondeterministic")
    if loose:
        rows.append(("MFU with deterministic=false", arm_text(loose), "—"))
    generate = training.get("generate") or {}
    rows.append(("ABS generation, 4 beams", f"{generate['generated_tokens_per_s']} generated "
                 f"tokens/s" if generate.get("generated_tokens_per_s") else
                 not_measured(generate), "—"))
    profile = ours.get("profile")
    if profile:
        shares = ", ".join(f"{name} {percent(share)}" for name, share in
                           profile["shares"].items())
        top = "; ".join(f"`{name[:60]}` {percent(share)}"
                        for name, _, share in profile["top_kernels"][:3])
        rows.append(("profile of two steps", f"{shares}; top: {top}", "—"))
    return rows


def arm_text(arm: dict) -> str:
    if "tokens_per_s" not in arm:
        return not_measured(arm)
    return (f"{percent(arm.get('mfu'))} ({arm['model_tflops_per_s']} TFLOP/s, "
            f"{arm['tokens_per_s']:.0f} tokens/s)")


def plan_text(plan: dict) -> str:
    cut = (f"{plan['tokens_per_microbatch']} tokens a micro-batch"
           if plan.get("tokens_per_microbatch") else
           f"{plan.get('per_device_batch_size')} examples a micro-batch")
    return f"{cut}, checkpointing {'on' if plan.get('gradient_checkpointing') else 'off'}"


def ratio_text(ratio, arm: dict | None) -> str:
    if ratio is None:
        return not_measured(arm or {})
    return f"{ratio:.2f}x ({arm['tokens_per_s']:.0f} tokens/s)"


def not_measured(arm: dict) -> str:
    reason = arm.get("skipped") or " ".join(arm.get("failed") or []) or "not run"
    return f"not measured: {reason}"


def percent(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


#: the encoder checks' rows: (key in the suite's "encoders", check, goal)
ENCODER_CHECKS = (("FAC", "RoBERTa-Large FAC training step MFU (32 pairs of <= 512 tokens)",
                   ">= 40%"),
                  ("EVEXT", "RoBERTa-Large EVEXT training step MFU (2,048 pairs of <= 128 "
                   "tokens)", ">= 40%"),
                  ("inference", "RoBERTa-Large probabilities of FAC, EVEXT, EXT and UNSUP vs "
                   "one forward per input", ">= 3x"))


def encoder_rows(encoders: dict | None, missing: str = "the suite had no encoder checks "
                 "then") -> list[tuple[str, str, str]]:
    """(check, result, goal) of the suite's encoder checks (bench/gpu_encoders.py)."""
    rows = []
    for key, check, goal in ENCODER_CHECKS:
        part = (encoders or {}).get(key) or {"skipped": missing}
        if "failed" in part or "skipped" in part:
            result = not_measured(part)
        elif key == "inference":
            result = (f"{part['ratio']:.2f}x ({part['records']} inputs a task; "
                      f"{'identical' if part['identical'] else 'NOT identical'} within 1e-5)")
        else:
            result = (f"{percent(part.get('mfu'))} ({part['model_tflops_per_s']} TFLOP/s; "
                      f"{part['seconds_per_step']} s per step, {part['tokens_per_s']:.0f} "
                      f"real tokens/s)")
        rows.append((check, result, goal))
    return rows
