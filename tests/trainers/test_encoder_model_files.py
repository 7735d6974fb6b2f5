"""trainers.encoders.model_files and `sumbench export encoders`: a fine-tuned encoder model
saved nested (as training writes it) and exported flat (plain files only, what a leaderboard
evaluates) predicts the same records, for each head; what cannot be exported or loaded is
refused in one line with nothing written (a tiny random RoBERTa, the USB fixture's data)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.encoders.model_files import HEAD_FILE, load_model, save_model
from trainers.encoders.pipeline import predict_task, start_model
from trainers.encoders.spec import encoder_spec

from helpers import files_under, sumbench

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: a task of each head
TASKS = {"FAC": "factuality_classification", "UNSUP": "unsupported_span_prediction",
         "EXT": "extractive_summarization"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_roberta, roberta_tokenizer) -> Path:
    """Untrained task models (seeded heads) saved as `sumbench train` lays them out."""
    folder = tmp_path_factory.mktemp("encoder-runs") / "runs"
    for short, task in TASKS.items():
        spec = encoder_spec("roberta-large", short, model=str(tiny_roberta), seed=3)
        save_model(start_model(spec, str(tiny_roberta)).eval(), folder / task / "best",
                   roberta_tokenizer)
    return folder


def test_an_export_is_flat_and_predicts_exactly_as_the_runs(runs, tmp_path, data_dir, capsys):
    out = tmp_path / "export"
    code, stdout, stderr = sumbench(capsys, "export", "encoders", "--model", runs, "--out", out)
    assert code == 0, stderr
    assert stdout.split() == [str(out / task) for task in
                              ("factuality_classification", "extractive_summarization",
                               "unsupported_span_prediction")]
    for task in TASKS.values():
        folder = out / task
        assert all(path.is_file() for path in folder.iterdir())  # plain files, no sub-folder
        assert {"config.json", "model.safetensors", HEAD_FILE, "tokenizer.json"} <= \
            {path.name for path in folder.iterdir()}
        description = json.loads((folder / HEAD_FILE).read_text())
        assert (description["layout"], description["task"]) == ("flat", task)
        records = read_jsonl(data_dir / "all" / task / "test.jsonl")
        spec = encoder_spec("roberta-large", task)
        assert predict_task(spec, folder, records, device="cpu") == \
            predict_task(spec, runs / task / "best", records, device="cpu")
    # `sumbench predict` takes the export as it takes the runs
    code, stdout, stderr = sumbench(capsys, "predict", "--model", out, "--profile",
                                    "roberta-large", "--tasks", "FAC", "--data", data_dir,
                                    "--out", tmp_path / "predicted", "--device", "cpu")
    assert code == 0, stderr
    written = read_jsonl(tmp_path / "predicted" / "predictions" /
                         "factuality_classification.jsonl")
    assert written == predict_task(encoder_spec("roberta-large", "FAC"),
                                   runs / "factuality_classification" / "best",
                                   read_jsonl(data_dir / "all" / "factuality_classification"
                                              / "test.jsonl"), device="cpu")


def test_the_flat_weights_hold_the_encoder_and_the_head(runs, tmp_path):
    import torch

    nested = load_model(runs / "extractive_summarization" / "best")
    save_model(nested, tmp_path / "flat", layout="flat", task="extractive_summarization")
    flat = load_model(tmp_path / "flat")
    assert type(flat) is type(nested) and flat.options() == nested.options()
    for key, value in nested.state_dict().items():
        assert torch.equal(value, flat.state_dict()[key]), key


def _flat(runs: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "flat"
    save_model(load_model(runs / "factuality_classification" / "best"), folder, layout="flat",
               task="factuality_classification")
    return folder


def _drop_head_weight(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    del weights["head.bias"]
    save_file(weights, str(folder / "model.safetensors"))


def _config_of_t5(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))


def _layout_unknown(folder: Path) -> None:
    description = json.loads((folder / HEAD_FILE).read_text())
    (folder / HEAD_FILE).write_text(json.dumps({**description, "layout": "deep"}))


def _options_unknown(folder: Path) -> None:
    description = json.loads((folder / HEAD_FILE).read_text())
    (folder / HEAD_FILE).write_text(json.dumps({**description, "options": {"depth": 3}}))


@pytest.mark.parametrize("damage, message", [
    (_drop_head_weight, r"model.safetensors does not fit a PairClassifier: missing \['head.b"),
    (_config_of_t5, r"config.json: model_type 't5' is not 'roberta'"),
    (_layout_unknown, r"sumbench_head.json: layout 'deep' is not one of nested, flat"),
    (_options_unknown, r"sumbench_head.json: options do not fit a PairClassifier"),
])
def test_a_damaged_flat_model_is_refused_in_one_line(runs, tmp_path, damage, message):
    folder = _flat(runs, tmp_path)
    damage(folder)
    with pytest.raises(SumbenchError, match=message) as caught:
        load_model(folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("args, message", [
    (["--tasks", "EXT"], "exists: export into a new folder"),
    ([], "is one encoder model: give --tasks"),
    (["--tasks", "EXT", "FAC"], "holds a PairClassifier, but extractive_summarization needs "
                                "a HierarchicalTagger"),
    (["--tasks", "FIX"], "the encoder profiles run FAC, EVEXT, EXT, UNSUP only"),
], ids=["out-exists", "one-model-no-tasks", "head-of-another-task", "seq2seq-task"])
def test_what_cannot_be_exported_is_refused_and_nothing_is_written(runs, tmp_path, capsys,
                                                                   args, message):
    model = runs / "factuality_classification" / "best"
    out = tmp_path / "out"
    if message.startswith("exists"):
        out.mkdir()
        (out / "kept.txt").write_text("mine")
        model = runs
    before = files_under(tmp_path)
    code, _, stderr = sumbench(capsys, "export", "encoders", "--model", model, "--out", out,
                               *args)
    assert code != 0 and message in stderr.strip().splitlines()[-1]  # after load progress
    assert files_under(tmp_path) == before
