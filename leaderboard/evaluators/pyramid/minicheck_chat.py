"""Bespoke-MiniCheck-7B as a presence backend, `minicheck-chat`: the model served behind an
OpenAI-compatible chat endpoint (e.g. `vllm serve bespokelabs/Bespoke-MiniCheck-7B`), asked as
MiniCheck's `LLMCheck` asks it (Liyan06/MiniCheck b58b9fa, `minicheck/inference.py` and
`utils.py`):

- messages: system = `SYSTEM_PROMPT`; user = `USER_PROMPT` with "[DOCUMENT]" replaced by the
  chunk, then "[CLAIM]" by the claim sentence (the server applies the model's chat template
  with the generation prompt, as `LLMCheck.apply_chat_template` does);
- temperature 0, 1 token, the top 5 log-probabilities; P(support) = the sum of exp(logprob)
  over those tokens whose text lower-cases to exactly "yes";
- the document is split as `Inferencer` splits it (tasks.plumbing.punkt sentences per "\\n"
  block), chunks of at most `max_model_len - 300` model tokens; an empty document is one
  empty chunk. The model's tokenizer is not at hand behind an endpoint, so a document of at
  most that many UTF-8 bytes (a byte-level BPE token covers at least one byte) is one chunk,
  exactly as the official code would make it; a longer one is refused;
- the claim is split by `nltk.sent_tokenize`; score = min over claim sentences of the max over
  chunks; label = score > 0.5. A claim without sentences (empty) makes the official code fail
  (it finds no result for the pair), so it is an error here.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from leaderboard.evaluators.pyramid.minicheck import THRESHOLD, document_sentences, greedy_chunks
from leaderboard.evaluators.pyramid.presence import (
    PRESENCE_BACKENDS,
    PresenceBackend,
    PresenceBackendError,
    PresenceResult,
    pair_parts,
    pair_progress,
)
from tasks.plumbing.punkt import english_sentences
from trainers.fewshot.chat_client import ChatClient, ChatError, token_alternatives

#: MiniCheck's prompts for Bespoke-MiniCheck-7B (minicheck/utils.py at b58b9fa)
SYSTEM_PROMPT = ("Determine whether the provided claim is consistent with the corresponding "
                 "document. Consistency in this context implies that all information presented "
                 "in the claim is substantiated by the document. If not, it should be "
                 "considered inconsistent. Please assess the claim's consistency with the "
                 "document by responding with either \"Yes\" or \"No\".")
USER_PROMPT = "Document: [DOCUMENT]\nClaim: [CLAIM]"
DEFAULT_MODEL = "bespokelabs/Bespoke-MiniCheck-7B"
#: LLMCheck's defaults: max_model_len 32768, of which 300 tokens are kept for the claim
MAX_MODEL_LEN = 32768
CLAIM_RESERVE = 300
#: the request LLMCheck's SamplingParams make
REQUEST_PARAMS = {"temperature": 0, "max_tokens": 1, "logprobs": True, "top_logprobs": 5}


def minicheck_messages(chunk: str, claim: str) -> list[dict]:
    """The chat messages for one (document chunk, claim sentence)."""
    user = USER_PROMPT.replace("[DOCUMENT]", chunk).replace("[CLAIM]", claim)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def support_probability(response: Any) -> float:
    """Sum of exp(logprob) over the first token's alternatives whose text lower-cases to
    "yes"; an error when the server sent no log-probabilities."""
    tokens = token_alternatives(response)
    if not tokens or not tokens[0][1]:
        raise PresenceBackendError("minicheck-chat: the server sent no log-probabilities "
                                   "(it must accept logprobs/top_logprobs, as vllm serve does)")
    return sum(math.exp(logprob) for token, logprob in tokens[0][1].items()
               if token.lower() == "yes")


@PRESENCE_BACKENDS.decorator()
class MiniCheckChatBackend(PresenceBackend):
    """P(the summary supports the unit) from Bespoke-MiniCheck-7B behind a chat endpoint."""
    name = "minicheck-chat"

    def __init__(self, client: Any = None, *, model: str = DEFAULT_MODEL,
                 base_url: str | None = None, api_key: str | None = None, cache: Any = None,
                 max_model_len: int = MAX_MODEL_LEN):
        if max_model_len <= CLAIM_RESERVE:
            raise ValueError(f"max_model_len must exceed {CLAIM_RESERVE}")
        self.client = client or ChatClient(model=model, base_url=base_url, api_key=api_key,
                                           cache=cache)
        self.chunk_tokens = int(max_model_len) - CLAIM_RESERVE

    def fingerprint(self) -> str:
        return (f"minicheck-chat:{self.client.base_url}:{self.client.model}:"
                f"chunk_tokens={self.chunk_tokens}")

    def document_chunks(self, document: str) -> list[str]:
        """LLMCheck's chunks of a document that fits one chunk (see module docstring)."""
        size = len(document.encode("utf-8"))
        if size > self.chunk_tokens:
            raise PresenceBackendError(
                f"minicheck-chat: a summary of {size} bytes may exceed {self.chunk_tokens} "
                "tokens, and the chunking needs the model's tokenizer, which an endpoint does "
                "not give")
        sentences = document_sentences(document)
        return greedy_chunks(sentences, [0] * len(sentences), self.chunk_tokens) or [""]

    def probability(self, chunk: str, sentence: str) -> float:
        try:
            response = self.client.chat(minicheck_messages(chunk, sentence), **REQUEST_PARAMS)
        except ChatError as error:
            raise PresenceBackendError(f"minicheck-chat: {error}") from error
        return support_probability(response)

    def score_one(self, summary: str, unit: str) -> PresenceResult:
        sentences = english_sentences(unit)
        if not sentences:
            raise PresenceBackendError(f"minicheck-chat: unit {unit!r} has no sentence "
                                       "(MiniCheck's LLMCheck fails on an empty claim)")
        chunks = self.document_chunks(summary)
        per_sentence = [max(self.probability(chunk, sentence) for chunk in chunks)
                        for sentence in sentences]
        score = min(per_sentence)
        return PresenceResult(score, int(score > THRESHOLD),
                              {"sentence_probabilities": per_sentence})

    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        for pair in pair_progress(pairs, self.name):
            summary, unit, _ = pair_parts(pair)
            yield self.score_one(summary, unit)
