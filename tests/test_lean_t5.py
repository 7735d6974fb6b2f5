"""The lean T5 greedy decoder (trainers.lean_t5): the same sequences and logits as `generate`
on every supported layout, clear reasons for what it does not take, and the check in
trainers.label_probs that falls back to `generate` when the two ever differ."""
from __future__ import annotations

import logging

import pytest
import torch

from trainers.label_probs import (build_tiny_labeler, label_decoder, label_probabilities,
                                  lean_status)
from trainers.lean_t5 import LeanT5, unsupported_reason
from trainers.predict import PredictSpec

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MAX_NEW = 6


@pytest.fixture(scope="module")
def sources(fac_test_records):
    from tasks import get_task

    task = get_task("FAC")
    return [task.format(record)[0].source for record in fac_test_records][:12]


def random_t5(tokenizer, *, feed_forward: str = "gated-gelu", tied: bool = False, seed: int = 0):
    """A seeded random tiny T5 of the given feed-forward kind, in evaluation mode."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, dropout_rate=0.0, feed_forward_proj=feed_forward,
        tie_word_embeddings=tied, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = T5ForConditionalGeneration(config)
    model.generation_config.decoder_start_token_id = tokenizer.pad_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def padded(tokenizer, sources):
    encoded = tokenizer(list(sources), return_tensors="pt", padding=True)
    assert (encoded.attention_mask == 0).any(), "the batch must hold padding"
    return encoded.input_ids, encoded.attention_mask


def both_ways(model, input_ids, mask):
    with torch.inference_mode():
        reference = model.generate(input_ids=input_ids, attention_mask=mask,
                                   max_new_tokens=MAX_NEW, do_sample=False, num_beams=1,
                                   return_dict_in_generate=True, output_logits=True)
        logits = []
        sequences = LeanT5(model).greedy(input_ids, mask, MAX_NEW, on_step=logits.append)
    return reference, sequences, logits


@pytest.mark.parametrize("feed_forward, tied", [("gated-gelu", False), ("relu", True),
                                                ("gated-gelu", True)])
def test_lean_greedy_equals_generate(fac_tokenizer, sources, feed_forward, tied):
    model = random_t5(fac_tokenizer, feed_forward=feed_forward, tied=tied)
    assert unsupported_reason(model) is None
    input_ids, mask = padded(fac_tokenizer, sources)
    reference, sequences, logits = both_ways(model, input_ids, mask)
    assert torch.equal(sequences, reference.sequences)
    assert sequences.shape == (len(sources), 1 + MAX_NEW)
    ours, theirs = torch.stack(logits, 1), torch.stack(reference.logits, 1)
    assert ours.shape == theirs.shape
    assert float((ours - theirs).abs().max()) <= 1e-5 * float(theirs.abs().max())


def test_rows_stop_at_any_end_token_and_continue_with_padding(fac_tokenizer, sources):
    model = random_t5(fac_tokenizer, seed=2)  # this seed's rows repeat one of several words
    input_ids, mask = padded(fac_tokenizer, sources)
    free, _, _ = both_ways(model, input_ids, mask)
    # a second end token: the word row 0 repeats, which some rows never generate
    second_end = int(free.sequences[0, 1])
    model.generation_config.eos_token_id = [fac_tokenizer.eos_token_id, second_end]
    reference, sequences, _ = both_ways(model, input_ids, mask)
    assert torch.equal(sequences, reference.sequences)
    assert sequences.shape[1] == 1 + MAX_NEW           # the other rows ran to the limit
    stopped = [bool(row[1] == second_end) for row in sequences]
    assert stopped[0] and not all(stopped)
    pad = fac_tokenizer.pad_token_id
    assert all((row[2:] == pad).all() for row, done in zip(sequences, stopped) if done)
    assert not any((row[2:] == pad).any() for row, done in zip(sequences, stopped) if not done)


@pytest.mark.parametrize("change, reason", [
    (lambda m: m.train(), "training mode"),
    (lambda m: m.to(torch.bfloat16), "not float32"),
    (lambda m: setattr(m.generation_config, "repetition_penalty", 1.3),
     "generation config sets repetition_penalty"),
    (lambda m: setattr(m.generation_config, "num_beams", 2), "beam search or sampling"),
    (lambda m: setattr(m.generation_config, "decoder_start_token_id", [0, 1]),
     "not one token id"),
])
def test_unsupported_models_name_the_reason(fac_tokenizer, change, reason):
    model = random_t5(fac_tokenizer)
    change(model)
    assert reason in unsupported_reason(model)


def test_other_model_classes_are_refused(fac_tokenizer):
    from transformers import T5Config, T5EncoderModel

    encoder = T5EncoderModel(T5Config(vocab_size=len(fac_tokenizer), d_model=16, d_kv=4,
                                      d_ff=32, num_layers=1, num_heads=4))
    assert "T5EncoderModel is not one of" in unsupported_reason(encoder.eval())


# ---- the check against generate in trainers.label_probs -----------------------------------
def spec(**fields) -> PredictSpec:
    return PredictSpec(**{"device": "cpu", "max_new_tokens": 5, "batch_size": 4, **fields})


def test_label_probabilities_are_generates_and_the_check_turns_the_decoder_on(fac_tokenizer,
                                                                             sources):
    labeler = build_tiny_labeler(fac_tokenizer, sources).eval()
    assert lean_status(labeler) == "unchecked"
    assert label_decoder(labeler, spec()) == "lean T5 (not yet checked)"
    lean = label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert lean_status(labeler) == "on"
    assert label_decoder(labeler, spec()) == "lean T5 (checked against generate)"
    stock = label_probabilities(labeler, fac_tokenizer, sources, spec(), lean=False)
    assert [len(values) for values in lean] == [len(values) for values in stock] == [1] * 12
    assert max(abs(a[0] - b[0]) for a, b in zip(lean, stock)) <= 1e-6
    assert len({round(values[0], 3) for values in lean}) > 3  # outputs depend on the input
    assert label_decoder(labeler, spec(label_num_beams=2)) == "generate: beam search"


def test_a_decoder_that_differs_is_turned_off_and_generate_used(fac_tokenizer, sources, caplog):
    """The activation is found by its class name; a module of that name computing something
    else (ReLU here) makes the lean decoder differ, which the first batch's check catches."""
    labeler = build_tiny_labeler(fac_tokenizer, sources).eval()
    stock = label_probabilities(labeler, fac_tokenizer, sources, spec(), lean=False)
    impostor = type("NewGELUActivation", (torch.nn.ReLU,), {})()
    for stack in (labeler.encoder, labeler.decoder):
        for block in stack.block:
            block.layer[-1].DenseReluDense.act = impostor
    relu_stock = label_probabilities(labeler, fac_tokenizer, sources, spec(), lean=False)
    assert relu_stock != stock
    with caplog.at_level(logging.WARNING, logger="trainers.label_probs"):
        checked = label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert checked == relu_stock
    assert lean_status(labeler) == "off: differs from generate on the first batch"
    assert label_decoder(labeler, spec()).startswith("generate: differs from generate")
    assert "differs from generate on the first batch" in caplog.text
    assert label_probabilities(labeler, fac_tokenizer, sources, spec()) == relu_stock
