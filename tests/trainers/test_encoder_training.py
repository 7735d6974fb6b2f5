"""Encoder fine-tuning and prediction (trainers.encoders.batches, trainers.encoders.training) on
a tiny random RoBERTa and the USB fixture's FAC, EVEXT, EXT and UNSUP records: seeded steps cut
into micro-batches that do not change the loss, the best epoch kept, probabilities in input
order whatever the batch size, and predictions scored by the official scorer."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_json, read_jsonl
from tasks.scoring import score_records
from tests.trainers.test_encoder_inputs import fixture_records
from trainers.encoders import heads
from trainers.encoders.batches import (
    collate,
    counted_positions,
    cut_step,
    epoch_plan,
    epoch_steps,
    feature_sizes,
    padded_size,
)
from trainers.encoders.heads import build_random_encoder
from trainers.encoders.inputs import (
    IGNORED,
    ArticleInput,
    PairInput,
    evext_inputs,
    ext_inputs,
    fac_inputs,
    unsup_inputs,
)
from trainers.encoders.model_files import load_model
from trainers.encoders.prediction import predict_probabilities
from trainers.encoders.records import evext_records, ext_records, fac_records, unsup_records
from trainers.encoders.spec import EncoderSpec, encoder_spec
from trainers.encoders.training import accumulate_step, train_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FAC, EVEXT = "factuality_classification", "evidence_extraction"
MAX_TOKENS = 128


def tiny_model(tokenizer, kind: str = "PairClassifier", dropout: float = 0.0, seed: int = 0):
    from trainers.models.tiny import tiny_roberta_config

    config = tiny_roberta_config(len(tokenizer), tokenizer.pad_token_id, MAX_TOKENS, dropout)
    options = {"lstm_size": 8} if kind == "HierarchicalTagger" else {}
    return heads.model_class(kind)(build_random_encoder(config, seed), seed=seed, **options)


def fac_split(data_dir, tokenizer, split: str = "train"):
    records = read_jsonl(data_dir / "all" / FAC / f"{split}.jsonl")
    return records, fac_inputs(records, tokenizer, MAX_TOKENS)


def tiny_spec(task: str = "FAC", **overrides) -> EncoderSpec:
    values = {"batch_size": 4, "num_epochs": 3, "learning_rate": 1e-3, "precision": "fp32",
              **overrides}
    return encoder_spec("roberta-large", task, model="tiny", **values)


def weights(model) -> dict:
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


# ---- batches ------------------------------------------------------------------------------
def test_epoch_steps_are_seeded_by_seed_and_epoch_and_hold_every_example_once():
    steps = epoch_steps(np.arange(10), 4, seed=3, epoch=1)
    assert [len(step) for step in steps] == [4, 4, 2]
    assert sorted(np.concatenate(steps).tolist()) == list(range(10))
    again = epoch_steps(np.arange(10), 4, seed=3, epoch=1)
    assert all(np.array_equal(a, b) for a, b in zip(steps, again))
    assert np.concatenate(epoch_steps(np.arange(10), 4, 3, 2)).tolist() != \
        np.concatenate(steps).tolist()


def test_a_step_is_cut_by_padded_tokens_longest_first():
    features = [PairInput([0] + [5] * (length - 2) + [2], 0) for length in (10, 30, 20, 30)]
    longest, rows = feature_sizes(features)
    pieces = cut_step(np.arange(4), longest, rows, budget=60)
    assert [piece.tolist() for piece in pieces] == [[1, 3], [2, 0]]
    assert all(padded_size(features, piece) <= 60 for piece in pieces)
    assert [p.tolist() for p in cut_step(np.arange(4), longest, rows, 10)] == [[1], [3], [2], [0]]
    assert [p.tolist() for p in cut_step(np.arange(4), longest, rows, None)] == [[1, 3, 2, 0]]


def test_collate_pads_with_the_tokenizers_id_and_masks_labels(roberta_tokenizer, data_dir):
    records, features = fac_split(data_dir, roberta_tokenizer)
    batch = collate(features, [2, 1], roberta_tokenizer.pad_token_id)
    assert batch["input_ids"].shape == (2, len(features[1].input_ids))
    assert batch["input_ids"][0, len(features[2].input_ids):].eq(1).all()
    assert batch["attention_mask"].sum(1).tolist() == [len(features[2].input_ids),
                                                       len(features[1].input_ids)]
    assert batch["labels"].tolist() == [features[2].label, features[1].label]
    unsup = unsup_inputs(fixture_records(data_dir, "unsupported_span_prediction")[:2],
                         roberta_tokenizer, MAX_TOKENS)
    batch = collate(unsup, [0, 1], 1)
    short = min(range(2), key=lambda i: len(unsup[i].input_ids))
    assert batch["labels"][short, len(unsup[short].input_ids):].eq(IGNORED).all()
    assert counted_positions(unsup, [0, 1]) == int(batch["labels"].ne(IGNORED).sum())


def test_articles_collate_to_documents_sentences_tokens(roberta_tokenizer, data_dir):
    articles = ext_inputs(fixture_records(data_dir, "extractive_summarization")[:3],
                          roberta_tokenizer, max_sentences=5, max_sentence_tokens=16)
    batch = collate(articles, [0, 1, 2], 1)
    sentences = max(len(a.sentence_ids) for a in articles)
    width = max(len(s) for a in articles for s in a.sentence_ids)
    assert batch["input_ids"].shape == (3, sentences, width)
    assert batch["sentence_mask"].sum(1).tolist() == [len(a.sentence_ids) for a in articles]
    assert batch["labels"][~batch["sentence_mask"]].eq(IGNORED).all()
    assert counted_positions(articles, [0, 1, 2]) == int(batch["sentence_mask"].sum())
    empty = ArticleInput([], [], 0)  # an article without lines: nothing to train on
    plan = epoch_plan([empty, *articles], 2, seed=0, epoch=0, budget=None)
    assert sorted(np.concatenate([np.concatenate(step) for step in plan]).tolist()) == [1, 2, 3]


# ---- training -----------------------------------------------------------------------------
def test_the_loss_falls_over_epochs(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer)
    best = train_encoder(tiny_spec(num_epochs=12, learning_rate=3e-3), features, model,
                         tmp_path, progress=False)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert [line["epoch"] for line in log] == list(range(1, 13))
    assert [line["step"] for line in log] == list(range(4, 49, 4))  # 14 examples, batch 4
    assert log[0]["loss"] == pytest.approx(math.log(2), rel=0.02)
    assert log[-1]["loss"] < 0.75 * log[0]["loss"]
    assert log[-1]["lr"] == 0.0  # linear decay to 0, no warmup
    assert best == tmp_path / "best" and (best / "sumbench_head.json").is_file()


def test_the_same_seed_gives_the_same_weights(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    trained, state = [], torch.get_rng_state()
    for run, seed in enumerate((1, 1, 2)):
        model = tiny_model(roberta_tokenizer, dropout=0.1)
        train_encoder(tiny_spec(num_epochs=2, seed=seed), features, model, tmp_path / str(run),
                      progress=False)
        trained.append(weights(model))
    assert all(torch.equal(trained[0][key], trained[1][key]) for key in trained[0])
    assert not all(torch.equal(trained[0][key], trained[2][key]) for key in trained[0])
    assert torch.equal(torch.get_rng_state(), state)  # the caller's random state untouched


def test_the_micro_batch_cut_does_not_change_a_steps_loss(roberta_tokenizer, data_dir):
    _, features = fac_split(data_dir, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer).train()
    losses, grads = {}, {}
    for budget in (None, 300, 1):
        plan = epoch_plan(features, 8, seed=0, epoch=0, budget=budget)
        assert [sorted(np.concatenate(step).tolist()) for step in plan] == \
            [sorted(np.concatenate(step).tolist()) for step in epoch_plan(features, 8, 0, 0, None)]
        model.zero_grad()
        losses[budget] = accumulate_step(model, features, plan[0], pad_id=1).item()
        grads[budget] = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert len(epoch_plan(features, 8, 0, 0, 1)[0]) == 8
    assert len(epoch_plan(features, 8, 0, 0, 300)[0]) > 1
    for budget in (300, 1):
        assert losses[budget] == pytest.approx(losses[None], rel=1e-5)
        assert torch.allclose(grads[budget], grads[None], rtol=1e-4, atol=1e-7)
    by_hand = np.mean([-math.log(0.5)] * 8)  # the head's bias 0, weights ~0.02: close to ln 2
    assert losses[None] == pytest.approx(by_hand, rel=0.05)


def test_runs_cut_otherwise_train_the_same_model(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    runs = {}
    for budget in (None, 200):
        model = tiny_model(roberta_tokenizer)
        train_encoder(tiny_spec(num_epochs=2), features, model, tmp_path / str(budget),
                      tokens_per_microbatch=budget, progress=False)
        runs[budget] = (weights(model), read_jsonl(tmp_path / str(budget) / "train_log.jsonl"))
    (whole, whole_log), (cut, cut_log) = runs[None], runs[200]
    assert [line["loss"] for line in cut_log] == pytest.approx(
        [line["loss"] for line in whole_log], rel=1e-5)
    assert all(torch.allclose(cut[key], whole[key], atol=1e-5) for key in whole)


def test_the_best_epoch_is_kept(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer)
    metrics, snapshots = iter([0.2, 0.9, float("nan"), 0.5]), []

    def evaluate(current):
        snapshots.append(weights(current))
        return next(metrics)

    best = train_encoder(tiny_spec(num_epochs=4), features, model, tmp_path, evaluate=evaluate,
                         progress=False, tokenizer=roberta_tokenizer)
    result = read_json(tmp_path / "train_result.json")
    assert (result["best_epoch"], result["best_metric"]) == (2, 0.9)
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert [line["best"] for line in log] == [True, True, False, False]
    assert [line["auc"] for line in log] == [0.2, 0.9, None, 0.5]
    kept = load_model(best).state_dict()
    assert all(torch.equal(kept[key], snapshots[1][key]) for key in kept)
    assert not torch.equal(kept["head.weight"], snapshots[3]["head.weight"])
    assert (best / "encoder" / "tokenizer.json").is_file()


def test_without_a_finite_metric_the_last_epoch_is_kept(roberta_tokenizer, data_dir,
                                                         tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    train_encoder(tiny_spec(num_epochs=2), features, tiny_model(roberta_tokenizer), tmp_path,
                  evaluate=lambda model: float("nan"), progress=False)
    result = read_json(tmp_path / "train_result.json")
    assert (result["best_epoch"], result["best_metric"]) == (2, None)
    assert [line["best"] for line in read_jsonl(tmp_path / "train_log.jsonl")] == [False, True]
    assert (tmp_path / "best" / "head.safetensors").is_file()


def test_train_result_holds_the_spec_and_provenance(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    spec = tiny_spec(num_epochs=2, seed=5)
    train_encoder(spec, features, tiny_model(roberta_tokenizer), tmp_path, progress=False,
                  tokens_per_microbatch=256)
    result = read_json(tmp_path / "train_result.json")
    assert EncoderSpec.from_dict(result["spec"]) == spec
    assert (result["epochs"], result["steps"], result["best_epoch"]) == (2, 8, 2)
    assert result["best_metric"] is None and result["selection_metric"] == "auc"
    record = result["provenance"]
    assert record["seeds"] == {"seed": 5} and "git" in record and "packages" in record
    assert record["config"]["tokens_per_microbatch"] == 256
    assert record["config"]["model"] == "PairClassifier"
    log = read_jsonl(tmp_path / "train_log.jsonl")
    assert [line["best"] for line in log] == [False, True]  # no evaluate: the last epoch


def test_a_non_finite_loss_stops_before_saving(roberta_tokenizer, data_dir, tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer)
    with torch.no_grad():
        model.head.bias.fill_(float("nan"))
    with pytest.raises(SumbenchError, match=r"diverged in epoch 1 \(by step 4\): the loss is nan"):
        train_encoder(tiny_spec(), features, model, tmp_path, progress=False)
    assert not (tmp_path / "best").exists() and not (tmp_path / "train_result.json").exists()


def test_inputs_of_another_task_and_a_used_folder_are_refused(roberta_tokenizer, data_dir,
                                                               tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    tagger = tiny_model(roberta_tokenizer, "TokenTagger")
    with pytest.raises(SumbenchError, match="factuality_classification trains a PairClassifier "
                                            "on pair inputs, got a TokenTagger and pair"):
        train_encoder(tiny_spec(), features, tagger, tmp_path, progress=False)
    with pytest.raises(SumbenchError, match="unsupported_span_prediction trains a TokenTagger "
                                            "on token inputs, got a TokenTagger and pair"):
        train_encoder(tiny_spec("UNSUP"), features, tagger, tmp_path, progress=False)
    with pytest.raises(SumbenchError, match="no training examples with a label"):
        train_encoder(tiny_spec("EXT"), [ArticleInput([], [], 0)],
                      tiny_model(roberta_tokenizer, "HierarchicalTagger"), tmp_path)
    (tmp_path / "train_result.json").write_text("{}")
    with pytest.raises(SumbenchError, match="already holds a training run"):
        train_encoder(tiny_spec(), features, tiny_model(roberta_tokenizer), tmp_path)


def test_a_tokenizer_padding_otherwise_than_the_encoder_is_refused(roberta_tokenizer, data_dir,
                                                                    tmp_path):
    _, features = fac_split(data_dir, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer)
    model.encoder.config.pad_token_id = 0
    with pytest.raises(SumbenchError, match="pads with id 1 but the encoder's config has "
                                            "pad_token_id 0"):
        train_encoder(tiny_spec(), features, model, tmp_path, progress=False,
                      tokenizer=roberta_tokenizer)


# ---- prediction ---------------------------------------------------------------------------
@pytest.mark.parametrize("task, kind", [
    ("factuality_classification", "PairClassifier"),
    ("unsupported_span_prediction", "TokenTagger"),
    ("extractive_summarization", "HierarchicalTagger")])
def test_probabilities_do_not_depend_on_the_batch_size(roberta_tokenizer, data_dir, task, kind):
    records = fixture_records(data_dir, task)
    build = {"factuality_classification": fac_inputs, "unsupported_span_prediction":
             unsup_inputs}.get(task)
    features = build(records, roberta_tokenizer, MAX_TOKENS) if build else \
        ext_inputs(records, roberta_tokenizer, max_sentences=16, max_sentence_tokens=32)
    model = tiny_model(roberta_tokenizer, kind, dropout=0.1)
    alone = predict_probabilities(model, features, roberta_tokenizer, batch_size=1)
    assert not model.training
    if kind == "PairClassifier":
        assert all(isinstance(p, float) and 0 < p < 1 for p in alone)
    else:
        widths = [len(f.input_ids) if kind == "TokenTagger" else len(f.sentence_ids)
                  for f in features]
        assert [len(row) for row in alone] == widths
    flat = np.array([p for row in alone for p in (row if isinstance(row, list) else [row])])
    for batch_size in (3, 64):
        together = predict_probabilities(model, features, roberta_tokenizer, batch_size)
        other = np.array([p for row in together
                          for p in (row if isinstance(row, list) else [row])])
        assert np.allclose(other, flat, atol=1e-5, rtol=0)


def test_fac_predictions_score_through_the_official_scorer(roberta_tokenizer, data_dir,
                                                            tmp_path):
    _, train = fac_split(data_dir, roberta_tokenizer)
    records, features = fac_split(data_dir, roberta_tokenizer, "validation")
    model = tiny_model(roberta_tokenizer)
    train_encoder(tiny_spec(num_epochs=1), train, model, tmp_path, progress=False)
    built = fac_records(records, predict_probabilities(model, features, roberta_tokenizer, 8))
    scores = score_records({FAC: built})[FAC]
    assert 0.0 <= scores["auc"] <= 1.0
    assert [record["label"] for record in built] == [record["label"] for record in records]


def test_evext_predictions_score_through_the_official_scorer(roberta_tokenizer, data_dir,
                                                              tmp_path):
    train_records = read_jsonl(data_dir / "all" / EVEXT / "train.jsonl")
    records = read_jsonl(data_dir / "all" / EVEXT / "validation.jsonl")
    pairs = evext_inputs(records, roberta_tokenizer)
    model = tiny_model(roberta_tokenizer)
    train_encoder(tiny_spec("EVEXT", batch_size=64, num_epochs=1),
                  evext_inputs(train_records, roberta_tokenizer), model, tmp_path,
                  progress=False)
    probabilities = predict_probabilities(model, pairs, roberta_tokenizer, 50)
    built = evext_records(records, pairs, probabilities)
    assert len(built) == sum(len(record["summary_lines"]) for record in records)
    scores = score_records({EVEXT: built})[EVEXT]
    assert all(0.0 <= scores[name] <= 1.0 for name in ("f1", "auc"))


@pytest.mark.parametrize("task, kind", [("extractive_summarization", "HierarchicalTagger"),
                                        ("unsupported_span_prediction", "TokenTagger")])
def test_ext_and_unsup_train_predict_and_score(roberta_tokenizer, data_dir, tmp_path, task,
                                               kind):
    def features_of(records):
        if task == "extractive_summarization":
            return ext_inputs(records, roberta_tokenizer, max_sentences=16,
                              max_sentence_tokens=32)
        return unsup_inputs(records, roberta_tokenizer, MAX_TOKENS)

    split = {name: read_jsonl(data_dir / "all" / task / f"{name}.jsonl")
             for name in ("train", "validation")}
    model = tiny_model(roberta_tokenizer, kind)
    train_encoder(tiny_spec(task, batch_size=2, num_epochs=2), features_of(split["train"]),
                  model, tmp_path, progress=False, tokens_per_microbatch=512)
    assert len(read_jsonl(tmp_path / "train_log.jsonl")) == 2
    features = features_of(split["validation"])
    probabilities = predict_probabilities(model, features, roberta_tokenizer, 4)
    if task == "extractive_summarization":
        built = ext_records(split["validation"], probabilities)
    else:
        built = unsup_records(split["validation"], features, probabilities)
    scores = score_records({task: built})[task]
    assert scores["n_records"] == len(split["validation"]) and scores["length_mismatches"] == 0
    assert all(0.0 <= scores[name] <= 1.0 for name in ("precision", "recall", "f1"))


@pytest.mark.parametrize("sizes, batch_size, expected", [
    ([100, 98, 90, 81, 80, 10], 32, [[0, 1, 2, 3, 4], [5]]),  # 80 * 1.25 = 100: still in
    ([100, 98, 90, 81, 80, 10], 2, [[0, 1], [2, 3], [4], [5]]),
    ([50, 50, 50], 32, [[0, 1, 2]]),
    ([7], 32, [[0]]),
])
def test_prediction_batches_keep_similar_sizes_together(sizes, batch_size, expected):
    from trainers.encoders.prediction import prediction_batches

    order = np.arange(len(sizes))
    got = prediction_batches(order, np.array(sizes), batch_size)
    assert [list(batch) for batch in got] == expected


@pytest.mark.parametrize("lengths, max_tokens, expected", [
    ([3, 3, 4, 5, 9, 10], 8192, [(0, 2), (2, 4), (4, 6)]),  # 4 > 1.25 * 3 closes
    ([10, 10, 11, 12], 8192, [(0, 4)]),
    ([10, 10, 11, 12], 30, [(0, 2), (2, 4)]),           # 3 * 11 = 33 > 30
    ([], 8192, []),
])
def test_sentence_chunks_of_similar_length(lengths, max_tokens, expected):
    from trainers.encoders.heads import length_chunks

    assert [(c.start, c.stop) for c in length_chunks(lengths, max_tokens)] == expected
