"""The RoBERTa models of USB Table 2 (trainers/encoders/heads.py) on a tiny random encoder:
one logit per pair, token or sentence, the plain Linear head on `<s>`, mean pooling, the BCE
loss, training, seeding, loading an encoder as published and saving a fine-tuned model."""
from __future__ import annotations

import math

import pytest
import torch

from tasks.plumbing.errors import SumbenchError
from trainers.encoders import heads
from trainers.encoders.heads import bce_loss, build_random_encoder, load_encoder, pool_sentences
from trainers.encoders.model_files import load_model, save_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAX_TOKENS = 16
VOCAB = 100
PAD = 1  # RoBERTa's: <s>=0, <pad>=1, </s>=2


def tiny_config(dropout: float = 0.1):
    from trainers.models.tiny import tiny_roberta_config

    return tiny_roberta_config(VOCAB, PAD, MAX_TOKENS, dropout)


def encoder(seed: int = 0, dropout: float = 0.1):
    return build_random_encoder(tiny_config(dropout), seed)


def batch(lengths, width: int = MAX_TOKENS, seed: int = 0):
    """(input_ids, attention_mask) of `<s> words </s>` rows of the given lengths, right-padded
    to `width`, words drawn from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), width), PAD)
    mask = torch.zeros((len(lengths), width), dtype=torch.long)
    for row, length in enumerate(lengths):
        words = torch.randint(3, VOCAB, (length - 2,), generator=generator)
        ids[row, :length] = torch.cat([torch.tensor([0]), words, torch.tensor([2])])
        mask[row, :length] = 1
    return ids, mask


def documents(sentence_counts, sentences: int = 4, width: int = 8, seed: int = 0):
    """(input_ids, attention_mask, sentence_mask) of documents with the given real sentence
    counts, padded to `sentences` sentences of `width` tokens."""
    ids = torch.full((len(sentence_counts), sentences, width), PAD)
    mask = torch.zeros_like(ids)
    sentence_mask = torch.zeros((len(sentence_counts), sentences), dtype=torch.bool)
    for row, count in enumerate(sentence_counts):
        lengths = [3 + (row + index) % (width - 2) for index in range(count)]
        ids[row, :count], mask[row, :count] = batch(lengths, width, seed + row)
        sentence_mask[row, :count] = True
    return ids, mask, sentence_mask


def bce(logit: float, label: int) -> float:
    probability = 1 / (1 + math.exp(-logit))
    return -(label * math.log(probability) + (1 - label) * math.log(1 - probability))


def test_one_logit_per_pair_token_and_sentence():
    ids, mask = batch([16, 9, 5])
    assert heads.PairClassifier(encoder())(ids, mask).shape == (3,)
    assert heads.TokenTagger(encoder())(ids, mask).shape == (3, 16)
    ids, mask, sentence_mask = documents([4, 2])
    assert heads.HierarchicalTagger(encoder(), lstm_size=8)(
        ids, mask, sentence_mask).shape == (2, 4)


def test_the_head_is_one_linear_layer_on_the_start_token():
    model = heads.PairClassifier(encoder()).eval()
    assert [name for name, _ in model.named_children()] == ["encoder", "head"]
    assert isinstance(model.head, torch.nn.Linear) and model.head.weight.shape == (1, 32)
    ids, mask = batch([16, 9, 5])
    with torch.no_grad():
        hidden = model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        by_hand = hidden[:, 0] @ model.head.weight.T[:, 0] + model.head.bias[0]
        assert torch.allclose(model(ids, mask), by_hand, atol=1e-6)
        tagger = heads.TokenTagger(model.encoder).eval()
        per_token = hidden @ tagger.head.weight.T[:, 0] + tagger.head.bias[0]
        assert torch.allclose(tagger(ids, mask), per_token, atol=1e-6)
    assert model.head.bias.item() == 0.0  # initialised as transformers does: bias 0


def test_mean_pooling_ignores_padding():
    model = heads.HierarchicalTagger(encoder(), lstm_size=8).eval()
    short, short_mask = batch([5, 7], width=8)
    padded, padded_mask = batch([5, 7], width=16)
    assert torch.equal(padded[:, :8], short)
    with torch.no_grad():
        vectors = model.sentence_vectors(short, short_mask)
        assert torch.allclose(model.sentence_vectors(padded, padded_mask), vectors, atol=1e-6)
        hidden = model.encoder(input_ids=short, attention_mask=short_mask).last_hidden_state
    assert torch.allclose(vectors[0], hidden[0, :5].mean(0), atol=1e-6)
    assert torch.allclose(vectors[1], hidden[1, :7].mean(0), atol=1e-6)
    assert torch.equal(pool_sentences(hidden, short_mask, "cls"), hidden[:, 0])
    with pytest.raises(SumbenchError, match="pooling 'max'"):
        heads.HierarchicalTagger(encoder(), pooling="max")


def test_padding_sentences_do_not_change_a_documents_logits():
    model = heads.HierarchicalTagger(encoder(), lstm_size=8).eval()
    ids, mask, sentence_mask = documents([2, 4])
    with torch.no_grad():
        logits = model(ids, mask, sentence_mask)
        alone = model(ids[:1, :2], mask[:1, :2], sentence_mask[:1, :2])
    assert torch.allclose(logits[0, :2], alone[0], atol=1e-6)
    assert not torch.allclose(logits[0, :2], logits[1, :2])
    with pytest.raises(SumbenchError, match="sentence_mask"):
        model(ids, mask, torch.tensor([[True, False, True, False]] * 2))


def test_bce_equals_a_hand_computation():
    logits = torch.tensor([0.0, 2.0, -1.0, 3.0])
    labels = torch.tensor([1, 0, -100, 1])
    expected = (math.log(2) + 2 + math.log(1 + math.exp(-2)) + math.log(1 + math.exp(-3))) / 3
    assert bce_loss(logits, labels).item() == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx((bce(0, 1) + bce(2, 0) + bce(3, 1)) / 3)
    # tokens: -100 and the explicit mask both leave a token out; the mean is over the batch
    tokens = torch.tensor([[0.5, -2.0, 1.0], [4.0, 0.0, -3.0]])
    token_labels = torch.tensor([[1, -100, 0], [0, 1, 1]])
    token_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    by_hand = (bce(0.5, 1) + bce(1.0, 0) + bce(4.0, 0) + bce(0.0, 1)) / 4
    assert bce_loss(tokens, token_labels, token_mask).item() == pytest.approx(by_hand, abs=1e-6)
    # EXT: the mean over real sentences only
    sentence_mask = torch.tensor([[True, True, False], [True, False, False]])
    labels_ext = torch.tensor([[1, 0, 1], [1, 0, 0]])
    by_hand = (bce(0.5, 1) + bce(-2.0, 0) + bce(4.0, 1)) / 3
    assert bce_loss(tokens, labels_ext, sentence_mask).item() == pytest.approx(by_hand, abs=1e-6)
    nothing = bce_loss(tokens, torch.full((2, 3), -100))
    assert nothing.item() == 0.0


def train(model, inputs, labels, mask=None, steps: int = 20, lr: float = 5e-3) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = bce_loss(model(*inputs), labels, mask)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["PairClassifier", "TokenTagger", "HierarchicalTagger"])
def test_the_loss_falls_on_a_fixed_batch(kind):
    generator = torch.Generator().manual_seed(3)
    if kind == "HierarchicalTagger":
        inputs = documents([4, 3])
        model = heads.HierarchicalTagger(encoder(dropout=0.0), lstm_size=8)
        labels, mask = torch.randint(0, 2, (2, 4), generator=generator), inputs[2]
    else:
        inputs = batch([16, 12, 9, 5])
        model = heads.model_class(kind)(encoder(dropout=0.0))
        shape = (4,) if kind == "PairClassifier" else (4, 16)
        labels, mask = torch.randint(0, 2, shape, generator=generator), None
        if kind == "TokenTagger":
            labels[inputs[1] == 0] = -100
    losses = train(model, inputs, labels, mask)
    assert losses[0] == pytest.approx(math.log(2), abs=0.05)  # a fresh head: logits near 0
    assert losses[-1] < 0.6 * losses[0], losses


def test_the_same_seed_gives_the_same_weights_and_logits():
    ids, mask, sentence_mask = documents([4, 2])
    first = heads.HierarchicalTagger(encoder(seed=5), seed=7, lstm_size=8).eval()
    second = heads.HierarchicalTagger(encoder(seed=5), seed=7, lstm_size=8).eval()
    other = heads.HierarchicalTagger(encoder(seed=5), seed=8, lstm_size=8).eval()
    weights, again = first.state_dict(), second.state_dict()
    assert weights.keys() == again.keys()
    assert all(torch.equal(weights[key], again[key]) for key in weights)
    assert not torch.equal(weights["head.weight"], other.state_dict()["head.weight"])
    assert not torch.equal(weights["lstm.weight_hh_l0"], other.state_dict()["lstm.weight_hh_l0"])
    with torch.no_grad():
        assert torch.equal(first(ids, mask, sentence_mask), second(ids, mask, sentence_mask))
    bound = 8 ** -0.5
    assert all(value.abs().max() <= bound for name, value in weights.items()
               if name.startswith("lstm."))
    assert not torch.equal(encoder(seed=5).embeddings.word_embeddings.weight,
                           encoder(seed=6).embeddings.word_embeddings.weight)


@pytest.mark.parametrize("architecture", ["RobertaForMaskedLM", "RobertaModel"])
def test_a_published_roberta_folder_loads_as_the_encoder(architecture, tmp_path, capfd):
    """Its language-model head and pooler are left out quietly (no load report of
    transformers' listing them as UNEXPECTED)."""
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        saved = getattr(transformers, architecture)(tiny_config())
    saved.save_pretrained(str(tmp_path))
    source = saved.roberta if architecture == "RobertaForMaskedLM" else saved
    expected = source.state_dict()
    loaded = load_encoder(str(tmp_path)).state_dict()
    assert loaded.keys() == {key for key in expected if not key.startswith("pooler.")}
    assert all(torch.equal(loaded[key], expected[key]) for key in loaded)
    assert "LOAD REPORT" not in capfd.readouterr().err


def test_weights_of_something_else_beside_the_encoder_are_named_in_one_warning(tmp_path,
                                                                               caplog):
    from safetensors.torch import load_file, save_file

    encoder().save_pretrained(str(tmp_path))
    weights = load_file(str(tmp_path / "model.safetensors"))
    save_file({**weights, "classifier.out_proj.weight": torch.zeros(1, 2)},
              str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with caplog.at_level("WARNING", logger="trainers.encoders.heads"):
        load_encoder(str(tmp_path))
    assert [record.getMessage() for record in caplog.records
            if record.name == "trainers.encoders.heads"] == [
        f"encoder {tmp_path}: 1 weights in its files are not the encoder's and are left out "
        "(first: classifier.out_proj.weight)"]


def test_a_folder_of_another_model_type_is_a_one_line_error(tmp_path):
    from transformers import T5Config, T5Model

    config = T5Config(vocab_size=50, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2)
    T5Model(config).save_pretrained(str(tmp_path))
    with pytest.raises(SumbenchError) as caught:
        load_encoder(str(tmp_path))
    message = str(caught.value)
    assert "\n" not in message and " t5 model " in message and "T5Model" in message
    with pytest.raises(SumbenchError, match="does not exist"):
        load_encoder(str(tmp_path / "nowhere"))


def test_weights_come_from_safetensors_only(tmp_path):
    """A folder whose weights are a pickle (pytorch_model.bin) is refused, never unpickled."""
    model = encoder()
    model.config.save_pretrained(str(tmp_path))
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(SumbenchError) as caught:
        load_encoder(str(tmp_path))
    assert "\n" not in str(caught.value) and "model.safetensors" in str(caught.value)


@pytest.mark.parametrize("kind", ["TokenTagger", "HierarchicalTagger"])
def test_a_fine_tuned_tagger_saves_and_loads_with_identical_logits(kind, tmp_path):
    if kind == "HierarchicalTagger":
        inputs = documents([4, 3])
        model = heads.HierarchicalTagger(encoder(), pooling="cls", lstm_size=8)
        labels, mask = torch.tensor([[1, 0, 0, 1], [0, 1, 0, 0]]), inputs[2]
    else:
        inputs = batch([16, 7])
        model = heads.TokenTagger(encoder())
        labels, mask = (inputs[0] % 2).masked_fill(inputs[1] == 0, -100), None
    fresh = {key: value.clone() for key, value in model.state_dict().items()}
    train(model, inputs, labels, mask, steps=2)
    assert not torch.equal(fresh["head.weight"], model.state_dict()["head.weight"])
    save_model(model, tmp_path / "tuned")
    loaded = load_model(tmp_path / "tuned")
    assert type(loaded) is type(model) and loaded.options() == model.options()
    with torch.no_grad():
        assert torch.equal(loaded(*inputs), model.eval()(*inputs))


def test_a_plain_roberta_folder_is_no_saved_model(tmp_path):
    encoder().save_pretrained(str(tmp_path))
    with pytest.raises(SumbenchError, match="no sumbench encoder model folder"):
        load_model(tmp_path)
    with pytest.raises(SumbenchError, match="unknown encoder model 'Tagger'"):
        heads.model_class("Tagger")
