"""The performance page (docs/performance.md), written from the benchmarks' own JSON lines.

    python bench/report.py --record bench/presence_speed.py [ARGS...]   # run, keep its line
    python bench/report.py                                             # write the page

`--record` runs one benchmark with `--json` and appends its last line to bench/results.jsonl
with the command and the date. Without it, the page is written: for each benchmark, shape,
label task, LoRA, sample, `--full` and device, its latest recorded run: what it measures, its
goal, the ratio of medians (alternated arms, `--repeat` times), whether both arms gave
identical outputs, a few figures of its own, and the machine and date. Measurements live on
that page only.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from gpu_report import gpu_rows  # noqa: E402

RESULTS = BENCH / "results.jsonl"
PAGE = BENCH.parent / "docs" / "performance.md"

#: benchmark -> (what it measures, the goal of its ratio)
WHAT = {
    "score_speed": ("`score_records` (2 workers) vs a one-process rouge-score loop; numbers "
                    "identical", "> 1"),
    "score_scale": ("`sumbench score` streaming, 20k vs 200k records of all eight tasks: time "
                    "ratio (linear is 10)", "<= 11"),
    "classify_speed": ("FAC probabilities, batched vs one `generate(output_scores=True)` per "
                       "example", ">= 12"),
    "presence_speed": ("NLI presence on REALSumm pairs vs the Lite²Pyramid loop (batch 32, "
                       "padded to 400)", ">= 3"),
    "train_speed": ("tokens/s of length-grouped batches with dynamic padding vs random-order "
                    "batches", "> 1"),
    "classify_speed@flan-t5-base": ("FAC probabilities at Flan-T5-base's shape (random "
                                    "weights), batched vs one `generate` per example (the "
                                    "official way)", ">= 5"),
    "minicheck_speed@roberta-large": ("MiniCheck presence at MiniCheck-RoBERTa-Large's shape "
                                      "(random weights) on REALSumm (summary, SCU) pairs vs the "
                                      "official `Inferencer` (pair by pair, batch 16); within "
                                      "1e-6", ">= 2"),
    "presence_speed@roberta-large": ("NLI presence at roberta-large's shape (random weights) "
                                     "vs the Lite²Pyramid loop (batch 32, padded to 400)",
                                     ">= 2"),
    "trainer_speed@flan-t5-large": ("fine-tuning at Flan-T5-Large's shape (random weights, "
                                    "fp32 on CPU): seconds per step of a plain Seq2SeqTrainer "
                                    "on the same batches / sumbench's; same loss; "
                                    "memory_ratio = peak RSS ours / theirs",
                                    ">= 1.0 at memory_ratio <= 1"),
    "classify_speed@flan-t5-base/EXT": ("EXT probabilities at Flan-T5-base's shape (random "
                                        "weights), batched vs one `generate` per window (the "
                                        "official way)", ">= 5"),
    "classify_speed@flan-t5-base/EVEXT": ("EVEXT probabilities at Flan-T5-base's shape (random "
                                          "weights), batched vs one `generate` per window (the "
                                          "official way)", ">= 5"),
    "generate_speed@flan-t5-base": ("ABS generation at Flan-T5-base's shape (random weights, "
                                    "4 beams), batched vs one `generate` per example (the "
                                    "official way); texts identical", "> 1"),
    "easiness_speed": ("easiness (R, P) of REALSumm's STUs against its SCUs: the ROUGE-1.5.5 "
                       "port vs one Perl ROUGE-1.5.5 run over all pairs; same R and P",
                       ">= 20"),
    "questeval_speed@t5-small": ("QuestEval v0.2.4 at T5-small's shape (random weights) on "
                                 "REALSumm documents x systems: sumbench's vs the official "
                                 "package's own code; per-summary scores within 1e-5",
                                 ">= 3"),
    "view_speed": ("`sumbench view` of two USB-test-sized runs (about 17,600 records each): "
                   "build, then open and filter in Chromium", "open < 3 s, filter < 0.2 s"),
    "leaderboard_load": ("server-side scoring of a USB-test-sized submission vs `sumbench "
                         "score`; page latency; listing after scoring; upload bombs "
                         "(peak RSS within 100 MiB of idle)", "<= 1.5"),
    "upload_abuse": ("hostile uploads to a running server (zip members lying about their "
                     "size in bzip2 and deflate, 60 lines of 333,000 empty lists, plain and "
                     "zipped, 500,000 records), alone and three at once",
                     "refused, peak RSS <= 150 MiB over idle, each attack < 1 s"),
    "bertscore_speed@roberta-base": ("BERTScore P, R and F of synthetic REALSumm-length "
                                 "systems at roberta-base's shape (random weights): the "
                                 "evaluators (references embedded once) vs "
                                 "`bert_score.score` per system; within 1e-5", ">= 1.5"),
    "bertscore_speed@roberta-large": ("BERTScore P, R and F of synthetic REALSumm-length "
                                 "systems at roberta-large's shape (random weights): the "
                                 "evaluators (references embedded once) vs "
                                 "`bert_score.score` per system; within 1e-5", ">= 1.5"),
    "bartscore_speed@bart-large-cnn": ("BARTScore F (both directions, then their mean) of "
                                       "synthetic REALSumm-length systems at "
                                       "bart-large-cnn's shape (random weights): distinct "
                                       "sources encoded once, pairs sorted by length vs the "
                                       "official `BARTScorer.score` (batch 4) per system and "
                                       "direction; within 1e-5 relative", ">= 2"),
    "a2cu_matching_speed@base": ("A2CU's (summary, ACU) matching at a DeBERTa-base shape "
                                 "(random weights): length-sorted batches of 32 vs the "
                                 "official `autoacu` 0.1.0 `acu_matching` (one pair per "
                                 "batch, its default); the same scores", ">= 2"),
    "alignscore_speed@roberta-large": ("AlignScore presence at AlignScore-large's shape "
                                       "(random weights) on REALSumm (summary, SCU) pairs: "
                                       "pooled, sorted rows with dynamic padding vs the "
                                       "official fork's `score` (pair by pair, padded to "
                                       "512); within 1e-5", ">= 2"),
    "meta_eval_speed@realsumm": ("`boot-both` intervals of system- and summary-level "
                                 "Kendall, Pearson and Spearman for 20 metrics on REALSumm's "
                                 "25 x 100 human matrix: batched resampling vs nlpstats' "
                                 "`bootstrap` loop, the same draws; intervals within 1e-12",
                                 ">= 20"),
    "encoder_train_speed@roberta-large": ("EVEXT fine-tuning at roberta-large's shape (random "
                                          "weights, fp32 on CPU): pairs/s of sumbench's "
                                          "encoder trainer (length-sorted token-budget "
                                          "micro-batches) vs a plain `Trainer` padding every "
                                          "pair to 128, same steps; same loss", ">= 1.5"),
    "encoder_infer_speed@roberta-large": ("FAC, EVEXT, EXT and UNSUP probabilities at "
                                          "roberta-large's shape (random weights): "
                                          "`predict_probabilities` vs one forward per input; "
                                          "within 1e-5", ">= 3"),
}
#: fast paths deleted for gaining less than 1.15x at a real shape, as bench/fast_paths.py
#: measured them before it went with them: path -> the code that went (lines; test lines)
REMOVED = {
    "first_token_shortcut": "trainers/first_token.py (204, with padded_keys; tests 215)",
    "padded_keys": "part of trainers/first_token.py",
    "workers": "trainers/cpu_workers.py (84; tests 82), `--workers` of presence commands",
    "pair_encoding": "trainers/pair_encoding.py (283, with pair_template; tests 297)",
    "pair_template": "part of trainers/pair_encoding.py",
    "batch_plan": "trainers/batch_plan.py (73; tests 113)",
    "lean_t5": "trainers/lean_t5.py and trainers/greedy_labels.py (378; tests 236)",
}


def benchmark_key(line: dict) -> str:
    """The benchmark's name, with its model shape when it is not the tiny test shape."""
    shape = line.get("shape", "tiny")
    return line.get("benchmark", "") + ("" if shape == "tiny" else f"@{shape}")


def row_key(line: dict) -> str:
    """What one row of the page stands for: the benchmark and shape, the label task when it
    is not FAC, LoRA, a sample other than pairs, a `--full` run, a device other than the CPU."""
    task, sample, device = line.get("task"), line.get("sample"), line.get("device")
    return benchmark_key(line) + ("" if task in (None, "FAC") else f"/{task}") + \
        ("+lora" if line.get("lora") else "") + \
        ("" if sample in (None, "pairs") else f"+{sample}") + \
        ("+full" if "full_run" in line else "") + \
        ("" if device in (None, "cpu") else f" on {device}")


def what_and_goal(line: dict) -> tuple[str, str]:
    """WHAT's entry for the row (the label task's own, where it has one) or the benchmark's."""
    task = line.get("task")
    key = benchmark_key(line)
    return WHAT.get(f"{key}/{task}") or WHAT.get(key, ("", ""))


def details(line: dict) -> str:
    """A benchmark's own figures worth a column."""
    parts = []
    if "keep_up" in line:
        burst = line["keep_up"]
        parts.append(f"{burst['submissions']} at once: listed p95 {burst['p95_s']:.2f} s")
    for name, latency in (line.get("latency") or {}).items():
        parts.append(f"GET {name} p95 {latency['p95_ms']:.1f} ms")
    if "bombs" in line:
        bombs = line["bombs"]
        parts.append(f"{bombs['uploads']} newline bombs at once: peak RSS "
                     f"{bombs['peak_over_idle_mib']:.1f} MiB over idle, answers "
                     f"{'/'.join(map(str, sorted(set(bombs['statuses']))))} within "
                     f"{bombs['max_s']:.2f} s")
    if line.get("benchmark") == "upload_abuse":
        slowest = {name: max(row["seconds"]) for name, row in line["alone"].items()}
        parts.append(f"{'all refused' if line['refused'] else 'NOT ALL REFUSED'}; worst peak "
                     f"{line['max_over_idle_mib']} MiB over idle; slowest attack "
                     f"{line['max_seconds']:.2f} s (alone or three at once); alone: "
                     + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in slowest.items()))
    if "memory_ratio" in line:
        parts.append(f"memory ratio {line['memory_ratio']}, tokens/s "
                     f"{line['tokens_per_s']['ours']} vs {line['tokens_per_s']['baseline']}"
                     + (", LoRA" if line.get("lora") else ""))
    if "peak_rss_ratio" in line:
        parts.append(f"peak RSS ratio {line['peak_rss_ratio']}, "
                     f"{line['records_per_s']} records/s")
    if line.get("benchmark") == "view_speed":
        parts.append(f"{line['items']} items, {line['page_mib']} MiB page: built in "
                     f"{line['build_s']} s, opened in {line['open_s']} s, filtered in "
                     f"{line['filter_s']} s")
    if "pairs_per_s" in line:
        parts.append(f"pairs/s {line['pairs_per_s']['ours']} vs "
                     f"{line['pairs_per_s']['baseline']}")
    if line.get("benchmark") == "encoder_infer_speed":
        parts.append(", ".join(f"{task} {figures['ratio']:.2f}x"
                               for task, figures in line["tasks"].items()))
    if "ceiling_ratio" in line:
        parts.append(f"encoder alone {line['encoder_seconds']:.3f} s: at most "
                     f"{line['ceiling_ratio']:.2f}x here")
    for arm in ("ours", "baseline"):
        if isinstance(line.get(arm), dict) and "median" in line[arm]:
            parts.append(f"{arm} {line[arm]['median']:.3f} s")
    return "; ".join(parts)


def identical_text(line: dict) -> str:
    """Whether both arms gave identical outputs; a dash for a benchmark with no two arms."""
    if "identical" not in line:
        return "—"
    return "yes" if line["identical"] else "no"


def machine_text(line: dict) -> str:
    host = line.get("machine", {})
    gpus = (host.get("torch_runtime") or {}).get("gpus")
    return f"{host.get('cpu', '?')}, {host.get('cpus', '?')} CPUs" + \
        (f", {', '.join(gpus)}" if gpus else "")


def record(command: list[str]) -> dict:
    """Run one benchmark with --json; append its line to RESULTS."""
    completed = subprocess.run([sys.executable, *command, "--json"], capture_output=True,
                               text=True, check=False)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode not in (0, 1) or not lines:
        sys.exit(f"report: {' '.join(command)} failed ({completed.returncode}):\n"
                 f"{completed.stderr[-2000:]}")
    line = {**json.loads(lines[-1]), "command": " ".join(["python", *command]),
            "date": dt.date.today().isoformat()}
    with open(RESULTS, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line, sort_keys=True) + "\n")
    return line


def fast_path_rows(lines: list[dict]) -> list[str]:
    """The last measurement of each fast path (bench/fast_paths.py, deleted with the paths
    it measured) and what became of it."""
    latest: dict[str, tuple[dict, dict]] = {}
    for line in lines:
        for name, path in (line.get("paths") or {}).items():
            latest[name] = (path, line)
    if not latest:
        return []
    rows = ["", "## Fast paths at real shapes", "",
            "`python bench/fast_paths.py` measured each fast path on (as shipped) and off, "
            "everything else as shipped, on random weights of a published config. A path "
            "stays only at >= 1.15x with identical outputs; none did, and the benchmark went "
            "with them.", "",
            "| fast path | shape | ratio | identical | kept | removed | machine | date |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, (path, line) in sorted(latest.items()):
        rows.append(f"| {name} | {path['shape']} | {path['ratio']:.3f} | "
                    f"{'yes' if path['identical'] else 'no'} | "
                    f"{'no' if name in REMOVED else 'yes'} | {REMOVED.get(name, '')} | "
                    f"{machine_text(line)} | {line.get('date', '')} |")
    return rows


def portable_command(command: str) -> str:
    """The command as a reader can rerun it: an absolute path outside the repository (the
    measuring machine's copy of official code) becomes its option's name in capitals."""
    words = command.split()
    for index, word in enumerate(words[1:], start=1):
        previous = words[index - 1]
        if word.startswith("/") and previous.startswith("--") \
                and not Path(word).resolve().is_relative_to(BENCH.parent):
            words[index] = previous.lstrip("-").replace("-", "_").upper()
    return " ".join(words)


def page(lines: list[dict]) -> str:
    latest: dict[str, dict] = {}
    for line in lines:  # the latest run of each benchmark, shape and arm set
        if line.get("benchmark") != "fast_paths":
            latest[row_key(line)] = line
    rows = ["# Performance", "",
            "Generated by `python bench/report.py` from the benchmarks' JSON lines "
            "(bench/results.jsonl; `--record` adds a run). Each benchmark alternates its two "
            "arms `--repeat` times and reports the ratio of their medians (> 1: sumbench's "
            "arm is faster; score_scale's is a time ratio of two sizes). Tests never time "
            "anything: speed claims live here. An argument in capitals is a folder of official "
            "code on the measuring machine: the benchmark's `--help` says what it holds.", "",
            "| benchmark | what | goal | ratio | identical | figures | machine | date |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for _, line in sorted(latest.items()):
        command = portable_command(line["command"])
        if line.get("benchmark") == "gpu_suite":
            continue
        what, goal = what_and_goal(line)
        ratio = line.get("ratio")
        rows.append(f"| `{command}` | {what} | {goal} | "
                    f"{'—' if ratio is None else f'{ratio:.2f}'} | "
                    f"{identical_text(line)} | {details(line)} | "
                    f"{machine_text(line)} | {line.get('date', '')} |")
    return "\n".join(rows + gpu_rows(lines) + fast_path_rows(lines)) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                        help="run this benchmark with --json and keep its line")
    args = parser.parse_args()
    if args.record:
        print(json.dumps(record(args.record), sort_keys=True))
        return 0
    lines = [json.loads(text) for text in RESULTS.read_text(encoding="utf-8").splitlines()
             if text.strip()] if RESULTS.is_file() else []
    PAGE.write_text(page(lines), encoding="utf-8")
    print(PAGE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
