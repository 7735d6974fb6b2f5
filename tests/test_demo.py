"""`sumbench demo` end to end at a reduced size: synthetic corpus -> derived tasks -> tiny T5 ->
LoRA on FAC+ABS -> all eight tasks predicted, scored, results.json with provenance."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.cli import main
from tasks.scoring import score_files
from helpers import sumbench
from tasks import get_task, task_names


@pytest.fixture(autouse=True, scope="module")
def restore_torch_threads():
    """The demo sets torch's thread count (to 1 by default); put it back afterwards."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str, dict]:
    """(folder, results) of one small demo (6 documents, 10 LoRA steps)."""
    out = tmp_path_factory.mktemp("demo") / "out"
    code = main(["demo", "--out", str(out), "--docs", "6", "--max-steps", "10"])
    assert code == 0
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def count_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def test_demo_scores_all_eight_tasks_with_official_keys(demo):
    out, results = demo
    assert sorted(results["scores"]) == task_names("usb")
    for name, scores in results["scores"].items():
        task = get_task(name)
        for key in task.metric_names:
            assert 0.0 <= scores[key] <= 1.0, (name, key, scores[key])
        instances = task.instances(task.load("test", "all", str(out / "data")))
        assert scores["n_records"] == len(instances) >= 1
        assert count_lines(out / "predictions" / f"{name}.jsonl") == len(instances)
    assert [row["task"] for row in results["table"]] == task_names("usb")
    assert {row["metric"] for row in results["table"]} == {"rouge_gmean", "auc", "f1",
                                                           "exactmatch"}


def test_demo_trains_lora_on_fac_and_abs_and_records_provenance(demo):
    out, results = demo
    training = results["training"]["train"]
    assert training["tasks"] == ["factuality_classification", "abstractive_summarization"]
    assert training["result"]["global_step"] == 10 and training["result"]["final"] == "adapter"
    assert (out / "train" / "adapter" / "adapter_config.json").is_file()
    provenance = results["provenance"]
    assert set(provenance["git"]) == {"commit", "dirty"}
    assert provenance["packages"]["torch"] and provenance["packages"]["transformers"]
    assert provenance["seeds"] == {"seed": 0, "training": 0}
    config = provenance["config"]
    assert config["demo"]["synthetic"] == {"seed": 0, "docs": 6, "generator_version": "1",
                                           "domains": ["biographies", "companies", "disasters"],
                                           "test_only_domains": [], "test_only_docs": 2}
    assert config["finetune_spec"]["lora"] is True and config["finetune_spec"]["max_steps"] == 10
    assert config["run"]["split"] == "test" and config["run"]["profile"] == "tiny"
    assert all(info["adapter"] == str(out / "train" / "adapter")
               for info in results["models"].values())


def test_demo_predictions_rescore_to_the_same_numbers(demo):
    out, results = demo
    paths = [out / entry["path"] for entry in results["predictions"].values()]
    assert len(paths) == 8
    assert score_files(paths) == results["scores"]


def test_demo_again_reuses_everything_and_refuses_other_folders(demo, capsys, tmp_path):
    out, results = demo
    adapter = out / "train" / "adapter" / "adapter_model.safetensors"
    stamp = adapter.stat().st_mtime_ns
    code, stdout, stderr = sumbench(capsys, "demo", "--out", out, "--docs", 6,
                                    "--max-steps", 10)
    assert code == 0, stderr
    assert "training: finished run found" in stderr and "generating" not in stderr
    assert adapter.stat().st_mtime_ns == stamp
    rows = stdout.splitlines()[2:]
    assert [row.split()[0] for row in rows] == task_names("usb")
    assert json.loads((out / "results.json").read_text())["scores"] == results["scores"]
    code, _, stderr = sumbench(capsys, "demo", "--out", out, "--docs", 6, "--max-steps", 11)
    assert code == 2 and "holds a demo with other settings" in stderr
    (tmp_path / "notes.txt").write_text("mine")
    code, _, stderr = sumbench(capsys, "demo", "--out", tmp_path)
    assert code == 2 and "is not an empty folder" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
