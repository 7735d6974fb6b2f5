"""The one batched seq2seq generation helper (`seq2seq_output_batches`, `seq2seq_texts` in
trainers.inference.generation) on a real tiny random-weight T5: what each input gets does not
depend on the batch size or on length sorting, input order is kept, inputs are cut where
asked, and progress counts inputs batch by batch."""
from __future__ import annotations

import random

import pytest

from trainers.inference.generation import seq2seq_output_batches, seq2seq_texts

WORDS = "the cat sat on a mat while dogs ran far away in the old town by the river".split()
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def tiny():
    """(model, tokenizer, seven inputs of 1 to 30 words)."""
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30))) for _ in range(7)]
    tokenizer = build_tiny_tokenizer(texts, vocab_size=300)
    return build_tiny_t5(tokenizer, seed=6, d_model=32).eval(), tokenizer, texts


def alone(model, tokenizer, text: str, max_input_tokens: int | None = None):
    """(text, first-step scores) of one input generated on its own, without padding."""
    import torch

    cut = {} if max_input_tokens is None else {"truncation": True,
                                                 "max_length": max_input_tokens}
    encoded = tokenizer([text], return_tensors="pt", **cut)
    with torch.inference_mode():
        out = model.generate(**encoded, do_sample=False, num_beams=1,
                             max_new_tokens=NEW_TOKENS, output_scores=True,
                             return_dict_in_generate=True)
    return tokenizer.batch_decode(out.sequences, skip_special_tokens=True)[0], out.scores[0][0]


@pytest.mark.parametrize("length_sorted", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_each_input_gets_what_it_gets_alone_in_input_order(tiny, batch_size, length_sorted):
    model, tokenizer, texts = tiny
    expected = [alone(model, tokenizer, text)[0] for text in texts]
    assert len(set(expected)) == 6  # the inputs get different texts: order shows
    assert seq2seq_texts(model, tokenizer, texts, batch_size=batch_size,
                         length_sorted=length_sorted, max_new_tokens=NEW_TOKENS) == expected


def test_batches_are_in_input_order_or_shortest_first(tiny):
    import torch

    model, tokenizer, texts = tiny
    lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    by_length = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
    options = {"batch_size": 3, "max_new_tokens": NEW_TOKENS, "output_scores": True,
               "return_dict_in_generate": True}
    for length_sorted, order in ((False, list(range(7))), (True, by_length)):
        batches = list(seq2seq_output_batches(model, tokenizer, texts,
                                              length_sorted=length_sorted, **options))
        assert [positions for positions, _ in batches] == [order[:3], order[3:6], order[6:]]
        for positions, output in batches:  # first-step scores: the generate kwargs reach it
            for row, position in enumerate(positions):  # padding moves the last digits only
                torch.testing.assert_close(output.scores[0][row],
                                           alone(model, tokenizer, texts[position])[1],
                                           rtol=1e-4, atol=1e-4)


def test_inputs_are_cut_at_max_input_tokens(tiny):
    import torch

    model, tokenizer, texts = tiny
    longest = max(texts, key=len)
    assert len(tokenizer(longest)["input_ids"]) > 5
    expected_text, expected_scores = alone(model, tokenizer, longest, max_input_tokens=5)
    (_, output), = seq2seq_output_batches(
        model, tokenizer, [longest], batch_size=1, max_input_tokens=5,
        max_new_tokens=NEW_TOKENS, output_scores=True, return_dict_in_generate=True)
    torch.testing.assert_close(output.scores[0][0], expected_scores)
    assert not torch.allclose(output.scores[0][0], alone(model, tokenizer, longest)[1])
    assert seq2seq_texts(model, tokenizer, [longest], batch_size=1, max_input_tokens=5,
                         max_new_tokens=NEW_TOKENS) == [expected_text]


class Progress:
    def __init__(self):
        self.updates: list[int] = []

    def update(self, count: int) -> None:
        self.updates.append(count)


def test_progress_counts_inputs_batch_by_batch(tiny):
    model, tokenizer, texts = tiny
    progress = Progress()
    seq2seq_texts(model, tokenizer, texts, batch_size=3, max_new_tokens=2, progress=progress)
    assert progress.updates == [3, 3, 1]
    empty = Progress()
    assert seq2seq_texts(model, tokenizer, [], batch_size=3, max_new_tokens=2,
                         progress=empty) == []
    assert empty.updates == []


def test_the_caller_s_decode_makes_the_texts(tiny):
    model, tokenizer, texts = tiny
    kept = seq2seq_texts(model, tokenizer, texts[:2], batch_size=2, max_new_tokens=1,
                         decode=lambda sequences: tokenizer.batch_decode(sequences))
    first = [tokenizer.decode([int(alone(model, tokenizer, text)[1].argmax())])
             for text in texts[:2]]
    assert kept == [f"<pad>{token}" for token in first]  # decoder start token kept
