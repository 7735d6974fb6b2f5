"""The workspace the command-line error, lock and fault tests share: bad files, a tiny
model, a truncated copy of it, and the fixture's paths (`workspace[...]`)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

PRED = "factuality_classification.jsonl"
EXPERIMENT_DOMAINS = ("biographies", "companies", "disasters", "schools")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, usb_fixture_dir, pyramid_data_dir) -> dict[str, str]:
    """The files the CLI cases point at (built once)."""
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    root = tmp_path_factory.mktemp("bad-input")
    good = (usb_fixture_dir / "predictions" / PRED).read_bytes().splitlines(keepends=True)
    (root / "bad.jsonl").write_bytes(good[0] + b'{"id": "x", \xff\xfe}\n')
    (root / "pred-copy.jsonl").write_bytes(b"".join(good))
    second = good[1].rstrip(b"\n")  # line 2 with a second "prediction"
    (root / "dup-key.jsonl").write_bytes(good[0] + second[:-1] + b', "prediction": [0.5]}\n')
    (root / "dup-metric.json").write_text('{"bart": {"a": 1}, "pegasus": {}, "bart": {}}')
    (root / "deep.jsonl").write_bytes(good[0] + b'{"id": ' + b"[" * 100_000 + b"]" * 100_000
                                      + b"}\n")
    data = shutil.copytree(usb_fixture_dir / "task_datasets", root / "data")
    (data / "all" / "factuality_classification" / "test.jsonl").write_bytes(b"\xc3\x28\n")
    bad_raw = shutil.copytree(usb_fixture_dir / "raw", root / "bad-raw")
    split = bad_raw / "splits" / "companies" / "test.txt"
    split.write_bytes(split.read_bytes().rstrip(b"\n") + b"\ncompanies/\xff.json\n")
    dup_raw = shutil.copytree(usb_fixture_dir / "raw", root / "dup-raw")
    splits = dup_raw / "splits" / "companies"
    train = (splits / "train.txt").read_text().split()
    test = (splits / "test.txt").read_text().split()
    (splits / "train.txt").write_text("\n".join([*train, test[0], train[0]]) + "\n")
    assert len(train) == 1 and test[0] == "companies/doc7_2.json"
    tokenizer = build_tiny_tokenizer(["Yes No fact summary document"] * 4)
    build_tiny_t5(tokenizer, save_dir=root / "model")
    truncated = shutil.copytree(root / "model", root / "truncated-model")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    (root / "a-file").write_text("not a folder, not a database\n")
    (root / "nan-spec.json").write_text('{"warmup_ratio": NaN}')
    from tests.benchmark.test_qapyramid_cli import DATASET
    missing = json.loads(json.dumps(DATASET))
    del missing[1]["system_outputs"]["B"]
    (root / "qa-missing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in missing))
    pyrxsum = pyramid_data_dir / "pyrxsum"
    one_system = sorted(p.stem for p in (pyrxsum / "summaries").iterdir())[0]
    return {"bad_utf8": str(root / "bad.jsonl"), "bad_data": str(data), "data":
            str(usb_fixture_dir / "task_datasets"), "bad_raw": str(bad_raw),
            "dup_raw": str(dup_raw), "model": str(root / "model"),
            "truncated_model": str(truncated), "a_file": str(root / "a-file"),
            "nan_spec": str(root / "nan-spec.json"), "qa_missing": str(root / "qa-missing.jsonl"),
            "pred": str(usb_fixture_dir / "predictions" / PRED), "pyrxsum": str(pyrxsum),
            "one_system": one_system, "tmp": str(root),
            "pred_copy": str(root / "pred-copy.jsonl"), "deep": str(root / "deep.jsonl"),
            "dup_key": str(root / "dup-key.jsonl"), "dup_metric": str(root / "dup-metric.json")}


def _build_experiment_corpus(root: Path) -> None:
    from benchmark.synthetic import SyntheticSpec, generate_corpus
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    generate_corpus(root / "raw", SyntheticSpec(seed=2, docs=24, domains=EXPERIMENT_DOMAINS,
                                                test_only_domains=("landmarks",),
                                                test_only_docs=2))
    texts = [line["txt"] for path in (root / "raw" / "annotations").rglob("*.json")
             for line in json.loads(path.read_text())["annotations"]["source"]]
    tokenizer = build_tiny_tokenizer(texts + ["Yes No SENT0 SENT1 Summarize content :"],
                                     vocab_size=400)
    build_tiny_t5(tokenizer, save_dir=root / "t5", seed=0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    """The experiments' raw corpus (4 training domains + landmarks, test-only) and a tiny T5,
    built once per run and read-only, and a folder of the module's own (`root`)."""
    from helpers import built_once_per_run

    shared = built_once_per_run(tmp_path_factory, "experiment-corpus",
                                _build_experiment_corpus)
    return {"raw": shared / "raw", "model": shared / "t5",
            "root": tmp_path_factory.mktemp("experiments")}
