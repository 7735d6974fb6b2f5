"""Inference runner: spec, batched generation, real USB tasks end to end (records in the
official shape, scored by tasks.scoring), the CLI and adapter loading."""
from __future__ import annotations

import argparse
import json
import re

import pytest

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, read_jsonl
from trainers.inference.generation import clean_up_spaces, cut_generated
from trainers.inference.label_probs import (
    build_tiny_labeler,
    fit_to_lines,
    official_label_probabilities,
)
from trainers.inference.predict import (
    PredictSpec,
    generate_texts,
    label_probabilities,
    load_model,
    predict_task,
    run_task,
)
from trainers.models.tiny import build_tiny_t5

from helpers import files_under


def test_records(data_dir, task_name: str) -> list[dict]:
    return read_jsonl(data_dir / "all" / task_name / "test.jsonl")


test_records.__test__ = False  # a helper, not a test


@pytest.fixture(scope="module")
def tokenizer(usb_tokenizer):
    return usb_tokenizer


@pytest.fixture(scope="module")
def fac_task():
    return get_task("FAC")


@pytest.fixture(scope="module")
def labeler(tokenizer, fac_task, data_dir):
    sources = [fac_task.format(r)[0].source
               for r in test_records(data_dir, "factuality_classification")]
    return build_tiny_labeler(tokenizer, sources)


@pytest.fixture(scope="module")
def writer(tokenizer):
    """A tiny T5 whose generated text depends on its input (cross-attention amplified)."""
    import torch

    model = build_tiny_t5(tokenizer, seed=3)
    with torch.no_grad():
        for block in model.decoder.block:
            block.layer[1].EncDecAttention.o.weight.mul_(20.0)
    return model


def cpu(**fields) -> PredictSpec:
    return PredictSpec(**{"device": "cpu", "max_new_tokens": 6, "batch_size": 4, **fields})


def without_prediction(record: dict) -> list:
    return [(key, value) for key, value in record.items() if key != "prediction"]


# ---- spec and small pieces ----------------------------------------------------------------
def test_spec_round_trips_through_json():
    spec = PredictSpec(batch_size=3, max_new_tokens=20, num_beams=4, label_rule="positional",
                       window_tokens=None, dtype="bfloat16")
    assert PredictSpec.from_json(spec.to_json()) == spec
    assert PredictSpec().max_new_tokens == 767 and PredictSpec().window_tokens == 1024
    assert "batch_size" not in spec.result_fields() and "device" not in spec.result_fields()


@pytest.mark.parametrize("fields, message", [
    ({"batch_size": 0}, "batch_size"), ({"num_beams": 1.5}, "num_beams"),
    ({"label_rule": "first"}, "label_rule"), ({"dtype": "int8"}, "dtype"),
    ({"batch": 4}, r"unknown PredictSpec field\(s\): batch")])
def test_spec_rejects_bad_values(fields, message):
    with pytest.raises(SumbenchError, match=message):
        PredictSpec.from_dict(fields)


def test_generated_ids_are_cut_at_the_first_eos():
    assert cut_generated([0, 5, 6, 1, 7, 0], {1}) == (5, 6)
    assert cut_generated([0, 5, 6], {1}) == (5, 6)
    assert cut_generated([0, 1, 0, 0], {1}) == ()


def test_space_clean_up_is_the_transformers_4_one():
    assert clean_up_spaces("review[] of it[/] . Is it ? yes , it is n't") == \
        "review[] of it[/]. Is it? yes, it isn't"


def test_texts_do_not_depend_on_batch_size(writer, tokenizer, data_dir):
    sources = [get_task("COMP").format(r)[0].source
               for r in test_records(data_dir, "multisentence_compression")][:8]
    one = generate_texts(writer, tokenizer, sources, cpu(batch_size=1, max_new_tokens=4))
    four = generate_texts(writer, tokenizer, sources, cpu(batch_size=4, max_new_tokens=4))
    assert one == four
    assert len(set(one)) > 3  # outputs depend on the input


# ---- real tasks ---------------------------------------------------------------------------
def test_fac_records_have_the_official_shape_and_score(labeler, tokenizer, fac_task, data_dir,
                                                       usb_fixture_dir, tmp_path):
    from sklearn.metrics import roc_auc_score

    from tasks.scoring import score_files

    records = test_records(data_dir, "factuality_classification")
    spec = cpu()
    predicted = predict_task(fac_task, fac_task.instances(records), labeler, tokenizer, spec,
                             out_dir=tmp_path)
    official = read_jsonl(usb_fixture_dir / "predictions" / "factuality_classification.jsonl")
    assert [without_prediction(r) for r in predicted] == [without_prediction(r) for r in official]
    sources = [fac_task.format(r)[0].source for r in records]
    assert [r["prediction"] for r in predicted] == \
        label_probabilities(labeler, tokenizer, sources, spec)
    assert read_jsonl(tmp_path / "predictions" / "factuality_classification.jsonl") == predicted
    scores = score_files([tmp_path / "predictions" / "factuality_classification.jsonl"])
    expected_auc = roc_auc_score([r["label"] for r in records],
                                 [1 - r["prediction"][0] for r in predicted])
    assert scores["factuality_classification"]["auc"] == pytest.approx(expected_auc, abs=1e-12)
    outputs = read_jsonl(tmp_path / "outputs" / "factuality_classification.jsonl")
    assert [o["instance"] for o in outputs] == list(range(len(records)))
    assert all(o["text"] in (" Yes", " No") and o["label_steps"] == [0] for o in outputs)
    meta = read_json(tmp_path / "outputs" / "factuality_classification.meta.json")
    assert meta["task"] == "factuality_classification" and meta["counts"]["missing_labels"] == 0


def test_ext_windows_are_stitched_per_article(labeler, tokenizer, data_dir):
    task = get_task("EXT")
    instances = task.instances(test_records(data_dir, "extractive_summarization"))
    spec = cpu(window_tokens=80, max_new_tokens=3)
    run = run_task(task, instances, labeler, tokenizer, spec)
    assert len(run.outputs) > len(instances)  # some articles need several windows
    for instance, record in zip(instances, run.records):
        assert len(record["prediction"]) == len(instance["input_lines"])
    first_windows = [o for o in run.outputs if o["instance"] == 0]
    expected = []
    for output, model_input in zip(first_windows, task.format(instances[0], tokenizer, 80)):
        values = official_label_probabilities(labeler, tokenizer, model_input.source, spec)
        expected.extend(fit_to_lines(values, [None] * len(values), len(output["probabilities"]))
                        .values)
    assert run.records[0]["prediction"] == pytest.approx(expected, abs=1e-6)
    positional = run_task(task, instances, labeler, tokenizer, cpu(window_tokens=80,
                                                                   label_rule="positional"))
    # the labeler never writes SENT markers: every line lacks its label position
    assert positional.counts["missing_labels"] == sum(len(i["input_lines"]) for i in instances)
    assert all(value == 0.0 for r in positional.records for value in r["prediction"])


def test_span_task_keeps_the_generated_text(writer, tokenizer, data_dir, usb_fixture_dir):
    task = get_task("UNSUP")
    records = test_records(data_dir, "unsupported_span_prediction")
    predicted = predict_task(task, task.instances(records), writer, tokenizer, cpu())
    texts = generate_texts(writer, tokenizer, [task.format(r)[0].source for r in records], cpu())
    assert [r["prediction"] for r in predicted] == [task.parse(t, r)
                                                    for t, r in zip(texts, records)]
    official = read_jsonl(usb_fixture_dir / "predictions" / "unsupported_span_prediction.jsonl")
    assert [without_prediction(r) for r in predicted] == [without_prediction(r) for r in official]


@pytest.mark.slow
def test_cli_predicts_tasks_of_every_kind_and_the_files_score(labeler, tokenizer, data_dir,
                                                              tmp_path, monkeypatch):
    from benchmark.commands import predict as command
    from tasks.scoring import score_files
    from trainers.inference import prediction_io

    hashed, weights_digest = [], prediction_io.weights_digest
    monkeypatch.setattr(prediction_io, "weights_digest",
                        lambda model: hashed.append(1) or weights_digest(model))

    model_dir = tmp_path / "model"
    labeler.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    out = tmp_path / "run"
    args = parser.parse_args(["predict", "--model", str(model_dir),
                              "--tasks", "FAC,EVEXT", "UNSUP", "abstractive_summarization",
                              "--data", str(data_dir), "--out", str(out), "--limit", "4",
                              "--max-new-tokens", "3", "--device", "cpu", "--window-tokens",
                              "200"])
    assert args.handler(args) == 0
    assert len(hashed) == 1  # the weights are hashed once for the four tasks
    files = sorted((out / "predictions").glob("*.jsonl"))
    assert [f.stem for f in files] == sorted(get_task(n).name for n in
                                             ("ABS", "EVEXT", "FAC", "UNSUP"))
    scores = score_files(files)
    assert set(scores) == {f.stem for f in files}
    for name in scores:
        task = get_task(name)
        assert scores[name]["n_records"] == \
            len(task.instances(test_records(data_dir, name))[:4])
    config = json.loads((out / "predict_config.json").read_text())
    assert config["config"]["spec"]["max_new_tokens"] == 3
    assert not list((out / "outputs").glob("*.partial.*"))


@pytest.mark.slow
def test_a_predict_folder_holds_one_models_predictions(labeler, writer, tokenizer, data_dir,
                                                       tmp_path, capsys, monkeypatch):
    """Other tasks of the same model add to the folder and its predict_config.json; another
    model or an output-changing spec is refused before anything is written; the config is
    written before the first prediction, so an interrupted run has its provenance."""
    import benchmark.commands.predict
    from benchmark.cli import main

    models = {}
    for name, model in (("labeler", labeler), ("writer", writer)):
        models[name] = tmp_path / name
        model.save_pretrained(models[name])
        tokenizer.save_pretrained(models[name])
    out = tmp_path / "run"

    def predict(model: str, *options: str) -> int:
        return main(["predict", "--model", str(models[model]), "--data", str(data_dir),
                     "--out", str(out), "--limit", "2", "--max-new-tokens", "3",
                     "--device", "cpu", *options])

    assert predict("labeler", "--tasks", "FAC") == 0
    assert predict("labeler", "--tasks", "COMP") == 0
    config = json.loads((out / "predict_config.json").read_text())
    names = ["factuality_classification", "multisentence_compression"]
    assert config["config"]["tasks"] == names and config["finished"] is True
    assert list(config["counts"]) == names and len(config["earlier_runs"]) == 1
    before = {path.name: path.read_bytes() for path in (out / "predictions").iterdir()}
    capsys.readouterr()
    assert predict("writer", "--tasks", "ABS") == 2
    assert "holds predictions of another run (predict_config.json differs in: " \
           "model_fingerprint)" in capsys.readouterr().err
    assert predict("labeler", "--tasks", "FAC", "--num-beams", "2") == 2
    assert "differs in: spec.num_beams" in capsys.readouterr().err
    assert predict("labeler", "--tasks", "FAC", "--batch-size", "1") == 0  # changes nothing
    assert {path.name: path.read_bytes() for path in (out / "predictions").iterdir()} == before
    older = json.loads((out / "predict_config.json").read_text())
    del older["config"]["model_fingerprint"]  # as an earlier sumbench wrote it
    (out / "predict_config.json").write_text(json.dumps(older))
    assert predict("labeler", "--tasks", "FAC") == 2
    assert "differs in: model_fingerprint) (it was written by an earlier sumbench, which did " \
           "not record the model by content)" in capsys.readouterr().err

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(benchmark.commands.predict, "run_task", interrupted)
    fresh = out = tmp_path / "fresh"
    assert predict("writer", "--tasks", "ABS") == 130
    config = json.loads((fresh / "predict_config.json").read_text())
    assert config["finished"] is False and config["counts"] == {}
    assert config["provenance"]["config"]["model"]["model"] == str(models["writer"].resolve())


def test_a_predict_folder_moved_with_its_model_is_reused(labeler, tokenizer, data_dir,
                                                        tmp_path):
    """The folder identity and the runs' fingerprints name the model by content: after moving
    model and predictions elsewhere, predicting again computes nothing and changes no file."""
    import shutil
    from pathlib import Path

    from benchmark.cli import main

    first = tmp_path / "first"
    labeler.save_pretrained(first / "model")
    tokenizer.save_pretrained(first / "model")

    def predict(root: Path) -> dict:
        assert main(["predict", "--model", str(root / "model"), "--data", str(data_dir),
                     "--out", str(root / "out"), "--limit", "3", "--max-new-tokens", "3",
                     "--device", "cpu", "--tasks", "FAC"]) == 0
        return json.loads((root / "out" / "predict_config.json").read_text())

    assert predict(first)["counts"]["factuality_classification"]["computed"] == 3
    before = files_under(first / "out" / "predictions")
    moved = Path(shutil.move(first, tmp_path / "moved"))
    config = predict(moved)
    assert config["counts"]["factuality_classification"]["computed"] == 0
    assert config["config"]["model"]["model"] == str((moved / "model").resolve())
    assert files_under(moved / "out" / "predictions") == before


def test_load_model_merges_a_peft_adapter(tokenizer, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    base_dir, adapter_dir = tmp_path / "base", tmp_path / "adapter"
    from transformers import AutoModelForSeq2SeqLM

    build_tiny_t5(tokenizer, save_dir=base_dir, seed=1)
    base = AutoModelForSeq2SeqLM.from_pretrained(base_dir)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q", "v"], init_lora_weights=False,
                        task_type="SEQ_2_SEQ_LM")
    adapted = get_peft_model(base, config)
    adapted.save_pretrained(adapter_dir)
    model, loaded_tokenizer, info = load_model(str(adapter_dir))
    assert info["adapter"] == str(adapter_dir.resolve()) and info["model"] == str(base_dir)
    batch = tokenizer(["Port Alden opened a second branch."], return_tensors="pt")
    start = torch.zeros((1, 1), dtype=torch.long)
    adapted.eval()
    with torch.no_grad():
        expected = adapted(**batch, decoder_input_ids=start).logits
        got = model(**batch, decoder_input_ids=start).logits
        with adapted.disable_adapter():
            plain = adapted(**batch, decoder_input_ids=start).logits
    assert torch.allclose(expected, got, rtol=1e-4, atol=1e-4)  # merging rounds differently
    assert (plain - got).abs().max() > 0.1  # and the adapter did change the model
    assert loaded_tokenizer("Yes")["input_ids"] == tokenizer("Yes")["input_ids"]


def test_load_model_names_a_missing_model(tmp_path):
    with pytest.raises(SumbenchError, match=f"model path {tmp_path}/nowhere does not exist"):
        load_model(str(tmp_path / "nowhere"))
    with pytest.raises(SumbenchError, match="cannot load model owner/not-cached"):
        load_model("owner/not-cached")  # a hub id, offline and not in the cache


def test_windows_never_exceed_the_input_budget(labeler, tokenizer, data_dir):
    from trainers.inference.generation import encode_sources
    from trainers.inference.predict import format_windows

    assert PredictSpec().window_budget == 1024
    assert PredictSpec(window_tokens=None, max_input_tokens=300).window_budget == 300
    assert PredictSpec(window_tokens=80, max_input_tokens=300).window_budget == 80
    task = get_task("EXT")
    instances = task.instances(test_records(data_dir, "extractive_summarization"))
    spec = cpu(max_input_tokens=256, max_new_tokens=3)          # window_tokens stays 1024
    assert spec.window_budget == 256
    windows = format_windows(task, instances, tokenizer, spec)
    assert len(windows) > len(instances)                        # the articles need several
    encoded = encode_sources(tokenizer, [w.model_input.source for w in windows], 256)
    assert not any(e.truncated for e in encoded)                # no window loses SENT markers
    for window, row in zip(windows, encoded):
        last = window.n_lines - 1
        assert f"SENT{last}" in tokenizer.decode(row.input_ids).replace(" ", "")
    run = run_task(task, instances, labeler, tokenizer, spec)
    assert run.counts["truncated_inputs"] == 0 and run.counts["windows"] == len(windows)


@pytest.mark.parametrize("content, message", [
    ('{"batch_size": 0}', r"spec\.json, field 'batch_size': PredictSpec\.batch_size must be"),
    ('{"batchsize": 4}', r"spec\.json, field 'batchsize': unknown PredictSpec field\(s\)"),
    ('{"dtype": "int8"}', r"spec\.json, field 'dtype': PredictSpec\.dtype must be one of"),
    ('[1, 2]', r"spec\.json: expected a JSON object"),
    ('{"batch_size": ', r"spec\.json:1: malformed JSON"),
])
def test_cli_spec_file_errors_name_the_file_and_field(tmp_path, capsys, content, message):
    from helpers import sumbench

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(content)
    code, _, err = sumbench(capsys, "predict", "--model", tmp_path / "no-model", "--tasks",
                            "FAC", "--out", tmp_path / "out", "--spec", spec_file)
    assert code == 2
    assert re.search(message, err) and str(spec_file) in err
    assert not (tmp_path / "out").exists()
