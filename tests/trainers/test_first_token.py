"""The first-token shortcut equals the classifier's own forward; other models are refused."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainers.first_token import agrees, first_token_forward, padded_key_block, unsupported_reason  # noqa: E402
from trainers.tiny import _seeded_init  # noqa: E402

VOCAB = 120


def padded_batch(generator: torch.Generator, lengths=(23, 17, 9), pad_id: int = 1) -> dict:
    """Random ids (>= 3, so never the pad id) right-padded to the longest; two segments."""
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    segments = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = torch.randint(3, VOCAB, (length,), generator=generator)
        mask[row, :length] = 1
        segments[row, length // 2:length] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments}


def seeded(build):
    return _seeded_init(0, build).eval()  # seeded, the global generators restored


def bert(layers: int = 3, model_class=transformers.BertForSequenceClassification):
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=64, pad_token_id=1, num_labels=3)
    return seeded(lambda: model_class(config))


def roberta(layers: int = 2):
    config = transformers.RobertaConfig(vocab_size=VOCAB, hidden_size=32,
                                        num_hidden_layers=layers, num_attention_heads=4,
                                        intermediate_size=64, max_position_embeddings=64,
                                        pad_token_id=1, type_vocab_size=1, num_labels=3)
    return seeded(lambda: transformers.RobertaForSequenceClassification(config))


@pytest.mark.parametrize("build, layers", [(bert, 1), (bert, 3), (roberta, 2)])
def test_the_shortcut_gives_the_model_logits(build, layers):
    model = build(layers)
    forward, reason = first_token_forward(model)
    assert reason is None
    batch = padded_batch(torch.Generator().manual_seed(layers))
    if build is roberta:
        batch.pop("token_type_ids")
    with torch.inference_mode():
        expected = model(**batch).logits
        got = forward(**batch)
    assert got.shape == expected.shape == (3, 3)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)
    assert agrees(got, expected)
    assert not agrees(got + 0.01, expected)


def test_padding_rows_change_nothing():
    model = bert()
    forward, _ = first_token_forward(model)
    batch = padded_batch(torch.Generator().manual_seed(5), lengths=(11, 30))
    alone = {key: value[:1, :11] for key, value in batch.items()}
    with torch.inference_mode():
        assert torch.allclose(forward(**batch)[0], model(**alone).logits[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("head_size, keys_after", [(8, 32), (16, 32), (32, 32), (64, 23)])
def test_small_heads_attend_over_keys_padded_to_a_block(head_size, keys_after):
    """On a CPU, heads of at most 32 get keys and values padded with masked positions to a
    multiple of 16 (faster flash attention); the attention is the same."""
    from trainers.first_token import _padded_keys

    generator = torch.Generator().manual_seed(head_size)
    query, key, value = (torch.randn(2, 4, 23, head_size, generator=generator)
                         for _ in range(3))
    mask = torch.ones(2, 1, 1, 23, dtype=torch.bool)
    mask[1, ..., 17:] = False
    padded_key, padded_value, padded_mask = _padded_keys(key, value, mask)
    assert padded_key.shape[2] == padded_value.shape[2] == padded_mask.shape[-1] == keys_after
    assert torch.equal(padded_mask[..., :23], mask) and not padded_mask[..., 23:].any()
    attend = torch.nn.functional.scaled_dot_product_attention
    assert torch.allclose(attend(query, padded_key, padded_value, attn_mask=padded_mask),
                          attend(query, key, value, attn_mask=mask), atol=1e-6, rtol=0)
    whole = (key[:, :, :16], value[:, :, :16], mask[..., :16])
    assert all(a is b for a, b in zip(_padded_keys(*whole), whole))


def wide_heads_bert():
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=64, pad_token_id=1, num_labels=3)
    return seeded(lambda: transformers.BertForSequenceClassification(config))


def test_batch_plans_learn_which_keys_the_shortcut_pads():
    """Keys padded to blocks of 16 where `_padded_keys` pads them: small heads on a CPU,
    in a layer run in full (a 1-layer model runs only the folded last layer)."""
    assert padded_key_block(bert(3), "cpu") == padded_key_block(roberta(2), "cpu") == 16
    assert padded_key_block(bert(3), "cuda:0") == padded_key_block(bert(1), "cpu") == 1
    assert padded_key_block(wide_heads_bert(), "cpu") == 1  # heads of 64
    one_layer = bert(1)  # a hook stops the fold: the last layer runs in full, padded
    one_layer.bert.encoder.layer[0].attention.self.key.register_forward_hook(lambda *a: None)
    assert padded_key_block(one_layer, "cpu") == 16
    assert padded_key_block(bert(3).train(), "cpu") == 1  # no shortcut in training mode


def full_layers_run(forward, batch, monkeypatch) -> int:
    """How many layers `forward(**batch)` runs with every position's keys and values
    projected (`_layer`); the folded last layer does not count. (Hooks on the maps would
    themselves stop the fold, so the layer function is counted instead.)"""
    from trainers import first_token

    calls, layer = [], first_token._layer
    with monkeypatch.context() as patched, torch.inference_mode():
        patched.setattr(first_token, "_layer", lambda *args: calls.append(1) or layer(*args))
        forward(**batch)
    return len(calls)


def test_the_last_layer_folds_its_keys_and_values_into_the_query(monkeypatch):
    """Keys and values of every position are never projected in the last layer, and the
    logits are still the model's (test_the_shortcut_gives_the_model_logits)."""
    model = bert(layers=3)
    forward, _ = first_token_forward(model)
    batch = padded_batch(torch.Generator().manual_seed(2))
    assert full_layers_run(forward, batch, monkeypatch) == 2


@pytest.mark.parametrize("build", [bert, roberta])
def test_the_folded_layer_keeps_every_bias(build, monkeypatch):
    """A fresh model's linear biases are zero; trained ones are not. With random biases on
    every linear map (the key's drops out of the softmax, the value's is added back after the
    weights), the shortcut still gives the model's logits."""
    model = build(layers=2)
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.copy_(torch.randn(module.bias.shape, generator=generator))
    forward, _ = first_token_forward(model)
    batch = padded_batch(torch.Generator().manual_seed(6))
    if build is roberta:
        batch.pop("token_type_ids")
    with torch.inference_mode():
        expected, got = model(**batch).logits, forward(**batch)
    assert full_layers_run(forward, batch, monkeypatch) == 1
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)
    assert not torch.allclose(expected, torch.zeros_like(expected), atol=1e-2)


def test_linear_maps_with_hooks_are_not_folded(monkeypatch):
    """A hook (as offloading wrappers add) may change what the map computes: projected."""
    model = bert(layers=2)
    value = model.bert.encoder.layer[-1].attention.self.value
    value.register_forward_hook(lambda module, inputs, output: output * 2.0)
    forward, _ = first_token_forward(model)
    batch = padded_batch(torch.Generator().manual_seed(8))
    with torch.inference_mode():
        expected, got = model(**batch).logits, forward(**batch)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0)
    assert full_layers_run(forward, batch, monkeypatch) == 2


class ShiftedLinear(torch.nn.Linear):
    """A linear map whose output is not its weight's alone (as an adapter's would be)."""

    def forward(self, states):
        return super().forward(states) + 0.5


def test_keys_and_values_that_are_not_plain_linear_maps_are_projected(monkeypatch):
    model = bert(layers=2)
    attention = model.bert.encoder.layer[-1].attention.self
    for name in ("key", "value"):
        plain = getattr(attention, name)
        shifted = ShiftedLinear(plain.in_features, plain.out_features)
        shifted.load_state_dict(plain.state_dict())
        setattr(attention, name, shifted)
    forward, reason = first_token_forward(model)
    batch = padded_batch(torch.Generator().manual_seed(4))
    with torch.inference_mode():
        expected, got = model(**batch).logits, forward(**batch)
    assert reason is None and torch.allclose(got, expected, atol=1e-5, rtol=0)
    assert full_layers_run(forward, batch, monkeypatch) == 2


def test_models_outside_the_shape_are_refused_with_the_reason():
    token_classifier = bert(model_class=transformers.BertForTokenClassification)
    assert first_token_forward(token_classifier) == (None, unsupported_reason(token_classifier))
    assert "BertForTokenClassification is not one of" in unsupported_reason(token_classifier)

    training = bert().train()
    assert "training mode" in unsupported_reason(training)
    relative = bert()
    relative.config.position_embedding_type = "relative_key"
    assert "not absolute" in unsupported_reason(relative)
    decoder = bert()
    decoder.config.is_decoder = True
    assert "decoder" in unsupported_reason(decoder)
    no_pooler = bert()
    no_pooler.bert.pooler = None
    assert "pooler" in unsupported_reason(no_pooler)


def test_agrees_needs_the_same_shape_and_scales_with_the_logits():
    logits = torch.tensor([[1000.0, -2.0]])
    assert agrees(logits + 0.05, logits)  # 5e-5 of the largest logit
    assert not agrees(logits[:, :1], logits)
    assert not agrees(torch.tensor([[0.5, 0.0]]), torch.tensor([[0.0, 0.0]]))
