"""The documentation site builds with `mkdocs build --strict` (a broken link, a page missing
from the nav or a nav entry without a page fails), and the README stays a user's guide."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import load_script

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path):
    completed = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                                "--site-dir", str(tmp_path / "site")], cwd=REPO,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (tmp_path / "site" / "adding-a-task" / "index.html").is_file()


def test_the_readme_is_a_users_guide():
    """At most 250 lines, its CI commands, and no run log: no dates, commit hashes or
    machine names (measurements live in docs/performance.md, which a script writes)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "<!-- ci:install -->" in text and "<!-- ci:test -->" in text
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not re.search(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)
    assert not re.search(r"machine [A-D]\b|quiet spell|H100|H200", text)


def bench_report():
    return load_script(REPO / "bench" / "report.py", "bench_report")


def test_the_performance_page_is_generated_from_the_recorded_runs():
    """docs/performance.md is what `python bench/report.py` writes from bench/results.jsonl."""
    import json

    report = bench_report()
    lines = [json.loads(text) for text in report.RESULTS.read_text().splitlines() if text]
    assert {line["benchmark"] for line in lines} >= {"presence_speed", "classify_speed",
                                                      "fast_paths"}
    assert report.PAGE.read_text(encoding="utf-8") == report.page(lines)


def test_the_performance_page_shows_the_latest_run_of_each_benchmark_shape_and_arms():
    def run(command: str, ratio: float, **extra) -> dict:
        return {"benchmark": "trainer_speed", "shape": "flan-t5-large", "command": command,
                "ratio": ratio, "identical": True, "date": "d", **extra}

    page = bench_report().page([
        run("python bench/trainer_speed.py --lora --steps 3", 0.9, lora=True),
        run("python bench/trainer_speed.py --steps 3", 0.8),
        run("python bench/trainer_speed.py --lora --steps 6", 1.01, lora=True)])
    rows = [row for row in page.splitlines() if row.startswith("| `python")]
    assert [row.split("`")[1] for row in rows] == ["python bench/trainer_speed.py --steps 3",
                                                   "python bench/trainer_speed.py --lora "
                                                   "--steps 6"]
    assert "| 1.01 |" in rows[1]
    labels = [{"benchmark": "classify_speed", "shape": "flan-t5-base", "task": task,
               "command": f"labels {task}", "ratio": 2.0, "identical": True}
              for task in ("FAC", "EXT", "FAC")]
    rows = [row for row in bench_report().page(labels).splitlines() if row.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["labels FAC", "labels EXT"]
    assert "EXT probabilities at Flan-T5-base's shape" in rows[1] and "per window" in rows[1]
    cuda = dict(labels[0], device="cuda", command="labels FAC on a GPU")
    assert "labels FAC on a GPU" in bench_report().page([*labels, cuda])
    assert "| label probabilities vs one generate per example | not measured" in page


def test_the_performance_page_names_folders_of_the_measuring_machine_by_their_option():
    report = bench_report()
    inside = str(REPO / "bench" / "results.jsonl")
    assert report.portable_command(
        f"python bench/minicheck_speed.py --official /tmp/official/minicheck --data {inside} "
        "--repeat 5") == ("python bench/minicheck_speed.py --official OFFICIAL "
                          f"--data {inside} --repeat 5")
    assert report.portable_command("python bench/meta_eval_speed.py --nlpstats /opt/x/y") == \
        "python bench/meta_eval_speed.py --nlpstats NLPSTATS"
    line = {"benchmark": "bartscore_speed", "shape": "bart-large-cnn", "ratio": 1.25,
            "command": "python bench/bartscore_speed.py --official /tmp/b/bart_score.py"}
    assert "| `python bench/bartscore_speed.py --official OFFICIAL` |" in report.page([line])


def test_the_gpu_training_rows_show_each_arm_ratio_and_what_was_not_measured():
    ours = {"mfu": 0.4123, "model_tflops_per_s": 407.9, "tokens_per_s": 61000.0,
            "plan": {"tokens_per_microbatch": 15232, "per_device_batch_size": 2,
                     "gradient_checkpointing": False, "source": "probed"},
            "profile": {"shares": {"attention": 0.21, "matmul": 0.6, "optimizer": 0.02,
                                   "copies": 0.01, "other": 0.16},
                        "top_kernels": [["sm90_xmma_gemm_bf16", 10.0, 0.3],
                                        ["fmha_cutlassB", 5.0, 0.15]]}}
    training = {"ours": ours, "trainer": {"tokens_per_s": 20000.0},
                "trainer_plan": {"tokens_per_s": 40000.0},
                "compile": {"skipped": "stopped after 12 s (the time budget)"},
                "generate": {"failed": ["CUDA error"]}, "ratio_vs_trainer": 3.05,
                "ratio_vs_trainer_plan": 1.52, "compile_ratio": None}
    line = {"benchmark": "gpu_suite", "device_name": "GPU X", "date": "d", "training": training,
            "labels": {"seconds": 16.1, "records": 3000, "ratio": 32.6}}
    rows = "\n".join(bench_report().gpu_rows([line]))
    assert ("| training MFU, sumbench (auto plan) | 41.2% (407.9 TFLOP/s, 61000 tokens/s); "
            "15232 tokens a micro-batch, checkpointing off | >= 40% | GPU X | d |") in rows
    assert "| tokens/s vs Seq2SeqTrainer (release settings) | 3.05x (20000 tokens/s) | " \
        ">= 1.5x |" in rows
    assert "| --compile vs without | not measured: stopped after 12 s (the time budget) |" in rows
    assert "| ABS generation, 4 beams | not measured: CUDA error |" in rows
    assert "attention 21.0%, matmul 60.0%" in rows and "`sm90_xmma_gemm_bf16` 30.0%" in rows
    old = {**line, "training": {"mfu": 0.027, "model_tflops_per_s": 26.73,
                                "seconds_per_step": 0.3558, "tokens_per_step": 4226.0}}
    assert "| training MFU (before micro-batch plans) | 2.7% (26.73 TFLOP/s; 0.3558 s per " \
        "step of 4226 tokens) |" in "\n".join(bench_report().gpu_rows([old]))
    failed = {**line, "training": {"failed": ["OSError: disk full"]}}
    assert "| training MFU, sumbench (auto plan) | not measured: OSError: disk full | >= 40% |" \
        in "\n".join(bench_report().gpu_rows([failed]))


def test_the_gpu_encoder_rows_show_mfu_the_inference_ratio_and_what_was_not_measured():
    encoders = {"FAC": {"mfu": 0.3812, "model_tflops_per_s": 377.2, "seconds_per_step": 0.0731,
                        "tokens_per_s": 61234.4},
                "EVEXT": {"failed": ["OutOfMemoryError: CUDA out of memory"]},
                "inference": {"ratio": 7.412, "records": 256, "identical": True}}
    line = {"benchmark": "gpu_suite", "device_name": "GPU X", "date": "d",
            "training": {"failed": ["x"]}, "labels": {"seconds": 16.1, "records": 3000},
            "encoders": encoders}
    rows = "\n".join(bench_report().gpu_rows([line]))
    assert ("| RoBERTa-Large FAC training step MFU (32 pairs of <= 512 tokens) | 38.1% (377.2 "
            "TFLOP/s; 0.0731 s per step, 61234 real tokens/s) | >= 40% | GPU X | d |") in rows
    assert ("| RoBERTa-Large EVEXT training step MFU (2,048 pairs of <= 128 tokens) | not "
            "measured: OutOfMemoryError: CUDA out of memory | >= 40% |") in rows
    assert ("| RoBERTa-Large probabilities of FAC, EVEXT, EXT and UNSUP vs one forward per "
            "input | 7.41x (256 inputs a task; identical within 1e-5) | >= 3x |") in rows
    before = "\n".join(bench_report().gpu_rows([{**line, "encoders": None}]))
    assert before.count("not measured: the suite had no encoder checks then") == 3
    assert "| RoBERTa-Large FAC training step MFU (32 pairs of <= 512 tokens) | not " \
        "measured: no GPU lent yet | >= 40% | — | — |" in "\n".join(bench_report().gpu_rows([]))


def test_the_nav_is_grouped_into_guide_reference_and_development():
    import yaml

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    groups = [next(iter(entry)) for entry in nav]
    assert groups == ["Home", "Guide", "Reference", "Development"]
    pages = {page for entry in nav[1:] for group in entry.values() for item in group
             for page in item.values()}
    assert pages | {"index.md"} == {path.name for path in (REPO / "docs").glob("*.md")}


def test_the_license_file_is_the_one_pyproject_names():
    license_text = (REPO / "LICENSE").read_text(encoding="utf-8")
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license = \{ text = "Apache-2.0" \}$', pyproject, re.M)
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
