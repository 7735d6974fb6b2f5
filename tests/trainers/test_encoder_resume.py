"""Interrupts, `--resume`, `max_steps` and `train_fraction` of the encoder trainer
(trainers.encoders.resume, training, pipeline): a run stopped mid-epoch and resumed ends with
the weights and log of a run never stopped; an interrupt after a diverged step saves nothing;
a saved state of other settings is refused; max_steps ends the schedule; a training fraction
keeps the documents a seq2seq run of the same fraction and seed keeps."""
from __future__ import annotations

import json

import pytest
import torch

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from trainers.encoders import heads
from trainers.encoders.heads import build_random_encoder
from trainers.encoders.inputs import fac_inputs
from trainers.encoders.pipeline import fraction_records
from trainers.encoders.spec import encoder_spec
from trainers.encoders.training import train_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FAC = "factuality_classification"


def tiny_model(tokenizer, dropout: float = 0.1):
    from trainers.models.tiny import tiny_roberta_config

    config = tiny_roberta_config(len(tokenizer), tokenizer.pad_token_id, 128, dropout)
    return heads.model_class("PairClassifier")(build_random_encoder(config, 0), seed=0)


@pytest.fixture(scope="module")
def features(data_dir, roberta_tokenizer):
    records = read_jsonl(data_dir / "all" / FAC / "train.jsonl")
    return fac_inputs(records, roberta_tokenizer, 128)  # 14 pairs: 4 steps of 4 per epoch


def spec(**overrides):
    values = {"batch_size": 4, "num_epochs": 3, "learning_rate": 1e-3, "precision": "fp32",
              **overrides}
    return encoder_spec("roberta-large", "FAC", model="tiny", **values)


def interrupt_at_forward(model, call: int, before=None):
    """Raise KeyboardInterrupt (what SIGINT's handler raises) in the model's `call`-th forward;
    `before(n)` runs first on every call."""
    seen = [0]

    def hook(module, args):
        seen[0] += 1
        if before is not None:
            before(seen[0])
        if seen[0] == call:
            raise KeyboardInterrupt

    return model.register_forward_pre_hook(hook)


def state_of(folder):
    return json.loads((folder / "resume" / "state.json").read_text())


def weights(model):
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


@pytest.fixture(scope="module")
def uninterrupted(features, roberta_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    model = tiny_model(roberta_tokenizer)
    train_encoder(spec(), features, model, out, progress=False)
    return weights(model), read_jsonl(out / "train_log.jsonl")


@pytest.mark.parametrize("call, told", [
    (6, "interrupted at epoch 2, step 5: state saved in {}"),     # mid-epoch 2
    (9, "interrupted at epoch 3, step 8: nothing new to save"),   # saved after epoch 2
])
def test_a_run_stopped_and_resumed_ends_as_a_run_never_stopped(
        features, roberta_tokenizer, uninterrupted, tmp_path, capsys, call, told):
    model = tiny_model(roberta_tokenizer)
    handle = interrupt_at_forward(model, call)
    with pytest.raises(KeyboardInterrupt):
        train_encoder(spec(), features, model, tmp_path, progress=False)
    handle.remove()
    done = call - 1
    assert told.format(tmp_path / "resume") in capsys.readouterr().err
    saved = state_of(tmp_path)
    assert (saved["epoch"], saved["steps_done"], saved["global_step"]) == \
        (done // 4, done % 4, done)
    assert len(saved["epoch_losses"]) == done % 4
    resumed = tiny_model(roberta_tokenizer, dropout=0.1)
    train_encoder(spec(), features, resumed, tmp_path, progress=False, resume=True)
    expected_weights, expected_log = uninterrupted
    got = weights(resumed)
    assert all(torch.equal(got[key], expected_weights[key]) for key in got)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert [(line["step"], line["loss"]) for line in log] == \
        [(line["step"], line["loss"]) for line in expected_log]
    assert not (tmp_path / "resume").exists() and (tmp_path / "train_result.json").is_file()


def test_an_interrupt_after_a_diverged_step_keeps_the_last_good_state(
        features, roberta_tokenizer, tmp_path, capsys):
    model = tiny_model(roberta_tokenizer)

    def poison(seen: int) -> None:
        if seen == 6:   # epoch 2, second step: its loss is NaN, and so are the weights after
            with torch.no_grad():
                model.head.bias.fill_(float("nan"))

    interrupt_at_forward(model, 7, poison)
    with pytest.raises(KeyboardInterrupt):
        train_encoder(spec(), features, model, tmp_path, progress=False)
    assert "the loss since the last save is not finite, so the weights are not saved" in \
        capsys.readouterr().err
    saved = state_of(tmp_path)   # the state after epoch 1 stays
    assert (saved["epoch"], saved["steps_done"], saved["global_step"]) == (1, 0, 4)


def test_an_interrupt_before_any_new_step_saves_nothing_new(features, roberta_tokenizer,
                                                           tmp_path, capsys):
    interrupt_at_forward(model := tiny_model(roberta_tokenizer), 1)
    with pytest.raises(KeyboardInterrupt):
        train_encoder(spec(), features, model, tmp_path, progress=False)
    assert "interrupted at epoch 1, step 0: nothing new to save" in capsys.readouterr().err
    assert not (tmp_path / "resume").exists()


@pytest.mark.parametrize("change, budget, needle", [
    ({"learning_rate": 5e-4}, None, "another learning_rate in the spec (0.001, now 0.0005)"),
    ({}, 512, "another tokens per microbatch (16384, now 512)"),
    ({}, None, "another examples (14, now 13)"),
])
def test_a_saved_state_of_other_settings_is_refused(features, roberta_tokenizer, tmp_path,
                                                    change, budget, needle):
    interrupt_at_forward(model := tiny_model(roberta_tokenizer), 3)
    with pytest.raises(KeyboardInterrupt):
        train_encoder(spec(), features, model, tmp_path, progress=False)
    used = features[:-1] if needle.startswith("another examples") else features
    with pytest.raises(SumbenchError, match="is the state of a training with " +
                       needle.replace("(", r"\(").replace(")", r"\)")):
        train_encoder(spec(**change), used, tiny_model(roberta_tokenizer), tmp_path,
                      progress=False, resume=True, tokens_per_microbatch=budget or 16384)
    with pytest.raises(SumbenchError, match="already holds a training run \\(resume\\)"):
        train_encoder(spec(), features, tiny_model(roberta_tokenizer), tmp_path)


def test_max_steps_ends_the_schedule_and_the_run(features, roberta_tokenizer, tmp_path):
    model = tiny_model(roberta_tokenizer)
    train_encoder(spec(max_steps=6), features, model, tmp_path, progress=False)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert [(line["epoch"], line["step"]) for line in log] == [(1, 4), (2, 6)]
    assert log[-1]["lr"] == 0.0   # the linear schedule ends at step 6
    result = json.loads((tmp_path / "train_result.json").read_text())
    assert result["steps"] == 6 and result["epochs"] == 2 and result["best_epoch"] == 2
    assert result["spec"]["max_steps"] == 6
    assert "max_steps" not in spec().to_dict() and "train_fraction" not in spec().to_dict()


@pytest.mark.parametrize("fraction", [0.3, 0.5, 1.0])
def test_a_fraction_keeps_the_documents_a_seq2seq_run_keeps(data_dir, usb_tokenizer, fraction):
    from trainers.finetuning.data import training_texts

    records = read_jsonl(data_dir / "all" / FAC / "train.jsonl")
    kept = fraction_records(records, fraction, seed=3)
    seq2seq = training_texts([FAC], "train", "all", str(data_dir), usb_tokenizer, 512,
                             fraction, seed=3)
    assert {record["id"] for record in kept} == set(seq2seq.document_of)
    documents = {record["id"] for record in records}
    assert len({record["id"] for record in kept}) == max(1, round(fraction * len(documents)))
