"""The lean T5 greedy decoder (trainers.lean_t5): the same sequences and logits as `generate`
on every supported layout, clear reasons for what it does not take, and the check in
trainers.label_probs that falls back to `generate` when the two ever differ."""
from __future__ import annotations

import logging

import pytest
import torch

from trainers.label_probs import build_tiny_labeler, label_decoder, label_probabilities, lean_status
from trainers.lean_t5 import LeanT5, unsupported_reason
from trainers.predict import PredictSpec

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MAX_NEW = 6


@pytest.fixture(scope="module")
def sources(fac_test_records):
    from tasks import get_task

    task = get_task("FAC")
    return [task.format(record)[0].source for record in fac_test_records][:12]


def random_t5(tokenizer, *, feed_forward: str = "gated-gelu", tied: bool = False, seed: int = 0,
              attention: str = "sdpa", model_class: str = "T5ForConditionalGeneration"):
    """A seeded random tiny T5 of the given feed-forward kind, in evaluation mode."""
    import transformers

    config = transformers.T5Config(
        vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, dropout_rate=0.0, feed_forward_proj=feed_forward,
        tie_word_embeddings=tied, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id,
        attn_implementation=attention)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = getattr(transformers, model_class)(config)
    if not hasattr(model, "generation_config"):
        return model.eval()
    model.generation_config.decoder_start_token_id = tokenizer.pad_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval()


def padded(tokenizer, sources):
    encoded = tokenizer(list(sources), return_tensors="pt", padding=True)
    assert (encoded.attention_mask == 0).any(), "the batch must hold padding"
    return encoded.input_ids, encoded.attention_mask


def both_ways(model, input_ids, mask, max_new: int = MAX_NEW):
    with torch.inference_mode():
        reference = model.generate(input_ids=input_ids, attention_mask=mask,
                                   max_new_tokens=max_new, return_dict_in_generate=True,
                                   output_logits=True)
        logits = []
        sequences = LeanT5(model).greedy(input_ids, mask, max_new, on_step=logits.append)
    return reference, sequences, logits


def assert_same(reference, sequences, logits):
    assert torch.equal(sequences, reference.sequences)
    ours, theirs = torch.stack(logits, 1), torch.stack(reference.logits, 1)
    assert ours.shape == theirs.shape
    assert float((ours - theirs).abs().max()) <= 1e-5 * float(theirs.abs().max())


@pytest.mark.parametrize("feed_forward, tied, attention", [
    ("gated-gelu", False, "sdpa"), ("relu", True, "sdpa"), ("gated-gelu", True, "eager")])
def test_lean_greedy_equals_generate(fac_tokenizer, sources, feed_forward, tied, attention):
    model = random_t5(fac_tokenizer, feed_forward=feed_forward, tied=tied, attention=attention)
    assert unsupported_reason(model) is None
    input_ids, mask = padded(fac_tokenizer, sources)
    reference, sequences, logits = both_ways(model, input_ids, mask)
    assert sequences.shape == (len(sources), 1 + MAX_NEW)
    assert_same(reference, sequences, logits)


@pytest.mark.parametrize("max_new", [1, 40])
def test_one_unpadded_input_one_step_or_many(fac_tokenizer, sources, max_new):
    model = random_t5(fac_tokenizer, seed=2)
    encoded = fac_tokenizer(sources[:1], return_tensors="pt")
    assert_same(*both_ways(model, encoded.input_ids, encoded.attention_mask, max_new))


@pytest.mark.parametrize("setting, value", [
    ("decoder_start_token_id", None),        # generate starts from bos_token_id then
    ("eos_token_id", None),                   # no end token: every row runs to the limit
    ("pad_token_id", None)])                  # finished rows continue with the end token
def test_token_id_fallbacks_are_generates(fac_tokenizer, sources, setting, value):
    model = random_t5(fac_tokenizer, seed=2)
    model.generation_config.bos_token_id = 7
    if setting == "pad_token_id":  # an end token some rows generate, others do not
        free, _, _ = both_ways(model, *padded(fac_tokenizer, sources))
        model.generation_config.eos_token_id = int(free.sequences[0, 1])
    setattr(model.generation_config, setting, value)
    assert unsupported_reason(model) is None
    reference, sequences, logits = both_ways(model, *padded(fac_tokenizer, sources))
    assert_same(reference, sequences, logits)
    if setting == "decoder_start_token_id":
        assert (sequences[:, 0] == 7).all()


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
    (lambda m: setattr(m.generation_config, "no_repeat_ngram_size", 2),
     "generation config sets no_repeat_ngram_size"),
])
def test_unsupported_models_name_the_reason(fac_tokenizer, change, reason):
    model = random_t5(fac_tokenizer)
    change(model)
    assert reason in unsupported_reason(model)


def test_settings_at_their_neutral_values_are_accepted(fac_tokenizer):
    model = random_t5(fac_tokenizer)
    for name, value in (("do_sample", False), ("num_beams", 1), ("repetition_penalty", 1.0),
                        ("min_length", 0), ("no_repeat_ngram_size", 0), ("length_penalty", 2.0),
                        ("max_length", 20)):
        setattr(model.generation_config, name, value)
    assert unsupported_reason(model) is None


@pytest.mark.parametrize("model_class", ["T5EncoderModel", "MT5ForConditionalGeneration"])
def test_other_model_classes_are_refused(fac_tokenizer, model_class):
    """mT5 has T5's layout but not its rule for scaling the decoder output."""
    model = random_t5(fac_tokenizer, model_class=model_class)
    assert f"{model_class} is not one of" in unsupported_reason(model)


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


def generate_calls(model) -> list:
    """Counts `generate` calls: only `generate` runs the encoder module (the lean decoder
    calls its parts)."""
    calls = []
    model.encoder.register_forward_pre_hook(lambda module, args: calls.append(1))
    return calls


def test_a_decoder_that_differs_is_turned_off_and_generate_used(fac_tokenizer, sources, caplog):
    """The activation is found by its class name; a module of that name computing something
    else (ReLU here), swapped in after the decoder was checked, makes the lean decoder
    differ: the swap changes the check key, and the next batch's check catches it."""
    labeler = build_tiny_labeler(fac_tokenizer, sources).eval()
    label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert lean_status(labeler) == "on"
    impostor = type("NewGELUActivation", (torch.nn.ReLU,), {})()
    for stack in (labeler.encoder, labeler.decoder):
        for block in stack.block:
            block.layer[-1].DenseReluDense.act = impostor
    assert lean_status(labeler) == "unchecked"
    relu_stock = label_probabilities(labeler, fac_tokenizer, sources, spec(), lean=False)
    with caplog.at_level(logging.WARNING, logger="trainers.greedy_labels"):
        checked = label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert checked == relu_stock
    assert lean_status(labeler) == "off: differs from generate on a checked batch"
    assert label_decoder(labeler, spec()) == "generate: differs from generate on a checked batch"
    assert "differs from generate on a checked batch" in caplog.text
    assert label_probabilities(labeler, fac_tokenizer, sources, spec()) == relu_stock


def test_the_check_runs_again_when_settings_change_or_only_one_step_was_checked(
        fac_tokenizer, sources):
    labeler = build_tiny_labeler(fac_tokenizer, sources).eval()
    calls = generate_calls(labeler)
    first_step = spec(label_rule="positional")             # one decoding step per batch
    label_probabilities(labeler, fac_tokenizer, sources, first_step)
    assert lean_status(labeler) == "on" and len(calls) == 1
    label_probabilities(labeler, fac_tokenizer, sources, first_step)
    assert len(calls) == 1                                  # one-step batches: checked
    label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert len(calls) == 2                                  # the first multi-step batch
    label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert len(calls) == 2
    labeler.generation_config.decoder_start_token_id = None  # now bos_token_id starts
    labeler.generation_config.bos_token_id = fac_tokenizer.pad_token_id + 5
    assert lean_status(labeler) == "unchecked"
    lean = label_probabilities(labeler, fac_tokenizer, sources, spec())
    assert len(calls) == 3 and lean_status(labeler) == "on"
    stock = label_probabilities(labeler, fac_tokenizer, sources, spec(), lean=False)
    assert max(abs(a - b) for x, y in zip(lean, stock) for a, b in zip(x, y)) <= 1e-6


def test_provenance_names_why_generate_decodes(fac_tokenizer):
    model = random_t5(fac_tokenizer)
    model.generation_config.repetition_penalty = 1.3
    assert label_decoder(model, spec()) == \
        "generate: the generation config sets repetition_penalty"
    assert label_decoder(model.train(), spec()) == \
        "generate: the model is in training mode (dropout)"
