"""trainers.encoders.pipeline: what a --model is (read from its files, no weights loaded), the
model a task starts from (its head, seed and the spec's dropout), and a trained folder found
and read back, on a tiny random RoBERTa saved as published (RobertaForMaskedLM)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.plumbing.errors import SumbenchError
from trainers.encoders.model_files import save_model
from trainers.encoders.pipeline import (
    check_profile_fits,
    checkpoint_kind,
    predict_task,
    start_model,
    train_task,
    trained_folder,
    trained_spec,
)
from trainers.encoders.spec import encoder_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def roberta(tmp_path_factory, roberta_tokenizer) -> Path:
    import torch
    from transformers import RobertaForMaskedLM

    from trainers.models.tiny import tiny_roberta_config

    folder = tmp_path_factory.mktemp("pipeline") / "roberta"
    config = tiny_roberta_config(len(roberta_tokenizer), roberta_tokenizer.pad_token_id, 128)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        RobertaForMaskedLM(config).save_pretrained(str(folder))
    roberta_tokenizer.save_pretrained(str(folder))
    return folder


def test_a_models_kind_comes_from_its_files(roberta, tmp_path, roberta_tokenizer):
    assert checkpoint_kind(str(roberta)) == "roberta"
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert checkpoint_kind(str(tmp_path / "t5")) == "t5"
    assert checkpoint_kind("google/flan-t5-large", hub=False) is None  # nothing fetched
    model = start_model(encoder_spec("roberta-large", "FAC", model=str(roberta)), str(roberta))
    save_model(model, tmp_path / "runs" / "factuality_classification" / "best",
               roberta_tokenizer)
    assert checkpoint_kind(str(tmp_path / "runs" / "factuality_classification" / "best")) == \
        "encoder-model"
    assert checkpoint_kind(str(tmp_path / "runs")) == "encoder-runs"
    assert trained_folder(str(tmp_path / "runs"), "factuality_classification") == \
        tmp_path / "runs" / "factuality_classification" / "best"
    assert trained_spec(tmp_path / "runs" / "factuality_classification" / "best") is None
    with pytest.raises(SumbenchError, match="is a t5 model, but --profile roberta-large"):
        check_profile_fits(str(tmp_path / "t5"), "roberta-large")
    with pytest.raises(SumbenchError, match="folder of sumbench encoder models, but --prof"):
        check_profile_fits(str(tmp_path / "runs"), "flan-t5-large")
    with pytest.raises(SumbenchError, match="no fine-tuned encoder model for evidence_extr"):
        trained_folder(str(tmp_path / "runs"), "evidence_extraction")


@pytest.mark.parametrize("task, kind", [("FAC", "PairClassifier"), ("EVEXT", "PairClassifier"),
                                        ("UNSUP", "TokenTagger"),
                                        ("EXT", "HierarchicalTagger")])
def test_each_task_starts_from_its_head_seeded_by_the_spec(roberta, task, kind):
    spec = encoder_spec("roberta-large", task, model=str(roberta), seed=5)
    first, second = start_model(spec, str(roberta)), start_model(spec, str(roberta))
    assert first.kind == kind and first.training
    assert all(value.equal(second.state_dict()[key])
               for key, value in first.state_dict().items())
    other = start_model(encoder_spec("roberta-large", task, model=str(roberta), seed=6),
                        str(roberta))
    assert not other.head.weight.equal(first.head.weight)
    assert first.encoder.config.hidden_dropout_prob == 0.1  # the checkpoint's


def test_the_specs_dropout_replaces_the_checkpoints_and_ext_pools_as_the_spec_says(roberta):
    from torch import nn

    spec = encoder_spec("roberta-large", "EXT", model=str(roberta), dropout=0.3,
                        sentence_pooling="cls")
    model = start_model(spec, str(roberta))
    rates = {module.p for module in model.encoder.modules() if isinstance(module, nn.Dropout)}
    assert rates == {0.3} and model.pooling == "cls"
    assert model.encoder.config.attention_probs_dropout_prob == 0.3


def test_a_saved_model_of_another_tasks_head_is_refused(roberta, tmp_path, roberta_tokenizer):
    spec = encoder_spec("roberta-large", "UNSUP", model=str(roberta))
    save_model(start_model(spec, str(roberta)), tmp_path / "unsup", roberta_tokenizer)
    again = start_model(spec, str(tmp_path / "unsup"))  # fine-tuned further
    assert again.kind == "TokenTagger"
    with pytest.raises(SumbenchError, match="holds a TokenTagger, but factuality_class"):
        start_model(encoder_spec("roberta-large", "FAC"), str(tmp_path / "unsup"))


def test_ext_windows_train_and_predict_every_line(roberta, data_dir, tmp_path):
    from tasks.plumbing.io import read_jsonl
    from tasks.scoring import score_records

    ext = "extractive_summarization"
    train = read_jsonl(data_dir / "all" / ext / "train.jsonl")
    test = read_jsonl(data_dir / "all" / ext / "test.jsonl")
    spec = encoder_spec("roberta-large", "EXT", model=str(roberta), max_sentences=5,
                        long_articles="windows", num_epochs=1, batch_size=4,
                        precision="fp32")
    best = train_task(spec, str(roberta), train, None, tmp_path, device="cpu", progress=False)
    built = predict_task(spec, best, test, device="cpu")
    assert [len(record["prediction"]) for record in built] == \
        [len(record["input_lines"]) for record in test]
    assert score_records({ext: built})[ext]["length_mismatches"] == 0
    truncated = predict_task(encoder_spec("roberta-large", "EXT", max_sentences=5,
                                          precision="fp32"), best, test, device="cpu")
    assert all(len(record["prediction"]) == 5 for record in truncated)
    # the first window of each article is the truncated article: the same probabilities
    assert [record["prediction"] for record in truncated] == \
        [record["prediction"][:5] for record in built]


def test_long_articles_is_an_ext_setting(roberta):
    from benchmark.encoder_run import task_specs

    specs = task_specs("roberta-large", ["FAC", "EXT"], str(roberta), 0,
                       [("long_articles", "windows")])
    assert specs["extractive_summarization"].long_articles == "windows"
    assert "long_articles" not in specs["factuality_classification"].to_dict()
    with pytest.raises(SumbenchError, match="long_articles is an EXT setting, and --tasks has "
                                            "no EXT"):
        task_specs("roberta-large", ["FAC"], str(roberta), 0, [("long_articles", "windows")])
    with pytest.raises(SumbenchError, match="long_articles=windows is an EXT setting"):
        encoder_spec("roberta-large", "FAC", long_articles="windows")
    with pytest.raises(SumbenchError, match="unknown long_articles 'stitch'"):
        encoder_spec("roberta-large", "EXT", long_articles="stitch")


#: the gold fields of each encoder task's records (what a board's public inputs withhold)
GOLD_FIELDS = {"FAC": "label", "EVEXT": "evidence_labels", "EXT": "labels",
               "UNSUP": "annotated_summary"}


@pytest.mark.parametrize("task", sorted(GOLD_FIELDS))
def test_prediction_reads_no_gold_field(roberta, roberta_tokenizer, data_dir, tmp_path, task):
    """Records without their gold fields (a board's public inputs) predict exactly as with
    them; training still requires them."""
    from tasks.plumbing.io import read_jsonl

    spec = encoder_spec("roberta-large", task, model=str(roberta), max_input_tokens=128)
    save_model(start_model(spec, str(roberta)).eval(), tmp_path / "model", roberta_tokenizer)
    records = read_jsonl(data_dir / "all" / spec.task / "test.jsonl")[:4]
    public = [{key: value for key, value in record.items() if key != GOLD_FIELDS[task]}
              for record in records]
    predicted = [predict_task(spec, tmp_path / "model", given, device="cpu")
                 for given in (public, records)]
    assert [[(r["id"], r["prediction"]) for r in made] for made in predicted] == \
        [[(r["id"], r["prediction"]) for r in predicted[1]]] * 2
    assert len(predicted[1]) >= 3
    with pytest.raises(SumbenchError, match=f"field '{GOLD_FIELDS[task]}'"):
        train_task(spec, str(roberta), public, None, tmp_path / "train", device="cpu",
                   progress=False)
