"""The tiny, locally built tokenizer and models used by tests, benchmarks and the demo."""
from __future__ import annotations

import pytest

from trainers.models.tiny import (
    REQUIRED_WORDS,
    build_tiny_causal_lm,
    build_tiny_classifier,
    build_tiny_gpt2,
    build_tiny_t5,
    build_tiny_tokenizer,
)

BUILDERS = {"t5": build_tiny_t5, "llama": build_tiny_causal_lm, "gpt2": build_tiny_gpt2,
            "bert": build_tiny_classifier}

TEXTS = ["Mara Voss founded a new branch in Lisbon in 1943.",
         "The council renamed the larger wing in Quebec after a long review."] * 5


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(TEXTS)


def test_tokenizer_special_tokens_and_label_words(tokenizer):
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    ids = tokenizer("SENT0 Yes SENT1 No")["input_ids"]
    assert ids[-1] == tokenizer.eos_token_id
    for word in REQUIRED_WORDS:
        assert len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1, word
    assert tokenizer.decode(tokenizer("Quebec 1943 ünïcode")["input_ids"],
                            skip_special_tokens=True).strip() == "Quebec 1943 ünïcode"


def test_tokenizer_round_trips_through_save(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    build_tiny_tokenizer(TEXTS, save_dir=tmp_path)
    reloaded = AutoTokenizer.from_pretrained(str(tmp_path))
    assert reloaded(TEXTS[0])["input_ids"] == tokenizer(TEXTS[0])["input_ids"]


def test_t5_is_seeded_without_touching_the_global_generator(tokenizer, tmp_path):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    state = torch.random.get_rng_state()
    first = build_tiny_t5(tokenizer, save_dir=tmp_path, seed=0)
    assert torch.equal(state, torch.random.get_rng_state())
    again, other = build_tiny_t5(tokenizer, seed=0), build_tiny_t5(tokenizer, seed=1)
    weights = first.state_dict()
    assert all(torch.equal(weights[k], v) for k, v in again.state_dict().items())
    assert not torch.equal(weights["shared.weight"], other.state_dict()["shared.weight"])
    assert (first.config.d_model, first.config.vocab_size) == (64, len(tokenizer))
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path))
    assert all(torch.equal(weights[k], v) for k, v in reloaded.state_dict().items())
    assert reloaded.generation_config.decoder_start_token_id == tokenizer.pad_token_id


@pytest.mark.slow
def test_t5_trains_and_generates(tokenizer):
    import torch

    model = build_tiny_t5(tokenizer)
    batch = tokenizer(TEXTS[:2], return_tensors="pt", padding=True)
    labels = tokenizer(["Yes", "No"], return_tensors="pt", padding=True)["input_ids"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 4
    model.eval()
    out = model.generate(**batch, max_new_tokens=3, do_sample=False)
    texts = tokenizer.batch_decode(out, skip_special_tokens=True)
    assert [text.strip() for text in texts] == ["Yes", "No"]


def test_classifier_labels(tokenizer):
    model = build_tiny_classifier(tokenizer, labels=("entailment", "not_entailment"))
    assert model.config.id2label == {0: "entailment", 1: "not_entailment"}
    assert model.config.num_labels == 2


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_building_leaves_the_global_cpu_generator_where_it_was(tokenizer, kind):
    """The global stream continues as if no model had been built (the build seeds and then
    restores every generator `torch.manual_seed` touches)."""
    import torch

    torch.manual_seed(1234)
    expected = torch.rand(4)
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    model = BUILDERS[kind](tokenizer, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(torch.rand(4), expected)
    again = BUILDERS[kind](tokenizer, seed=7)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_building_leaves_cuda_generators_where_they_were(tokenizer):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: only the CPU generator exists")
    states = torch.cuda.get_rng_state_all()
    build_tiny_t5(tokenizer, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(states, torch.cuda.get_rng_state_all()))


def test_gpt2_has_a_small_absolute_context(tokenizer):
    import torch

    model = build_tiny_gpt2(tokenizer, n_positions=32).eval()
    assert model.config.n_positions == model.config.max_position_embeddings == 32
    ids = torch.tensor([tokenizer(TEXTS[0])["input_ids"] * 2])
    assert ids.shape[1] <= 32
    with torch.inference_mode():
        assert model(input_ids=ids).logits.shape == (1, ids.shape[1], len(tokenizer))
        with pytest.raises(IndexError):  # past the position table: what the backends prevent
            model(input_ids=torch.cat([ids] * 3, dim=1))


def test_line_heads_look_ahead_and_find_the_token_being_labelled(tokenizer):
    """`line_heads`: encoder head 0 of layer 0 attends to the next token, and cross-attention
    head 0 of the decoder to the input position holding the decoder's own token (exactly in
    the first layer, mostly in the next, whose input is already mixed) — at initialisation,
    before any training; without it, neither holds."""
    import torch

    encoded = tokenizer(TEXTS[0], return_tensors="pt")
    ids = encoded["input_ids"][0].tolist()
    unique = [position for position, token in enumerate(ids) if ids.count(token) == 1]
    decoder_input = torch.tensor([[ids[position] for position in unique]])
    argmaxes = {}
    for line_heads in (True, False):
        model = build_tiny_t5(tokenizer, d_model=128, tie_embeddings=True, relative_buckets=32,
                              line_heads=line_heads)
        model.set_attn_implementation("eager")
        model.eval()
        with torch.no_grad():
            out = model(**encoded, decoder_input_ids=decoder_input, output_attentions=True)
        ahead = out.encoder_attentions[0][0, 0].argmax(-1).tolist()
        found = [layer[0, 0].argmax(-1).tolist() for layer in out.cross_attentions]
        argmaxes[line_heads] = (ahead, found)
    ahead, found = argmaxes[True]
    assert ahead[:-1] == list(range(1, len(ids)))  # the last token has nothing ahead
    assert found[0] == unique and len(unique) > 5  # exact in the first decoder layer
    assert all(sum(a == b for a, b in zip(layer, unique)) > len(unique) / 2 for layer in found)
    ahead, found = argmaxes[False]
    assert ahead[:-1] != list(range(1, len(ids))) and found[0] != unique
