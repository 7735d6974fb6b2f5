"""USB inside EleutherAI's lm-evaluation-harness: `sumbench export lm-eval`, the real `lm_eval`
CLI run offline on the exported tasks with a tiny causal model built here, and `sumbench import
lm-eval` of its samples. Its generations, lm-eval's own reported scores and the imported
predictions are identical to `sumbench run --mode fewshot --fewshot-backend hf-causal` on the
same prompts, shots, decoding and model."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tasks import get_task
from tasks.plumbing.io import read_jsonl

from helpers import sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TASKS = ("factuality_classification", "multisentence_compression")


@pytest.fixture(scope="module")
def tiny_causal(tmp_path_factory, usb_tokenizer):
    from trainers.models.tiny import build_tiny_causal_lm

    folder = tmp_path_factory.mktemp("tiny-causal")
    build_tiny_causal_lm(usb_tokenizer, save_dir=folder)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_causal, data_dir):
    pytest.importorskip("lm_eval", reason="lm-eval is not installed (sumbench[lm-eval])")
    out = tmp_path_factory.mktemp("export") / "usb-lm-eval"
    # 24 new tokens at most (COMP's own room is 212): the random model writes to the cap
    capsys_free = [sys.executable, "-m", "benchmark", "export", "lm-eval", "--model",
                   str(tiny_causal), "--data", str(data_dir), "--out", str(out),
                   "--max-new-tokens", "24"]
    done = subprocess.run(capsys_free, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


@pytest.mark.slow
def test_export_writes_the_tasks_lm_eval_can_express(exported):
    out, err = exported
    summary = json.loads((out / "export.json").read_text())
    assert sorted(summary["exported"]) == sorted(
        ["abstractive_summarization", "topicbased_summarization", "multisentence_compression",
         "fixing_factuality", "factuality_classification", "unsupported_span_prediction"])
    assert set(summary["refused"]) == {"extractive_summarization", "evidence_extraction"}
    assert "line tasks are cut into windows" in summary["refused"]["evidence_extraction"]
    assert err.count("not exported: ") == 2
    # the tiny tokenizer appends </s>, which sumbench drops from prompts: lm-eval must not add it
    assert ",add_bos_token=False,max_length=4096" in summary["model_args"]
    config = (out / "usb_factuality_classification.yaml").read_text()
    assert "output_type: generate_until" in config and "max_gen_toks: 24" in config
    group = (out / "usb.yaml").read_text()
    assert all(f"  - usb_{name}\n" in group for name in summary["exported"])
    assert "## Not exported" in (out / "README.md").read_text()


@pytest.mark.slow
def test_lm_eval_generates_and_scores_as_sumbench_does(exported, tiny_causal, data_dir,
                                                        tmp_path, capsys):
    out, _ = exported
    summary = json.loads((out / "export.json").read_text())
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    harness = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
         summary["model_args"] + ",dtype=float32", "--include_path", str(out), "--tasks",
         ",".join(f"usb_{name}" for name in TASKS), "--batch_size", "1", "--device", "cpu",
         "--log_samples", "--output_path", str(tmp_path / "lm-eval")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert harness.returncode == 0, harness.stderr[-3000:]
    code, _, err = sumbench(capsys, "run", "--mode", "fewshot", "--fewshot-backend",
                            "hf-causal", "--model", tiny_causal, "--tasks", ",".join(TASKS),
                            "--data", data_dir, "--batch-size", "1", "--device", "cpu",
                            "--max-new-tokens", "24", "--label-reading", "phrases",
                            "--out", tmp_path / "run")
    assert code == 0, err
    run = json.loads((tmp_path / "run" / "results.json").read_text())
    (reported,) = (tmp_path / "lm-eval").glob("*/results_*.json")
    harness_results = json.loads(reported.read_text())["results"]
    samples = sorted((tmp_path / "lm-eval").glob("*/samples_*.jsonl"))
    for name in TASKS:
        # the same generation for every prompt
        ours = {row["instance"]: row["raw_output"]
                for row in read_jsonl(tmp_path / "run" / "outputs" / f"{name}.jsonl")}
        (task_samples,) = [path for path in samples if f"samples_usb_{name}_" in path.name]
        theirs = {s["doc"]["instance_index"]: s["filtered_resps"][0]
                  for s in read_jsonl(task_samples)}
        assert theirs == ours, name
        # lm-eval reports sumbench's numbers
        for metric in ("headline", *get_task(name).metric_names):
            assert harness_results[f"usb_{name}"][f"{metric},none"] == \
                run["scores"][name][metric], (name, metric)
    # and its samples come back as the very prediction files of the run
    code, _, err = sumbench(capsys, "import", "lm-eval", *samples, "--out", tmp_path / "back")
    assert code == 0, err
    for name in TASKS:
        assert read_jsonl(tmp_path / "back" / "predictions" / f"{name}.jsonl") == \
            read_jsonl(tmp_path / "run" / "predictions" / f"{name}.jsonl")


def test_import_refuses_what_is_not_an_exported_sample(tmp_path, capsys):
    path = tmp_path / "samples_other_task.jsonl"
    path.write_text(json.dumps({"doc": {"question": "q"}, "filtered_resps": ["a"]}) + "\n")
    code, _, err = sumbench(capsys, "import", "lm-eval", path, "--out", tmp_path / "back")
    assert code == 2
    assert "samples_other_task.jsonl:1, field 'doc': not a sample of a task exported by " \
           "sumbench" in err
    assert not (tmp_path / "back").exists()


def test_import_reads_each_item_once(exported, tmp_path, capsys):
    """The samples of two lm-eval runs into one folder: the same answers count once,
    different ones are refused."""
    out, _ = exported
    docs = read_jsonl(out / "data" / "factuality_classification.jsonl")[:2]
    first, second = tmp_path / "samples_a.jsonl", tmp_path / "samples_b.jsonl"
    first.write_text("".join(json.dumps({"doc": d, "filtered_resps": ["Yes"]}) + "\n"
                             for d in docs))
    second.write_text(first.read_text())
    code, _, err = sumbench(capsys, "import", "lm-eval", first, second, "--out",
                            tmp_path / "back")
    assert code == 0, err
    records = read_jsonl(tmp_path / "back" / "predictions" / "factuality_classification.jsonl")
    assert [r["prediction"] for r in records] == [[1.0], [1.0]]
    second.write_text(json.dumps({"doc": docs[1], "filtered_resps": ["No"]}) + "\n")
    code, _, err = sumbench(capsys, "import", "lm-eval", first, second, "--out",
                            tmp_path / "again")
    assert code == 2 and "a second, different answer for item 2 of factuality_" in err
