"""BERTScore's contextual embeddings as bert-score 0.3.13 computes them: the model and its
tokenizer loaded from a hub id or folder, the layers above `layer` dropped (`get_model`), each
text stripped and encoded with its special tokens, truncated to the model's length
(`sent_encode`), RoBERTa's and GPT-2's with a prefix space, and the layer's output of every
piece, L2-normalised (`greedy_cos_idf` normalises before matching).

The prefix space: bert-score passes `add_prefix_space=True` when it encodes, and transformers
5 ignores that argument (its tokenizers take the setting when they are built), so the official
package under transformers 5 encodes "Hello world" as `Hello Ġworld` again, the 0.3.12 bug
(bert-score issue #147). Here the stripped text is encoded with one leading space, which
byte-level BPE reads exactly as the prefix space: `ĠHello Ġworld`, whatever the saved
tokenizer says.

`Encoder.embed` computes the texts it has not seen (deduplicated, longest first, at most
`batch_size` a batch, at least 4/5 of each padded batch pieces, each batch padded to its
longest with the attention mask) and keeps each text's pieces in `EmbeddingCache` (least
recently used first out, at most `cache_bytes`), so a meta-evaluation that scores system
after system against the same references embeds them once.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leaderboard.evaluators.batching import filled_batches
from tasks.plumbing.errors import SumbenchError
from trainers.models.disk_cache import model_revision

#: bert-score's model for English (`lang="en"`) and its layer (bert_score/utils.py:32, 47)
DEFAULT_MODEL, DEFAULT_LAYER = "roberta-large", 17
#: what the embeddings of the texts seen may take in memory (about 1,300 REALSumm texts at
#: roberta-large's 1,024 floats a piece)
CACHE_BYTES = 512 * 2**20
#: a tokenizer's model_max_length above this means "not set" (transformers' 1e30 default)
UNSET_LENGTH = 10**6


def default_layer(name: str) -> int | None:
    """The layer bert-score reads for a model it knows by name (None for others)."""
    if name == DEFAULT_MODEL:
        return DEFAULT_LAYER
    try:
        from bert_score.utils import model2layers
    except ImportError:
        return None
    return model2layers.get(name)


def takes_prefix_space(tokenizer: Any) -> bool:
    """bert-score's test (`sent_encode`): GPT-2's and RoBERTa's tokenizers get a prefix space."""
    from transformers import GPT2Tokenizer, RobertaTokenizer

    return isinstance(tokenizer, (GPT2Tokenizer, RobertaTokenizer))


@dataclass(frozen=True)
class Pieces:
    """One text's word pieces: ids (special tokens included) and each piece's weight (0 for
    CLS and SEP, 1 for the others: bert-score without idf)."""
    ids: tuple[int, ...]
    weights: tuple[float, ...]


class EmbeddingCache:
    """text -> (its normalised piece embeddings, its pieces' weights), least recently used
    first out once the embeddings take more than `limit` bytes."""

    def __init__(self, limit: int = CACHE_BYTES):
        self.limit, self.size, self.values = limit, 0, OrderedDict()

    def get(self, text: str):
        found = self.values.get(text)
        if found is not None:
            self.values.move_to_end(text)
        return found

    def put(self, text: str, embedding, weights: Sequence[float]):
        """Keep `text`'s embedding and weights; returns them as kept."""
        import torch

        if text in self.values:
            return self.values[text]
        value = (embedding, torch.tensor(weights, dtype=torch.float32))
        self.values[text] = value
        self.size += embedding.numel() * embedding.element_size()
        while self.size > self.limit and len(self.values) > 1:
            _, (dropped, _) = self.values.popitem(last=False)
            self.size -= dropped.numel() * dropped.element_size()
        return value


def _layer_list(model: Any) -> tuple[Any, str] | None:
    """The module holding an encoder's layers and the attribute name (bert-score's cases)."""
    for holder in (getattr(model, "encoder", None), getattr(model, "transformer", None)):
        if holder is not None and hasattr(holder, "layer"):
            return holder, "layer"
    return None


def _check_encoder(name: str, config: Any) -> None:
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False):
        kind = "an encoder-decoder" if config.is_encoder_decoder else "a decoder"
        raise SumbenchError(f"the BERTScore model {name!r} is {kind} checkpoint "
                            f"({config.model_type}), not an encoder such as BERT or RoBERTa")


def load_encoder_model(name: str, layer: int, device: str):
    """The encoder of `name` (hub id or folder) with the layers above `layer` dropped, in eval
    mode on `device`; a SumbenchError naming it when it cannot load or is not an encoder."""
    import torch
    from transformers import AutoConfig, AutoModel

    try:
        config = AutoConfig.from_pretrained(name)
        _check_encoder(name, config)
        model = AutoModel.from_pretrained(name)
    except (OSError, ValueError, KeyError) as error:
        message = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        raise SumbenchError(f"the BERTScore model {name!r} cannot be loaded: {message}") from None
    found = _layer_list(model)
    if found is None:
        raise SumbenchError(f"the BERTScore model {name!r} ({config.model_type}) is not an "
                            f"encoder with layers bert-score can cut (BERT, RoBERTa, ...)")
    holder, attribute = found
    layers = getattr(holder, attribute)
    if not 0 <= layer <= len(layers):
        raise SumbenchError(f"BERTScore layer {layer} is out of range for {name!r}: it has "
                            f"{len(layers)} layers")
    setattr(holder, attribute, torch.nn.ModuleList(list(layers)[:layer]))
    return model.eval().to(device)


def _max_pieces(tokenizer: Any, model: Any) -> int:
    """bert-score truncates to the tokenizer's model_max_length; where the tokenizer does not
    say (the official code then fails on a long text), the model's positions."""
    if tokenizer.model_max_length < UNSET_LENGTH:
        return int(tokenizer.model_max_length)
    config = model.config
    positions = getattr(config, "max_position_embeddings", None) or UNSET_LENGTH
    offset = (config.pad_token_id or 0) + 1 if config.model_type in (
        "roberta", "xlm-roberta", "camembert") else 0
    return int(positions) - offset


class Encoder:
    """A loaded BERTScore model: `pieces(text)` and `embed(texts)` (see the module)."""

    def __init__(self, model: Any, tokenizer: Any, *, cache_bytes: int = CACHE_BYTES,
                 revision: str = ""):
        self.model, self.tokenizer, self.revision = model, tokenizer, revision
        self.lock = threading.Lock()  # one embed at a time: the cache is shared
        self.prefix = " " if takes_prefix_space(tokenizer) else ""
        self.max_pieces = _max_pieces(tokenizer, model)
        self.unweighted = {tokenizer.cls_token_id, tokenizer.sep_token_id}
        self.cache = EmbeddingCache(cache_bytes)
        self.embedded = 0  # texts run through the model (the cost counts them)

    def pieces(self, text: str) -> Pieces:
        """The pieces of `text` (stripped; one that is empty has none: the caller scores 0)."""
        stripped = text.strip()
        if not stripped:
            return Pieces((), ())
        ids = self.tokenizer.encode(self.prefix + stripped, add_special_tokens=True,
                                    max_length=self.max_pieces, truncation=True)
        return Pieces(tuple(ids), tuple(0.0 if i in self.unweighted else 1.0 for i in ids))

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> dict[str, Any]:
        """text -> (its [pieces x hidden] normalised embeddings, its pieces' weights), float32
        tensors on the CPU, for each non-empty text of `texts` (stripped); the unseen ones
        are computed in batches of `batch_size`, longest first."""
        with self.lock:
            return self._embed(texts, batch_size)

    def _embed(self, texts: Sequence[str], batch_size: int) -> dict[str, Any]:
        wanted = {text.strip() for text in texts if text.strip()}
        found = {text: self.cache.get(text) for text in wanted}
        missing = [(text, self.pieces(text)) for text, value in found.items() if value is None]
        missing.sort(key=lambda item: (-len(item[1].ids), item[0]))
        for batch in filled_batches(missing, lambda item: (len(item[1].ids),), batch_size):
            for (text, pieces), embedding in zip(batch, self._run([p for _, p in batch])):
                found[text] = self.cache.put(text, embedding, pieces.weights)
        self.embedded += len(missing)
        return found

    def _run(self, batch: Sequence[Pieces]) -> list[Any]:
        import torch

        longest = max(len(pieces.ids) for pieces in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        device = next(self.model.parameters()).device
        tokens = torch.full((len(batch), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, pieces in enumerate(batch):
            tokens[row, :len(pieces.ids)] = torch.tensor(pieces.ids)
            mask[row, :len(pieces.ids)] = 1
        with torch.inference_mode():
            hidden = self.model(tokens.to(device), attention_mask=mask.to(device))[0].float()
            hidden = (hidden / hidden.norm(dim=-1, keepdim=True)).cpu()
        return [hidden[row, :len(pieces.ids)].clone() for row, pieces in enumerate(batch)]


def load_encoder(name: str, layer: int, *, device: str = "cpu",
                 cache_bytes: int = CACHE_BYTES) -> Encoder:
    """The Encoder of `name` at `layer` (tokenizer as bert-score loads it), with its revision
    (the model's and the layer) for the settings."""
    from transformers import AutoTokenizer

    model = load_encoder_model(name, layer, device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError, KeyError) as error:
        message = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        raise SumbenchError(f"the tokenizer of the BERTScore model {name!r} cannot be "
                            f"loaded: {message}") from None
    return Encoder(model, tokenizer, cache_bytes=cache_bytes,
                   revision=f"{model_revision(name, model)}@layer{layer}")
