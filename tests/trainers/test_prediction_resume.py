"""Resumable prediction runs: an interrupted run continues without recomputing finished
windows and ends with the same files as an uninterrupted run; mismatched partial files are
refused; torn last lines are dropped; finished runs are reused."""
from __future__ import annotations

import importlib.metadata

import pytest

from tasks import get_task
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.inference.label_probs import build_tiny_labeler
from trainers.inference.predict import PredictSpec, run_task

TASK_FILE = "factuality_classification.jsonl"


class Stop(Exception):
    """Raised from the batch callback to interrupt a run."""


@pytest.fixture(scope="module")
def task():
    return get_task("FAC")


@pytest.fixture(scope="module")
def instances(fac_test_records, task):
    return task.instances(fac_test_records)


@pytest.fixture(scope="module")
def tokenizer(fac_tokenizer):
    return fac_tokenizer


@pytest.fixture(scope="module")
def model(tokenizer, task, instances):
    return build_tiny_labeler(tokenizer, [task.format(i)[0].source for i in instances])


@pytest.fixture()
def encoded_rows(model):
    """Counts the inputs the model encodes: the rows through the first encoder layer's query
    map, which `generate` calls once per batch."""
    counter = {"rows": 0}

    def count(module, args):
        counter["rows"] += args[0].shape[0]

    query = model.get_encoder().block[0].layer[0].SelfAttention.q
    handle = query.register_forward_pre_hook(count)
    yield counter
    handle.remove()


SPEC = PredictSpec(batch_size=2, max_new_tokens=4, device="cpu")


def stop_after(batches: int):
    def callback(number: int) -> None:
        if number == batches:
            raise Stop
    return callback


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, task, instances, model, tokenizer):
    out = tmp_path_factory.mktemp("full")
    run = run_task(task, instances, model, tokenizer, SPEC, out)
    return out, run


def test_interrupted_run_resumes_without_recomputing(tmp_path, task, instances, model,
                                                     tokenizer, uninterrupted, encoded_rows):
    full_dir, full_run = uninterrupted
    with pytest.raises(Stop):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(3))
    partial = (tmp_path / "outputs" / "factuality_classification.partial.jsonl")
    assert len(partial.read_text().splitlines()) == 6
    assert not (tmp_path / "predictions" / TASK_FILE).exists()
    encoded_rows["rows"] = 0
    resumed = run_task(task, instances, model, tokenizer, SPEC, tmp_path)
    assert encoded_rows["rows"] == len(instances) - 6
    assert resumed.counts["resumed"] == 6 and resumed.counts["computed"] == len(instances) - 6
    assert resumed.records == full_run.records
    for folder, name in (("predictions", TASK_FILE), ("outputs", TASK_FILE)):
        assert (tmp_path / folder / name).read_bytes() == (full_dir / folder / name).read_bytes()
    assert not partial.exists()


def test_finished_run_is_reused_and_no_resume_recomputes(task, instances, model, tokenizer,
                                                         uninterrupted, encoded_rows):
    full_dir, full_run = uninterrupted
    encoded_rows["rows"] = 0
    again = run_task(task, instances, model, tokenizer, SPEC, full_dir)
    assert encoded_rows["rows"] == 0 and again.records == full_run.records
    fresh = run_task(task, instances, model, tokenizer, SPEC, full_dir, resume=False)
    assert encoded_rows["rows"] == len(instances) and fresh.records == full_run.records


def test_a_different_batch_size_may_resume(tmp_path, task, instances, model, tokenizer,
                                           uninterrupted):
    with pytest.raises(Stop):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(2))
    bigger = PredictSpec(batch_size=5, max_new_tokens=4, device="cpu")
    resumed = run_task(task, instances, model, tokenizer, bigger, tmp_path)
    assert resumed.counts["resumed"] == 4
    for ours, theirs in zip(resumed.records, uninterrupted[1].records):
        assert ours["prediction"] == pytest.approx(theirs["prediction"], abs=1e-6)


@pytest.mark.parametrize("change, field", [("spec", "spec"), ("model", "model")])
def test_a_partial_file_of_another_run_is_refused(tmp_path, task, instances, model, tokenizer,
                                                  change, field):
    with pytest.raises(Stop):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(1))
    other_spec = PredictSpec(batch_size=2, max_new_tokens=5, device="cpu")
    if change == "spec":
        arguments = (model, tokenizer, other_spec)
    else:
        other = build_tiny_labeler(tokenizer, [task.format(i)[0].source for i in instances],
                                   seed=1)
        arguments = (other, tokenizer, SPEC)
    with pytest.raises(SumbenchError, match=rf"belongs to a different run \(differs in: {field}\)"):
        run_task(task, instances, *arguments, tmp_path)


def test_a_torn_last_line_is_dropped(tmp_path, task, instances, model, tokenizer, uninterrupted,
                                     encoded_rows):
    with pytest.raises(Stop):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(2))
    partial = tmp_path / "outputs" / "factuality_classification.partial.jsonl"
    with partial.open("a") as handle:
        handle.write('{"instance": 9, "wind')
    encoded_rows["rows"] = 0
    resumed = run_task(task, instances, model, tokenizer, SPEC, tmp_path)
    assert encoded_rows["rows"] == len(instances) - 4
    assert resumed.records == uninterrupted[1].records


def test_a_malformed_partial_line_is_an_error_with_its_place(tmp_path, task, instances, model,
                                                              tokenizer):
    with pytest.raises(Stop):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(1))
    partial = tmp_path / "outputs" / "factuality_classification.partial.jsonl"
    partial.write_text("not json\n" + partial.read_text())
    with pytest.raises(SumbenchError, match=r"partial\.jsonl:1: malformed JSON"):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path)


def test_corrected_references_reach_the_records_of_a_finished_run(tmp_path, task, instances,
                                                                   model, tokenizer,
                                                                   encoded_rows):
    first = run_task(task, instances, model, tokenizer, SPEC, tmp_path)
    corrected = [dict(instance, label=1 - instance["label"]) for instance in instances]
    encoded_rows["rows"] = 0
    again = run_task(task, corrected, model, tokenizer, SPEC, tmp_path)
    assert encoded_rows["rows"] == 0 and again.counts["computed"] == 0   # outputs reused
    assert [r["label"] for r in again.records] == [1 - i["label"] for i in instances]
    assert [r["prediction"] for r in again.records] == [r["prediction"] for r in first.records]
    predictions = tmp_path / "predictions" / TASK_FILE
    assert read_jsonl(predictions) == again.records                 # the file was rewritten
    written = predictions.stat().st_mtime_ns
    assert run_task(task, corrected, model, tokenizer, SPEC, tmp_path).records == again.records
    assert predictions.stat().st_mtime_ns == written                # unchanged: not rewritten
    predictions.unlink()                                            # a lost file is rebuilt
    run_task(task, instances, model, tokenizer, SPEC, tmp_path)
    assert encoded_rows["rows"] == 0 and read_jsonl(predictions) == first.records


@pytest.mark.parametrize("name, damage, message", [
    ("factuality_classification.meta.json", "{not json", r"meta\.json:1: malformed JSON"),
    ("factuality_classification.partial.json", "", r"partial\.json:1: malformed JSON"),
    ("factuality_classification.jsonl", "first line", r"\.jsonl: no output for instance 1"),
])
def test_damaged_run_files_are_data_errors_naming_the_file(tmp_path, task, instances, model,
                                                           tokenizer, name, damage, message):
    if name.endswith(".partial.json"):
        with pytest.raises(Stop):
            run_task(task, instances, model, tokenizer, SPEC, tmp_path, on_batch=stop_after(1))
    else:
        run_task(task, instances, model, tokenizer, SPEC, tmp_path)
    path = tmp_path / "outputs" / name
    if damage == "first line":
        damage = path.read_text().splitlines()[0] + "\n"
    path.write_text(damage)
    with pytest.raises(DataError, match=message):
        run_task(task, instances, model, tokenizer, SPEC, tmp_path)


def test_meta_json_records_provenance_that_never_decides_reuse(tmp_path, task, instances, model,
                                                               tokenizer, encoded_rows):
    """meta.json holds the config (with where the model came from), seeds, versions and
    commit; a finished run whose provenance differs (another time, commit or model path) is
    still reused."""
    import json

    import torch

    info = {"model": "/models/tiny", "revision": None, "commit": None, "adapter": None}
    run_task(task, instances, model, tokenizer, SPEC, tmp_path, model_info=info)
    meta_path = tmp_path / "outputs" / "factuality_classification.meta.json"
    meta = json.loads(meta_path.read_text())
    provenance = meta["provenance"]
    assert provenance["config"] == {"task": task.name, "spec": SPEC.to_dict(), "model": info,
                                    "instances": len(instances)}
    assert provenance["seeds"] == {}
    assert provenance["packages"]["torch"] == importlib.metadata.version("torch")
    # the build's own version keeps its local label (+cpu, +cu130), which metadata may lack
    assert provenance["torch_runtime"]["build"] == torch.__version__
    assert set(provenance["git"]) == {"commit", "dirty"}
    assert "/models/tiny" not in json.dumps(meta["fingerprint"])
    provenance.update(created="2000-01-01T00:00:00+00:00",
                      git={"commit": "0" * 40, "dirty": True})
    meta_path.write_text(json.dumps(meta))
    encoded_rows["rows"] = 0
    again = run_task(task, instances, model, tokenizer, SPEC, tmp_path,
                     model_info=dict(info, model="/elsewhere/tiny"))
    assert encoded_rows["rows"] == 0 and again.counts["computed"] == 0
