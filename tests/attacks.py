"""Attacks on a leaderboard's hidden FAC labels, as an ordinary participant would run them with
nothing but public inputs and the server's own answers
(tests/leaderboard/test_leaderboard_attacks.py).

`ProbingAttacker`: adaptive probing by crafted probabilities. It works on a window of FAC
pairs (the two records of one edited sentence: one is supported, one is not) and keeps every
hypothesis (which claim of each window pair is unsupported, and which window pairs are in the
board's public part, since the split is secret) that agrees with every answer so far. Each
submission is the candidate, among random ones, whose predicted answers split the surviving
hypotheses most evenly (the most information per answer); pairs outside the window are sent
at 0.5, where they add the same to the AUC whatever their labels. A label is *pinned* when
every surviving hypothesis agrees on it and holds its pair public.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

TOLERANCE = 1e-6


def window_auc(scores_a: np.ndarray, scores_b: np.ndarray, labels: np.ndarray,
               public: np.ndarray, n_public_pairs: int) -> np.ndarray:
    """x100 AUC of the board's public FAC items for each hypothesis (rows of `labels`:
    1 = claim a is the unsupported one, `public`: the pair counts), window pairs scored
    `scores_a`/`scores_b` (higher = more likely unsupported), every other public pair tied at
    0.5. Ties count a half, as the official AUC does."""
    positive = np.where(labels == 1, scores_a, scores_b)
    negative = np.where(labels == 1, scores_b, scores_a)
    both = public[:, :, None] & public[:, None, :]
    difference = positive[:, :, None] - negative[:, None, :]
    inside = (((difference > 0) + 0.5 * (difference == 0)) * both).sum(axis=(1, 2))
    outside = n_public_pairs - public.sum(axis=1)
    beats_tie = lambda values: (values > 0.5) + 0.5 * (values == 0.5)  # noqa: E731
    cross = ((beats_tie(positive) + beats_tie(1 - negative)) * public).sum(axis=1) * outside
    return 100.0 * (inside + cross + 0.5 * outside * outside) / (n_public_pairs ** 2)


@dataclass
class Answer:
    """What the server said of one submission's FAC part."""
    released: float | None   # the value shown
    improved: bool
    step: float


class ProbingAttacker:
    def __init__(self, n_window: int, n_public_pairs: int, seed: int = 0, exact: bool = False):
        self.exact = exact  # answers are exact AUCs (a board without the Ladder)
        self.rng = np.random.default_rng(seed)
        self.n_public_pairs = n_public_pairs
        labels = np.array(list(itertools.product([0, 1], repeat=n_window)))
        public = np.array(list(itertools.product([False, True], repeat=n_window)))
        self.labels = np.repeat(labels, len(public), axis=0)
        self.public = np.tile(public, (len(labels), 1))
        self.alive = np.ones(len(self.labels), dtype=bool)
        self.best: float | None = None
        self.n_window = n_window

    def outcomes(self, scores: tuple[np.ndarray, np.ndarray], rows: np.ndarray,
                 step: float) -> np.ndarray:
        """The answer each hypothesis predicts: -1 for "no improvement", else the released
        value (the Ladder: improved when above best + step, rounded to the step)."""
        values = window_auc(*scores, self.labels[rows], self.public[rows], self.n_public_pairs)
        if self.exact:
            return np.round(values, 6)
        released = np.round(values / step) * step
        if self.best is None:
            return released
        return np.where(values > self.best + step, released, -1.0)

    def next_scores(self, step: float, candidates: int = 30) -> tuple[np.ndarray, np.ndarray]:
        alive = np.flatnonzero(self.alive)
        sample = alive if len(alive) <= 4000 else self.rng.choice(alive, 4000, replace=False)
        chosen, most = None, -1.0
        for _ in range(candidates):
            scores_a, scores_b = np.full(self.n_window, 0.5), np.full(self.n_window, 0.5)
            k = int(self.rng.integers(1, self.n_window + 1))
            index = self.rng.choice(self.n_window, k, replace=False)
            scores_a[index], scores_b[index] = self.rng.random(k), self.rng.random(k)
            _, counts = np.unique(np.round(self.outcomes((scores_a, scores_b), sample, step), 4),
                                  return_counts=True)
            shares = counts / counts.sum()
            information = float(-(shares * np.log2(shares)).sum())
            if information > most:
                chosen, most = (scores_a, scores_b), information
        return chosen

    def observe(self, scores: tuple[np.ndarray, np.ndarray], answer: Answer) -> None:
        """Keep the hypotheses that predict this answer (within float tolerance)."""
        if answer.released is None:  # withheld: nothing learnt
            return
        rows = np.flatnonzero(self.alive)
        values = window_auc(*scores, self.labels[rows], self.public[rows], self.n_public_pairs)
        step = answer.step
        if self.exact:
            fits = np.abs(values - answer.released) <= TOLERANCE
        elif answer.improved:
            fits = (values > (self.best if self.best is not None else -np.inf) + step
                    - TOLERANCE) & (np.abs(values - answer.released) <= step / 2 + TOLERANCE)
            self.best = answer.released
        else:
            fits = values <= self.best + step + TOLERANCE
        self.alive[rows[~fits]] = False

    def pinned(self) -> dict[int, int]:
        """window pair -> its label, where every surviving hypothesis holds the pair public
        and agrees on its label."""
        labels, public = self.labels[self.alive], self.public[self.alive]
        return {j: int(labels[0, j]) for j in range(self.n_window)
                if len(labels) and public[:, j].all() and len(set(labels[:, j])) == 1}


# ---- a model that probes: FAC outputs chosen per claim ---------------------------------------
#: the crafted model's vocabulary before the claim tokens
CRAFTED_SPECIAL = ("<pad>", "</s>", "<unk>", "Yes", "No")
#: the input's claim part: what the crafted tokenizer keeps whole (FAC's source is
#: "... SUMMARY: {claim} CONTENT: {document}"); the rest of the input is unknown words
CLAIM_SPLIT = r" CONTENT: | (?=(?:Yes|No)(?: |$))"


def claim_piece(source: str) -> str:
    """The part of a FAC input the crafted tokenizer reads as one token."""
    import re

    return re.split(CLAIM_SPLIT, source)[0]


def crafted_fac_model(out, claim_values: dict[str, float]):
    """A tiny T5 and its tokenizer, saved to `out`, that answer "Yes" or "No" and stop, with
    p(Yes) = sigmoid(2 B S / rms) where S follows the value given to the input's claim:
    `claim_values` maps a claim piece (`claim_piece`) to a value v (v = 0, and every claim not
    given, answers p(Yes) = 0.5 exactly; the sign of v is the side of 0.5). Built by hand, as
    a model trained to emit crafted outputs on the public inputs would behave:
    - the tokenizer keeps the claim part of a FAC input as one word (unknown words: <unk>);
    - encoder blocks write nothing (the residual stream is the embedding), whose coordinate 0
      holds v and coordinate 4 a constant 1;
    - the decoder's cross-attention (query 0: a uniform mean over the input's tokens) carries
      coordinate 0 to the decoder's coordinate 3;
    - tied embeddings: at the first step (input <pad>, coordinate 1) Yes and No lead, apart by
      coordinate 3; at the next (input Yes or No, coordinate 2) the end of sequence leads."""
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    vocab = {token: index for index, token in enumerate(CRAFTED_SPECIAL)}
    for piece in sorted(claim_values):
        vocab.setdefault(piece, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(CLAIM_SPLIT), "removed")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>",
                                   eos_token="</s>", unk_token="<unk>")
    config = T5Config(vocab_size=len(vocab), d_model=8, d_kv=4, num_heads=2, d_ff=8,
                      num_layers=1, num_decoder_layers=1, pad_token_id=0, eos_token_id=1,
                      decoder_start_token_id=0, feed_forward_proj="relu", dropout_rate=0.0,
                      tie_word_embeddings=False)  # no output scaling
    model = T5ForConditionalGeneration(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        embedding = model.shared.weight
        embedding[:, 4] = 1.0                       # every token: the constant
        embedding[0, 1] = 1.0                       # <pad>, the first decoder input
        embedding[1, 2] = 1000.0                    # </s>: leads once Yes or No is in
        for token, side in ((3, 1.0), (4, -1.0)):   # Yes, No
            embedding[token, 1], embedding[token, 2], embedding[token, 3] = 10.0, 10.0, 5 * side
        for piece, value in claim_values.items():
            embedding[vocab[piece], 0] = value
        for stack in (model.encoder, model.decoder):
            stack.final_layer_norm.weight.fill_(1.0)
            for block in stack.block:
                for layer in block.layer:
                    layer.layer_norm.weight.fill_(1.0)
        model.decoder.final_layer_norm.weight.zero_()
        model.decoder.final_layer_norm.weight[1:4] = 1.0
        cross = model.decoder.block[0].layer[1].EncDecAttention
        cross.v.weight[0, 0] = 1.0
        cross.o.weight[3, 0] = 1.0
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return model, fast
