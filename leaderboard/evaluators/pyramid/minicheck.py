"""MiniCheck's small checkers as a presence backend: premise = the summary, claim = the unit.

Registered as `minicheck` in `PRESENCE_BACKENDS` when imported. It computes what MiniCheck's
`Inferencer` computes (Liyan06/MiniCheck `minicheck/inference.py` at b58b9fa, unchanged since
00a1ed4; `minicheck.py` for the chunk sizes and the 0.5 threshold):

- the variant comes from the checkpoint's `config.model_type`: roberta (MiniCheck-RoBERTa-Large,
  512 tokens), deberta-v2 (MiniCheck-DeBERTa-v3-Large, 2048), t5 (MiniCheck-Flan-T5-Large,
  2048); any other kind is refused;
- document sentences: `nltk.sent_tokenize` (Punkt's English model, tasks.plumbing.punkt) of
  each "\\n" block, with "\\n" items between blocks; an empty document is `[""]`;
- chunks: greedy runs of whole sentences of at most `doc_chunk_size` units (Flan-T5:
  whitespace words, 500; RoBERTa/DeBERTa: tokenizer pieces without special tokens, each
  sentence truncated at the model maximum, 400), joined with " ", " \\n " turned into "\\n",
  stripped, empty chunks dropped;
- the model input is ONE string, `chunk + tokenizer.eos_token + claim` ("predict: " before it
  for Flan-T5), truncated at the model maximum (which can cut the claim's end);
- P(supported): the classifiers' softmax index 1 (2 labels); Flan-T5's first decoder step
  from id 0, softmax over the logits of ids [3, 209], index 1;
- the pair's probability is the max over its chunks; label = probability > 0.5.

Unlike `Inferencer`, which runs one pair's chunks per forward pass, every (chunk, claim) input
of a stream chunk is batched together, longest first, in batches at least 4/5 filled;
a summary is split into chunks once. Cached raw outputs are the per-chunk probabilities.
A summary with no text has no chunk: `Inferencer` then fails (it concatenates no outputs), so
it is an error here too.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderboard.evaluators.pyramid.presence import (
    PRESENCE_BACKENDS,
    PresenceBackendError,
    PresenceResult,
    pair_parts,
)
from leaderboard.evaluators.pyramid.presence_models import BatchedModelBackend
from tasks.plumbing.punkt import english_sentences
from trainers.models.model_loading import load_errors, looks_local

#: Flan-T5's label tokens: id 3 = "unsupported", id 209 = "supported" (inference.py)
T5_LABEL_IDS = (3, 209)
T5_PREFIX = "predict: "
#: the official threshold (minicheck.py: label = prob > 0.5)
THRESHOLD = 0.5
#: summaries whose chunks are kept between stream chunks (each is split once)
CHUNK_MEMO_SIZE = 4096


@dataclass(frozen=True)
class Variant:
    """One MiniCheck small model: its name, loading class, defaults and chunk unit."""
    name: str
    auto_class: str
    max_length: int
    doc_chunk_size: int
    counts_words: bool


#: config.model_type -> the MiniCheck variant built on it
VARIANTS = {
    "roberta": Variant("roberta-large", "AutoModelForSequenceClassification", 512, 400, False),
    "deberta-v2": Variant("deberta-v3-large", "AutoModelForSequenceClassification", 2048, 400,
                          False),
    "t5": Variant("flan-t5-large", "AutoModelForSeq2SeqLM", 2048, 500, True),
}


def checkpoint_config(model: Any, revision: str | None) -> Any:
    """The config of a checkpoint folder / hub id, or of a loaded model."""
    if not isinstance(model, (str, Path)):
        return model.config
    import transformers

    if looks_local(str(model)) and not Path(str(model)).expanduser().exists():
        raise PresenceBackendError(f"minicheck: model path {model} does not exist")
    try:
        return transformers.AutoConfig.from_pretrained(str(model), revision=revision)
    except load_errors() as error:
        raise PresenceBackendError(f"minicheck: cannot read the config of {str(model)!r}: "
                                   f"{str(error).splitlines()[0]}") from error


def detect_variant(config: Any, source: str = "the model") -> Variant:
    """The MiniCheck variant of a checkpoint, from its config's model_type."""
    kind = getattr(config, "model_type", None)
    if kind not in VARIANTS:
        known = ", ".join(f"{key} ({variant.name})" for key, variant in VARIANTS.items())
        raise PresenceBackendError(f"minicheck: {source} is a {kind!r} model; MiniCheck's "
                                   f"variants are {known}")
    return VARIANTS[kind]


def document_sentences(text: str) -> list[str]:
    """Inferencer's sentences: Punkt sentences of each "\\n" block, "\\n" between blocks;
    `[""]` when there are none."""
    sentences: list[str] = []
    for number, block in enumerate(text.split("\n")):
        if number:
            sentences.append("\n")
        sentences.extend(english_sentences(block))
    return sentences or [""]


def greedy_chunks(sentences: Sequence[str], sizes: Sequence[int], limit: int) -> list[str]:
    """Inferencer's chunks: whole sentences added while the running size stays <= `limit`
    (a sentence over the limit closes the chunk before it, which may be empty), joined with
    " ", " \\n " -> "\\n", stripped; empty chunks dropped."""
    runs: list[str] = []
    current: list[str] = []
    count = 0
    for sentence, size in zip(sentences, sizes):
        if count + size > limit:
            runs.append(" ".join(current))
            current, count = [sentence], size
        else:
            current.append(sentence)
            count += size
    if current:
        runs.append(" ".join(current))
    chunks = (run.replace(" \n ", "\n").strip() for run in runs)
    return [chunk for chunk in chunks if chunk]


@PRESENCE_BACKENDS.decorator()
class MiniCheckBackend(BatchedModelBackend):
    """P(the summary supports the unit) from a MiniCheck small model (see module docstring).
    `max_length` and `doc_chunk_size` default to the variant's official values."""
    name = "minicheck"

    def __init__(self, model: Any, tokenizer: Any = None, *, revision: str | None = None,
                 model_id: str | None = None, batch_size: int = 16,
                 max_length: int | None = None, doc_chunk_size: int | None = None,
                 chunk_size: int = 2048, cache: Any = None, device: str = "cpu"):
        source = str(model) if isinstance(model, (str, Path)) else "the model"
        self.variant = detect_variant(checkpoint_config(model, revision), source)
        super().__init__(model, tokenizer, self.variant.auto_class, revision=revision,
                         model_id=model_id, batch_size=batch_size, chunk_size=chunk_size,
                         cache=cache, device=device)
        self.max_length = int(max_length or self.variant.max_length)
        self.doc_chunk_size = int(doc_chunk_size or self.variant.doc_chunk_size)
        if self.max_length < 1 or self.doc_chunk_size < 1:
            raise ValueError("max_length and doc_chunk_size must be >= 1")
        self._check_model(source)
        self._chunk_memo: dict[str, list[str]] = {}

    def _check_model(self, source: str) -> None:
        if not self.tokenizer.eos_token:
            raise PresenceBackendError(f"minicheck: the tokenizer of {source} has no eos token "
                                       "(MiniCheck joins chunk + eos + claim)")
        config = self.model.config
        if self.variant.counts_words:
            size = int(config.vocab_size)
            if size <= max(T5_LABEL_IDS):
                raise PresenceBackendError(
                    f"minicheck: {source} has {size} vocabulary entries; Flan-T5 MiniCheck "
                    f"reads the logits of ids {T5_LABEL_IDS}")
        elif int(config.num_labels) != 2:
            raise PresenceBackendError(f"minicheck: {source} has {config.num_labels} labels; "
                                       "MiniCheck's classifiers have 2 (index 1 = supported)")

    def settings(self) -> str:
        return (f"variant={self.variant.name},max_length={self.max_length},"
                f"doc_chunk_size={self.doc_chunk_size}")

    # ---- chunks ---------------------------------------------------------------------------
    def sentence_sizes(self, sentences: Sequence[str]) -> list[int]:
        """Each sentence's size: whitespace words (Flan-T5) or tokenizer pieces without
        special tokens, truncated at the model maximum (RoBERTa, DeBERTa)."""
        if self.variant.counts_words:
            return [len(sentence.split()) for sentence in sentences]
        encoded = self.tokenizer(list(sentences), add_special_tokens=False, truncation=True,
                                 max_length=self.max_length)
        return [len(ids) for ids in encoded["input_ids"]]

    def document_chunks(self, document: str) -> list[str]:
        """The document's chunks, as Inferencer makes them (memoised per summary)."""
        found = self._chunk_memo.get(document)
        if found is None:
            sentences = document_sentences(document)
            found = greedy_chunks(sentences, self.sentence_sizes(sentences),
                                  self.doc_chunk_size)
            if len(self._chunk_memo) >= CHUNK_MEMO_SIZE:
                self._chunk_memo.clear()
            self._chunk_memo[document] = found
        return found

    def model_text(self, chunk: str, claim: str) -> str:
        """The one input string of a (chunk, claim)."""
        text = chunk + self.tokenizer.eos_token + claim
        return T5_PREFIX + text if self.variant.counts_words else text

    # ---- batched scoring ------------------------------------------------------------------
    def _run_distinct(self, pairs: list) -> list[tuple[list[float], PresenceResult]]:
        """Every (chunk, claim) input of `pairs`, batched across pairs by length; each
        pair's raw output is its per-chunk probabilities."""
        owners, texts = [], []
        for number, pair in enumerate(pairs):
            summary, unit, _ = pair_parts(pair)
            chunks = self.document_chunks(summary)
            if not chunks:
                raise PresenceBackendError(
                    f"minicheck: summary {summary[:40]!r} has no text to check (MiniCheck's "
                    "Inferencer fails on a document without chunks)")
            owners.extend([number] * len(chunks))
            texts.extend(self.model_text(chunk, unit) for chunk in chunks)
        raw: list[list[float]] = [[] for _ in pairs]
        for owner, value in zip(owners, self.batched_forward(self.prepare(texts))):
            raw[owner].append(value)
        return [(values, self.result(values)) for values in raw]

    def prepare(self, texts):
        encoded = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        names = [name for name in ("input_ids", "token_type_ids") if name in encoded]
        return [{name: encoded[name][i] for name in names} for i in range(len(texts))]

    def forward(self, features) -> list[float]:
        """P(supported) of each input of one batch (float32 softmax, as Inferencer)."""
        import torch

        tensors = self._tensors(features)
        if self.variant.counts_words:
            start = torch.zeros((len(features), 1), dtype=torch.long, device=self.device)
            logits = self.model(input_ids=tensors["input_ids"],
                                attention_mask=tensors["attention_mask"],
                                decoder_input_ids=start).logits.squeeze(1)
            logits = logits[:, list(T5_LABEL_IDS)]
        else:
            logits = self.model(**tensors).logits
        return torch.softmax(logits.float().cpu(), dim=-1)[:, 1].tolist()

    def result(self, raw: Sequence[float]) -> PresenceResult:
        probability = max(raw)
        return PresenceResult(probability, int(probability > THRESHOLD),
                              {"chunk_probabilities": list(raw)})
