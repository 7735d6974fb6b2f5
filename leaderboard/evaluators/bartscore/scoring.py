"""BARTScore's number, as the official `BARTScorer.score` computes it (neulab/BARTScore
`bart_score.py:30-76` at 248f511), faster with the same values.

For a (source, target) pair: both texts tokenized separately, each cut at `max_length`
tokens (BART's `<s>` and `</s>` kept); the target ids are the labels, the decoder reads them
shifted right after the decoder start token; the score is the mean log-probability of the
target's tokens, `<s>` and `</s>` included: -(sum of token NLL) / (target tokens). Padding
takes no part (the encoder's through the attention mask, the decoder's because it is causal
and comes last).

Where the official code runs each pair's encoder in its own batch of 4, in input order,
`BartScorer.log_likelihoods` runs the encoder once per distinct source text (and keeps its
states, up to `cache_tokens` tokens, for later calls: a reference scored against system
after system is encoded once), then the decoder over the distinct pairs sorted by length,
in batches that padding fills to at most a fifth (leaderboard.evaluators.batching: on a CPU a
padded position costs what a real one does); the log-softmax is taken at real target tokens
only.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from leaderboard.evaluators.batching import filled_batches
from tasks.plumbing.errors import SumbenchError

#: encoder states kept between calls, in tokens (bart-large: 4 KiB each in fp32)
CACHE_TOKENS = 65_536


class BartScorer:
    """A seq2seq model and its tokenizer scoring pairs (see the module); one per model,
    device and `max_length`."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int = 1024,
                 device: str = "cpu", cache_tokens: int = CACHE_TOKENS):
        check_seq2seq(model, tokenizer)
        self.model, self.tokenizer = model.eval().to(device), tokenizer
        self.max_length, self.device = max_length, device
        self.pad_id = int(model.config.pad_token_id)
        self.cache_tokens, self.states, self.cached = cache_tokens, {}, 0
        self.lock = threading.Lock()
        #: BART's own head, run at real target tokens only (`_token_log_probs`)
        self.output_layer_at_tokens = type(model).__name__ == "BartForConditionalGeneration"
        self.counts = {"encoder_texts": 0, "decoder_pairs": 0}

    def token_ids(self, texts: Sequence[str]) -> dict[str, list[int]]:
        """Each distinct text's ids, cut at `max_length` as the official tokenizer call."""
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        encoded = self.tokenizer(distinct, max_length=self.max_length, truncation=True)
        return dict(zip(distinct, encoded["input_ids"]))

    def log_likelihoods(self, pairs: Sequence[tuple[str, str]],
                        batch_size: int = 16) -> list[float]:
        """BARTScore of each (source, target) pair, in order."""
        import torch

        distinct = list(dict.fromkeys(pairs))
        ids = self.token_ids([text for pair in distinct for text in pair])
        values: dict[tuple[str, str], float] = {}
        with self.lock, torch.inference_mode():
            for group in self._groups(distinct, ids):
                self._encode(list(dict.fromkeys(source for source, _ in group)), ids,
                             batch_size)
                order = sorted(group, key=lambda pair: (len(ids[pair[1]]), len(ids[pair[0]])),
                               reverse=True)
                for chunk in filled_batches(order, lambda pair: (len(ids[pair[0]]),
                                                                 len(ids[pair[1]])), batch_size):
                    values.update(zip(chunk, self._decode(
                        [self.states[source] for source, _ in chunk],
                        [ids[target] for _, target in chunk])))
                self.counts["decoder_pairs"] += len(order)
        return [values[pair] for pair in pairs]

    def _groups(self, distinct: Sequence[tuple[str, str]], ids: dict[str, list[int]]):
        """The pairs in groups whose distinct sources fit in `cache_tokens` (one source
        alone may exceed it), longest sources first."""
        by_source: dict[str, list[tuple[str, str]]] = {}
        for pair in distinct:
            by_source.setdefault(pair[0], []).append(pair)
        group: list[tuple[str, str]] = []
        tokens = 0
        for source in sorted(by_source, key=lambda text: len(ids[text]), reverse=True):
            if group and tokens + len(ids[source]) > self.cache_tokens:
                yield group
                group, tokens = [], 0
            group.extend(by_source[source])
            tokens += len(ids[source])
        if group:
            yield group

    def _encode(self, sources: Sequence[str], ids: dict[str, list[int]],
                batch_size: int) -> None:
        """The encoder's states of each source not kept yet, longest first (the states of
        other sources are dropped first when they would not fit beside them)."""
        missing = sorted((source for source in sources if source not in self.states),
                         key=lambda source: len(ids[source]), reverse=True)
        needed = sum(len(ids[source]) for source in missing)
        if self.cached + needed > self.cache_tokens:
            self.states = {source: self.states[source] for source in sources
                           if source in self.states}
            self.cached = sum(state.shape[0] for state in self.states.values())
        encoder = self.model.get_encoder()
        for chunk in filled_batches(missing, lambda source: (len(ids[source]),), batch_size):
            tokens, mask = self._padded([ids[source] for source in chunk])
            states = encoder(input_ids=tokens, attention_mask=mask).last_hidden_state
            for row, source in enumerate(chunk):
                self.states[source] = states[row, :len(ids[source])]
                self.cached += len(ids[source])
        self.counts["encoder_texts"] += len(missing)

    def _padded(self, rows: Sequence[Sequence[int]]):
        """(ids padded with the pad id, attention mask) on the device."""
        import torch

        longest = max(len(row) for row in rows)
        tokens = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for index, row in enumerate(rows):
            tokens[index, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[index, :len(row)] = 1
        return tokens.to(self.device), mask.to(self.device)

    def _decode(self, states: Sequence[Any], targets: Sequence[Sequence[int]]) -> list[float]:
        """The mean log-probability of each target given its source's encoder states."""
        import torch

        longest = max(state.shape[0] for state in states)
        hidden = torch.zeros((len(states), longest, states[0].shape[-1]),
                             dtype=states[0].dtype, device=self.device)
        source_mask = torch.zeros((len(states), longest), dtype=torch.long, device=self.device)
        for row, state in enumerate(states):
            hidden[row, :state.shape[0]] = state
            source_mask[row, :state.shape[0]] = 1
        labels, target_mask = self._padded(targets)
        counted = labels != self.pad_id  # the official NLLLoss's ignore_index
        log_probs = self._token_log_probs(hidden, source_mask, labels, counted)
        rows = torch.nonzero(counted, as_tuple=True)[0]
        sums = torch.zeros(len(targets), dtype=torch.float64, device=self.device)
        sums.index_add_(0, rows, log_probs.double())  # summed in float64
        return (sums / target_mask.sum(dim=1)).tolist()

    def _token_log_probs(self, hidden: Any, source_mask: Any, labels: Any, counted: Any):
        """log P of each counted label token (row-major): for BART (whose logits are its
        output layer plus `final_logits_bias`) the output layer runs at those tokens only; for
        other models the model's whole forward gives the logits."""
        from transformers.modeling_outputs import BaseModelOutput

        model = self.model
        decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
        if self.output_layer_at_tokens:
            states = model.get_decoder()(input_ids=decoder_ids, encoder_hidden_states=hidden,
                                         encoder_attention_mask=source_mask).last_hidden_state
            logits = model.lm_head(states[counted]) + model.final_logits_bias
        else:
            logits = model(encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
                           attention_mask=source_mask, decoder_input_ids=decoder_ids).logits
            logits = logits[counted]
        return logits.float().log_softmax(-1).gather(1, labels[counted].unsqueeze(1)).squeeze(1)

    def take_counts(self) -> dict[str, int]:
        """The encoder texts and decoder pairs run since the last call, and reset them."""
        counts, self.counts = dict(self.counts), {"encoder_texts": 0, "decoder_pairs": 0}
        return counts


def check_seq2seq(model: Any, tokenizer: Any) -> None:
    """A one-line SumbenchError unless `model` is an encoder-decoder LM whose decoder input
    comes from shifted labels, and its tokenizer pads with the model's pad id."""
    config = getattr(model, "config", None)
    if not getattr(config, "is_encoder_decoder", False) or \
            not hasattr(model, "prepare_decoder_input_ids_from_labels"):
        raise SumbenchError(f"BARTScore needs a sequence-to-sequence model like BART (an "
                            f"encoder-decoder LM); got {type(model).__name__}")
    if config.pad_token_id is None or tokenizer.pad_token_id != config.pad_token_id:
        raise SumbenchError(f"BARTScore: the tokenizer pads with id {tokenizer.pad_token_id} "
                            f"and the model's pad id is {config.pad_token_id}; they must agree")
