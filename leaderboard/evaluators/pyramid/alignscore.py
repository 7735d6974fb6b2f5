"""`alignscore`: AlignScore as a presence backend (premise = the system summary, claim = the
unit), as the fork `alignscore-speedofmagic==0.1.4` (= yuh-zha/AlignScore a0936d5 with two
loading fixes) computes `AlignScore(...).score` in its default `nli_sp` mode.

- Premise chunks (`premise_chunks`): Punkt sentences (`nltk.sent_tokenize`, offline through
  tasks.plumbing.punkt; an empty premise is one empty sentence); n = words // 350 + 1 chunks
  wanted, max(#sentences // n, 1) sentences per chunk, consecutive groups joined by " ". A
  premise under 350 words is one chunk.
- Claim sentences (`claim_sentences`): `split` (default, the official behaviour) = Punkt
  sentences, so a "question? answer" QA is two claims; `whole` = the unit as one claim
  (stripped). A unit with no sentence (empty or blank) is an error: the official code fails
  on it (it concatenates no batches).
- Each (chunk, claim sentence) is one tokenizer pair truncated `only_first` at
  `tokenizer.model_max_length` (512 for roberta-*; `pair_max_length`); a pair whose claim
  alone is too long is truncated longest-first, as the official retry does. The official
  code retries its whole mini-batch (32 rows) that way, so the other rows of that batch
  change too; here each row is tokenized on its own (batch-independent; it differs only for
  a unit with one sentence over 509 tokens and another over ~255: an official batch holds
  the rows of one pair).
- Value: softmax of `tri_layer` on `pooler_output`, column 0 (aligned) per row; per pair the
  mean over claim sentences of the max over chunks; label = probability > 0.5 (the paper
  gives no threshold); `details["sentence_scores"]` holds the per-sentence maxima.

Speed, with the same values: the rows of a chunk of pairs are pooled, each distinct row run
once, sorted by length and padded per batch to its longest row (the official pads every row
to 512 and runs each pair's rows on their own), and the unused heads are not computed. Cache
(per pair: the per-sentence maxima), batching and `device` are BatchedModelBackend's.

Options: `model` = the `.ckpt` (or a loaded module with `tokenizer`), `base_model` = the
folder or hub id of its base model's config and tokenizer (default: the checkpoint's
`hyper_parameters["model"]`), `claim_sentences`, `batch_size` (32, the official default),
`chunk_size`, `cache`, `device`.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leaderboard.evaluators.pyramid.alignscore_checkpoint import (
    base_model_name,
    build_model,
    pair_max_length,
    read_checkpoint,
)
from leaderboard.evaluators.pyramid.presence import (
    PRESENCE_BACKENDS,
    PresenceBackendError,
    PresenceResult,
    pair_parts,
)
from leaderboard.evaluators.pyramid.presence_models import BatchedModelBackend
from tasks.plumbing.errors import check_choice
from tasks.plumbing.punkt import english_sentences
from trainers.models.model_loading import load_errors

CHUNK_WORDS = 350
CLAIM_SENTENCES = ("split", "whole")
THRESHOLD = 0.5


def premise_chunks(premise: str) -> list[str]:
    """The official premise chunks: groups of consecutive Punkt sentences joined by " "."""
    sentences = english_sentences(premise) or [""]
    wanted = len(premise.strip().split()) // CHUNK_WORDS + 1
    per_chunk = max(len(sentences) // wanted, 1)
    return [" ".join(sentences[start:start + per_chunk])
            for start in range(0, len(sentences), per_chunk)]


def claim_sentences(claim: str, how: str = "split") -> list[str]:
    """The claims scored for one unit: its Punkt sentences (`split`) or the unit (`whole`)."""
    sentences = english_sentences(claim) if how == "split" else [claim.strip()]
    sentences = [sentence for sentence in sentences if sentence]
    if not sentences:
        raise PresenceBackendError(f"alignscore: the unit {claim!r} has no sentence to score "
                                   "(an empty claim; the official code fails on it)")
    return sentences


def _load_base(name: str):
    """(config, tokenizer) of the base model (a folder or hub id)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    except load_errors() as error:
        raise PresenceBackendError(f"cannot load the AlignScore base model {name!r}: "
                                   f"{str(error).splitlines()[0]}") from error
    return config, tokenizer


def load_alignscore(checkpoint: str | Path, base_model: str | None = None):
    """(model, tokenizer, base model name) of a checkpoint, read weights-only."""
    state, hyper = read_checkpoint(checkpoint)
    name = base_model_name(checkpoint, hyper, base_model)
    config, tokenizer = _load_base(name)
    return build_model(checkpoint, state, config), tokenizer, name


def tokenizer_digest(tokenizer: Any) -> str:
    """16 hex digits naming what the tokenizer does: a fast tokenizer's JSON without its
    per-call truncation and padding state, else its class and name."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        text = json.dumps({k: v for k, v in spec.items() if k not in ("truncation", "padding")},
                          sort_keys=True)
    else:
        text = f"{type(tokenizer).__name__}:{getattr(tokenizer, 'name_or_path', '')}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@PRESENCE_BACKENDS.decorator()
class AlignScoreBackend(BatchedModelBackend):
    name = "alignscore"

    def __init__(self, model: Any, tokenizer: Any = None, *, base_model: str | None = None,
                 claim_sentences: str = "split", revision: str | None = None,
                 model_id: str | None = None, batch_size: int = 32, chunk_size: int = 2048,
                 cache: Any = None, device: str = "cpu"):
        self.claims = check_choice(claim_sentences, CLAIM_SENTENCES, "claim_sentences")
        self.base_name = base_model
        if isinstance(model, (str, Path)):
            model_id = model_id or str(model)
            model, tokenizer, self.base_name = load_alignscore(model, base_model)
        elif tokenizer is None:
            raise PresenceBackendError("a loaded AlignScore model needs its tokenizer "
                                       "(tokenizer=...)")
        super().__init__(model, tokenizer, "", revision=revision, model_id=model_id,
                         batch_size=int(batch_size), chunk_size=int(chunk_size), cache=cache,
                         device=device)  # int(): a board column's options are text
        self.max_length = pair_max_length(self.tokenizer, self.model.config)
        self.tokenizer_id = tokenizer_digest(self.tokenizer)

    def settings(self) -> str:
        return (f"base={self.base_name},tokenizer={self.tokenizer_id},"
                f"max_length={self.max_length},claims={self.claims}")

    def plan(self, pair: Sequence[str], chunked: dict[str, list[str]] | None = None
             ) -> tuple[list[str], list[str]]:
        """(premise chunks, claim sentences) of one (summary, unit) pair; `chunked` keeps
        each summary's chunks (a summary comes with every unit of its example)."""
        summary, unit, _ = pair_parts(pair)
        chunked = {} if chunked is None else chunked
        if summary not in chunked:
            chunked[summary] = premise_chunks(summary)
        return chunked[summary], claim_sentences(unit, self.claims)

    def _run_distinct(self, pairs: list) -> list[tuple[list[float], PresenceResult]]:
        """Every pair's (chunk, sentence) rows pooled, each distinct row scored once; per
        pair the per-sentence maxima over chunks."""
        chunked: dict[str, list[str]] = {}
        plans = [self.plan(pair, chunked) for pair in pairs]
        rows: dict[tuple[str, str], int] = {}
        for chunks, sentences in plans:
            for chunk in chunks:
                for sentence in sentences:
                    rows.setdefault((chunk, sentence), len(rows))
        aligned = self.row_probabilities(list(rows))
        outputs = []
        for chunks, sentences in plans:
            maxima = [max(aligned[rows[chunk, sentence]] for chunk in chunks)
                      for sentence in sentences]
            outputs.append((maxima, self.result(maxima)))
        return outputs

    def row_probabilities(self, rows: list[tuple[str, str]]) -> list[float]:
        """The aligned probability of each (chunk, sentence) row: longest first, in batches
        of at most `batch_size` at least 4/5 filled, each padded to its longest row."""
        return [float(value) for value in self.batched_forward(self.prepare(rows))]

    def _encode(self, chunk: str, sentence: str) -> list[int]:
        """One pair's ids: the chunk cut (`only_first`), else longest-first."""
        try:
            ids = self.tokenizer(chunk, sentence, truncation="only_first",
                                 max_length=self.max_length)["input_ids"]
        except Exception:  # the fast tokenizer refuses a claim that alone is too long
            ids = None
        if ids is None or len(ids) > self.max_length:
            ids = self.tokenizer(chunk, sentence, truncation=True,
                                 max_length=self.max_length)["input_ids"]
        return list(ids)

    def prepare(self, rows):
        try:  # the common case in one call; a batch with a too-long claim goes pair by pair
            encoded = self.tokenizer([c for c, _ in rows], [s for _, s in rows],
                                     truncation="only_first", max_length=self.max_length)
            ids = encoded["input_ids"]
        except Exception:
            ids = [None] * len(rows)
        return [{"input_ids": list(row_ids)} if row_ids is not None
                and len(row_ids) <= self.max_length else {"input_ids": self._encode(*row)}
                for row, row_ids in zip(rows, ids)]

    def forward(self, features):
        tensors = self._tensors(features)
        return self.model(tensors["input_ids"], tensors["attention_mask"]).float().tolist()

    def result(self, raw):
        probability = float(sum(raw) / len(raw))
        return PresenceResult(probability, int(probability > THRESHOLD),
                              {"sentence_scores": [float(value) for value in raw]})
