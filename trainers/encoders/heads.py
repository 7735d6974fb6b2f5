"""The RoBERTa models of USB Table 2 (docs usb-baselines.md §3): a RoBERTa encoder
(`transformers.RobertaModel`) under one of three heads, each giving logits for a sigmoid.

- `PairClassifier` (FAC, EVEXT): the last hidden state at `<s>` (position 0) → one plain
  Linear(hidden → 1): one logit per pair. Not transformers' `RobertaClassificationHead`
  (dense → tanh → out_proj) and never its MSE loss for one label.
- `TokenTagger` (UNSUP): the same Linear on every token: one logit per token.
- `HierarchicalTagger` (EXT, "BERT-LSTM" read as the H-LSTM of Krishna et al. 2021 with RoBERTa
  as the sentence encoder): each sentence encoded alone, its vector the mean of its non-padding
  tokens' final hidden states (`pooling="cls"`: the `<s>` state), a one-layer bidirectional LSTM
  (256 per direction) over the document's sentences, Linear(512 → 1): one logit per sentence.

`bce_loss` is binary cross-entropy with logits over the positions that count. `load_encoder`
takes the encoder from a RoBERTa folder or hub id (a `RobertaModel` or `RobertaForMaskedLM`,
as published) from safetensors only; trainers.encoders.model_files keeps a fine-tuned model
with its head in a sumbench folder.

torch and transformers load only when a model is made: the classes are built on first use
(`PairClassifier` and the others are module attributes made by `__getattr__`).
"""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.models.model_loading import check_model_source, load_errors, load_failure

logger = logging.getLogger(__name__)

#: the label value of a position that does not count (transformers' ignore index)
IGNORE_LABEL = -100
#: sentence vectors of the hierarchical tagger
POOLINGS = ("mean", "cls")
#: the sentence LSTM's size per direction (H-LSTM's 256)
LSTM_SIZE = 256


def bce_loss(logits, labels, mask=None):
    """Binary cross-entropy with logits, averaged over the positions that count: every position
    of `labels` but those labelled `IGNORE_LABEL` (-100) and those where `mask` is 0/False.
    Pairs: the mean over pairs; tokens: over unmasked tokens of the whole batch; EXT (mask =
    sentence mask): over real sentences. No position counting gives 0 (with a gradient)."""
    import torch.nn.functional as F

    counted = labels != IGNORE_LABEL
    if mask is not None:
        counted = counted & mask.bool()
    targets = labels.clamp(min=0).to(logits.dtype)
    losses = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    weights = counted.to(logits.dtype)
    return (losses * weights).sum() / weights.sum().clamp(min=1.0)


def build_random_encoder(config, seed: int):
    """A `RobertaModel` (no pooler) randomly initialised from `config` by `seed`, leaving the
    global random state as it was (tests, demos)."""
    import torch
    from transformers import RobertaModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RobertaModel(config, add_pooling_layer=False)


def load_encoder(folder_or_id: str, revision: str | None = None):
    """The `RobertaModel` (no pooler) of a RoBERTa folder or hub id: saved as a `RobertaModel`
    or as published (`RobertaForMaskedLM`, whose `roberta` submodule it is). Weights from
    safetensors only; any other model type, or an encoder weight missing from the files, is a
    one-line SumbenchError."""
    from transformers import AutoConfig, RobertaModel

    name = str(folder_or_id)
    check_model_source(name, "encoder")
    try:
        config = AutoConfig.from_pretrained(name, revision=revision)
    except load_errors() as error:
        raise load_failure(name, error, "encoder") from None
    if config.model_type != "roberta":
        kinds = ", ".join(config.architectures or []) or "no architecture named"
        raise SumbenchError(f"encoder {name} is a {config.model_type} model ({kinds}), not a "
                            f"RoBERTa one (model_type 'roberta')")
    try:
        with _without_load_report():
            encoder, info = RobertaModel.from_pretrained(
                name, revision=revision, config=config, use_safetensors=True,
                add_pooling_layer=False, output_loading_info=True)
    except load_errors() as error:
        raise load_failure(name, error, "encoder") from None
    wrong = sorted(info["missing_keys"]) + sorted(str(key) for key in info["mismatched_keys"])
    if wrong:
        raise SumbenchError(f"encoder {name}: {len(wrong)} encoder weights are missing from its "
                            f"files or have other shapes (first: {wrong[0]})")
    other = sorted(key for key in info["unexpected_keys"] if not key.startswith(OTHER_HEADS))
    if other:
        logger.warning("encoder %s: %d weights in its files are not the encoder's and are left "
                       "out (first: %s)", name, len(other), other[0])
    return encoder


#: weights a published RoBERTa holds beside the encoder (RobertaForMaskedLM's language-model
#: head, a pooler): left out as expected, without transformers' load report about them
OTHER_HEADS = ("lm_head.", "pooler.")


@contextlib.contextmanager
def _without_load_report():
    """transformers' load report left out while an encoder loads (`load_encoder` judges the
    keys itself: missing or reshaped ones are an error, others than OTHER_HEADS a warning)."""
    class NoLoadReport(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "LOAD REPORT" not in str(record.msg)

    modeling = logging.getLogger("transformers.modeling_utils")
    drop = NoLoadReport()
    modeling.addFilter(drop)
    try:
        yield
    finally:
        modeling.removeFilter(drop)


def _init_linear(linear, std: float, generator) -> None:
    """transformers' init of a Linear (normal(0, std) weights, zero bias), from `generator`."""
    import torch

    with torch.no_grad():
        linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator) * std)
        linear.bias.zero_()


def _init_lstm(lstm, generator) -> None:
    """torch's init of an LSTM (uniform ±1/√hidden for every parameter), from `generator`."""
    import torch

    bound = lstm.hidden_size ** -0.5
    with torch.no_grad():
        for parameter in lstm.parameters():
            values = torch.rand(parameter.shape, generator=generator) * 2 * bound - bound
            parameter.copy_(values)


def _uninitialised(module_class, *args, **kwargs):
    """A module made without drawing from the global random state (its values set after)."""
    return module_class(*args, device="meta", **kwargs).to_empty(device="cpu")


def _logit_head(encoder, size: int, seed: int):
    """Linear(size → 1) initialised as the encoder's own layers are, from `seed`."""
    import torch
    from torch import nn

    linear = _uninitialised(nn.Linear, size, 1)
    _init_linear(linear, encoder.config.initializer_range, torch.Generator().manual_seed(seed))
    return linear


@functools.cache
def _pair_classifier():
    from torch import nn

    class PairClassifier(nn.Module):
        """encoder → last hidden state at `<s>` → Linear(hidden → 1): a logit per pair."""
        kind = "PairClassifier"

        def __init__(self, encoder, seed: int = 0):
            super().__init__()
            self.encoder = encoder
            self.head = _logit_head(encoder, encoder.config.hidden_size, seed)

        def options(self) -> dict[str, Any]:
            return {}

        def scored_states(self, hidden):
            """The hidden states the head reads: `<s>`'s."""
            return hidden[:, 0]

        def forward(self, input_ids, attention_mask):
            hidden = self.encoder(input_ids=input_ids,
                                  attention_mask=attention_mask).last_hidden_state
            return self.head(self.scored_states(hidden)).squeeze(-1)

    return _named(PairClassifier)


@functools.cache
def _token_tagger():
    class TokenTagger(_pair_classifier()):
        """encoder → Linear(hidden → 1) on every token's last hidden state: a logit per token
        (padding positions get one too; `bce_loss` leaves them out)."""
        kind = "TokenTagger"

        def scored_states(self, hidden):
            return hidden

    return _named(TokenTagger)


#: sentences encoded at once by the hierarchical tagger: at most this many padded tokens, and
#: a chunk closes where the next sentence is more than CHUNK_GROWTH times its shortest
CHUNK_TOKENS, CHUNK_GROWTH = 8192, 1.25


def length_chunks(sorted_lengths: list[int], max_tokens: int = CHUNK_TOKENS,
                  growth: float = CHUNK_GROWTH) -> list[slice]:
    """Slices of ascending lengths into chunks of similar length: a chunk closes before the
    next length would take its padded size past `max_tokens` or exceed `growth` times its
    first length (padding stays small wherever lengths spread)."""
    chunks, start = [], 0
    for index, length in enumerate(sorted_lengths):
        first = sorted_lengths[start]
        if index > start and ((index - start + 1) * length > max_tokens or
                              length > growth * max(first, 1)):
            chunks.append(slice(start, index))
            start = index
    if sorted_lengths:
        chunks.append(slice(start, len(sorted_lengths)))
    return chunks


def pool_sentences(hidden, attention_mask, pooling: str = "mean"):
    """Sentence vectors (sentences, hidden) from final hidden states (sentences, tokens,
    hidden): the mean over each sentence's non-padding tokens, or the `<s>` state ("cls")."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling != "mean":
        raise SumbenchError(f"unknown sentence pooling {pooling!r}; choose one of {POOLINGS}")
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def sentence_lengths(sentence_mask):
    """Real sentences per document; the mask must mark a prefix of each document's rows and
    every document must have a sentence."""
    import torch

    lengths = sentence_mask.long().sum(1)
    positions = torch.arange(sentence_mask.shape[1], device=sentence_mask.device)
    if not torch.equal(sentence_mask.bool(), positions[None, :] < lengths[:, None]) or \
            bool((lengths == 0).any()):
        raise SumbenchError("sentence_mask must mark each document's first sentences (at "
                            "least one), padding sentences after them")
    return lengths


@functools.cache
def _hierarchical_tagger():
    import torch
    from torch import nn

    class HierarchicalTagger(nn.Module):
        """Each sentence encoded alone → pooled → bidirectional LSTM over a document's
        sentences → Linear(2·lstm_size → 1): a logit per sentence. Inputs are (documents,
        sentences, tokens) with a (documents, sentences) sentence mask; padding sentences are
        not encoded, and their logits mean nothing."""
        kind = "HierarchicalTagger"

        def __init__(self, encoder, seed: int = 0, pooling: str = "mean",
                     lstm_size: int = LSTM_SIZE):
            super().__init__()
            if pooling not in POOLINGS:
                raise SumbenchError(f"unknown sentence pooling {pooling!r}; choose one of "
                                    f"{POOLINGS}")
            self.encoder, self.pooling, self.lstm_size = encoder, pooling, lstm_size
            generator = torch.Generator().manual_seed(seed)
            self.lstm = _uninitialised(nn.LSTM, encoder.config.hidden_size, lstm_size,
                                       num_layers=1, batch_first=True, bidirectional=True)
            _init_lstm(self.lstm, generator)
            self.head = _uninitialised(nn.Linear, 2 * lstm_size, 1)
            _init_linear(self.head, encoder.config.initializer_range, generator)

        def options(self) -> dict[str, Any]:
            return {"pooling": self.pooling, "lstm_size": self.lstm_size}

        def sentence_vectors(self, input_ids, attention_mask):
            """(sentences, hidden) vectors of sentences given as (sentences, tokens), encoded
            shortest to longest in chunks of similar length, each cut to its own longest
            sentence (a sentence's vector does not depend on its padding)."""
            lengths = attention_mask.sum(-1)
            order = torch.argsort(lengths, stable=True)
            vectors = []
            for chunk in length_chunks(lengths[order].tolist()):
                rows = order[chunk]
                width = int(lengths[rows].max())
                mask = attention_mask[rows, :width]
                hidden = self.encoder(input_ids=input_ids[rows, :width],
                                      attention_mask=mask).last_hidden_state
                vectors.append(pool_sentences(hidden, mask, self.pooling))
            pooled = torch.cat(vectors)
            return pooled[torch.argsort(order)]

        def forward(self, input_ids, attention_mask, sentence_mask):
            lengths = sentence_lengths(sentence_mask)
            real = sentence_mask.bool()
            vectors = self.sentence_vectors(input_ids[real], attention_mask[real])
            documents = vectors.new_zeros(*real.shape, vectors.shape[-1])
            documents[real] = vectors
            packed = nn.utils.rnn.pack_padded_sequence(documents, lengths.cpu(),
                                                       batch_first=True, enforce_sorted=False)
            states, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True,
                                                         total_length=real.shape[1])
            return self.head(states).squeeze(-1)

    return _named(HierarchicalTagger)


def _named(cls):
    """A class made in a factory, named as this module's attribute (so pickle finds it)."""
    cls.__qualname__ = cls.__name__
    cls.__module__ = __name__
    return cls


_FACTORIES = {"PairClassifier": _pair_classifier, "TokenTagger": _token_tagger,
              "HierarchicalTagger": _hierarchical_tagger}
#: the model of each task (release folder)
TASK_MODELS = {"factuality_classification": "PairClassifier",
               "evidence_extraction": "PairClassifier",
               "unsupported_span_prediction": "TokenTagger",
               "extractive_summarization": "HierarchicalTagger"}


def model_class(kind: str):
    """The class named `kind` ("PairClassifier", "TokenTagger" or "HierarchicalTagger")."""
    if kind not in _FACTORIES:
        raise SumbenchError(f"unknown encoder model {kind!r}; choose one of "
                            f"{', '.join(_FACTORIES)}")
    return _FACTORIES[kind]()


def __getattr__(name: str):
    if name in _FACTORIES:
        return _FACTORIES[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
