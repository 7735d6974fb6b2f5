"""Generation backends for few-shot prompting, each with an on-disk response cache.

- `CausalLMBackend`: a Hugging Face decoder-only model; prompts left-padded in batches,
  greedy decoding of the continuation only, stopped at EOS or at a stop string.
- `Seq2SeqBackend`: a Hugging Face encoder-decoder model (e.g. Flan-T5), greedy decoding.
- `ChatBackend` (`trainers.fewshot.chat_backend`): an OpenAI-compatible server.

HF responses are cached under a key of (backend fingerprint, prompt text, max_new_tokens,
stops, and whether label probabilities were asked for): a repeated request never runs the model.
Asked with `label_probabilities=True`, an HF backend also records, at each generated "Yes" or "No"
token (trainers.inference.label_tokens: the tokens of the label words), P(Yes) / (P(Yes) + P(No))
from that step's distribution, and returns `ScoredText` whose `yes_probabilities` are {character
offset of the word in the returned text: probability}; its cached outputs keep them (and answer
a later plain request for the same prompt).

HF backends know their model's context (`context_window`: `max_position_embeddings` /
`n_positions` of its config, None when it has neither, e.g. T5's relative positions) and how
long a prompt may be (`prompt_room`); a prompt that does not fit, or any failure of the model,
is a `BackendError` naming the prompts at fault (their positions in the `generate` call), never
a bare IndexError from a position table. Greedy decoding makes each row independent of its batch
companions (padding is masked), and each row is cut at its own token cap and stop strings, so
outputs do not depend on the batch size or on the order of prompts.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.chat_backend import ChatBackend, chat_backend, whitespace_token_count
from trainers.fewshot.chat_client import ScoredText
from trainers.fewshot.prompts import Prompt
from trainers.inference.label_tokens import YesNoRecorder, label_offsets, label_token_ids
from trainers.inference.prediction_io import model_fingerprint
from trainers.models.disk_cache import DiskCache, cache_key, hub_commit, open_cache
from trainers.models.model_loading import check_model_source, load_errors, load_failure

#: the chat backend's names, importable from here as before it had a module of its own
__all__ = ["BackendError", "CausalLMBackend", "ChatBackend", "HFBackend", "Seq2SeqBackend",
           "chat_backend", "context_positions", "cut_at_stops", "load_hf_backend",
           "whitespace_token_count"]


class BackendError(SumbenchError):
    """A backend could not answer some prompts: `indices` are their positions in the
    `generate` call that failed."""

    def __init__(self, message: str, indices: Sequence[int] = ()):
        super().__init__(message)
        self.indices = tuple(int(i) for i in indices)


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """`text` up to the first occurrence of any stop string."""
    cut = len(text)
    for stop in stops:
        position = text.find(stop)
        if position >= 0:
            cut = min(cut, position)
    return text[:cut]


def context_positions(config) -> int | None:
    """A model's number of (absolute) positions from its config, None when it sets no limit
    (T5's relative positions)."""
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class _StopOnStrings:
    """A stopping criterion: row r is done once its continuation holds one of `stops[r]`
    (the last `tail` tokens are decoded at each step, enough for short stop strings)."""

    def __init__(self, tokenizer, stops: Sequence[Sequence[str]], start: int, tail: int = 24):
        self.tokenizer, self.stops, self.start, self.tail = tokenizer, list(stops), start, tail

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        begin = max(self.start, input_ids.shape[1] - self.tail)
        tails = self.tokenizer.batch_decode(input_ids[:, begin:], skip_special_tokens=True)
        done = [any(stop in text for stop in row_stops)
                for text, row_stops in zip(tails, self.stops)]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class HFBackend:
    """Shared machinery of the Hugging Face backends: cache, batching, fingerprint."""

    kind = "text"
    model_type = "hf"
    #: `generate(..., label_probabilities=True)` records p(Yes) at generated Yes/No tokens
    reads_label_probabilities = True
    #: whether generated tokens share the prompt's positions (decoder-only models)
    output_in_context = False

    def __init__(self, model, tokenizer, *, cache: DiskCache | str | None = None,
                 batch_size: int = 8, info: dict | None = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.cache = open_cache(cache)
        self.batch_size = max(1, int(batch_size))
        self.info = info or {}
        self.generated = 0  # prompts run through the model (cache misses)
        self._fingerprint: dict | None = None

    def fingerprint(self) -> dict:
        """The backend type and its model's content fingerprint (weights, config, tokenizer;
        trainers.inference.prediction_io.model_fingerprint), computed once: the response cache key
        and
        the few-shot run fingerprint. Where the model came from (`info`) is not part of it,
        so a model folder moved or copied keeps its cached responses and finished runs."""
        if self._fingerprint is None:
            self._fingerprint = {"type": self.model_type,
                                 "model": model_fingerprint(self.model, self.tokenizer)}
        return self._fingerprint

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def context_window(self) -> int | None:
        """The model's number of positions, None when its config sets no limit."""
        return context_positions(self.model.config)

    def prompt_room(self, max_new_tokens: int) -> int | None:
        """The longest prompt (in `count_tokens` tokens) that fits the context with
        `max_new_tokens` of output (decoder-only) and the tokenizer's special tokens."""
        context = self.context_window()
        if context is None:
            return None
        output = int(max_new_tokens) if self.output_in_context else 0
        return context - output - len(self.encode(""))

    def _check_room(self, encoded: dict[int, list[int]], caps: Sequence[int]) -> None:
        context = self.context_window()
        if context is None:
            return
        for index, ids in sorted(encoded.items()):
            output = int(caps[index]) if self.output_in_context else 0
            if len(ids) + output > context:
                extra = f" + {output} new tokens" if self.output_in_context else ""
                raise BackendError(f"the prompt has {len(ids)} tokens{extra}, more than the "
                                   f"{context} positions of the model", [index])

    def _key(self, prompt: Prompt, max_new_tokens: int, label_probabilities: bool = False) -> str:
        extra = [{"label_probabilities": True}] if label_probabilities else []
        return cache_key("fewshot", self.fingerprint(), prompt.text, int(max_new_tokens),
                         list(prompt.stops), *extra)

    def generate(self, prompts: Sequence[Prompt], max_new_tokens: Sequence[int], *,
                 label_probabilities: bool = False) -> list[str]:
        """The continuation of each prompt (cached ones from the cache), in input order; with
        `label_probabilities`, `ScoredText` with p(Yes) at its Yes/No words (module docstring)."""
        keys = [self._key(p, n, label_probabilities) for p, n in zip(prompts, max_new_tokens)]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        if self.cache is not None and not label_probabilities:   # the same greedy text
            scored = {self._key(prompts[i], max_new_tokens[i], True): key
                      for i, key in enumerate(keys) if key not in found}
            found.update((scored[key], value["text"] if isinstance(value, dict) else value)
                         for key, value in self.cache.get_many(list(scored)).items())
        missing = [i for i, key in enumerate(keys) if key not in found]
        encoded = {i: self.encode(prompts[i].text) for i in missing}
        self._check_room(encoded, max_new_tokens)
        order = sorted(missing, key=lambda i: (-len(encoded[i]), i))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            try:
                texts = self._generate_batch([encoded[i] for i in batch],
                                             [max_new_tokens[i] for i in batch],
                                             [prompts[i].stops for i in batch],
                                             label_probabilities)
            except Exception as error:
                raise BackendError(f"{type(error).__name__}: {error}", batch) from error
            self.generated += len(batch)
            new = {keys[i]: _stored(text) for i, text in zip(batch, texts)}
            found.update(new)
            if self.cache is not None:
                self.cache.set_many(new.items())
        return [_restored(found[key]) for key in keys]

    # -- per model type
    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _generate_batch(self, encoded: list[list[int]], caps: list[int],
                        stops: list[tuple[str, ...]],
                        label_probabilities: bool = False) -> list[str]:
        raise NotImplementedError

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def _eos_ids(self) -> set[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos) if isinstance(eos, (list, tuple)) else {int(eos)}

    def _decode_rows(self, rows: list[list[int]], caps: list[int],
                     stops: list[tuple[str, ...]], recorder=None) -> list[str]:
        """Cut each generated row at EOS and at its own cap, decode, cut at its stops; with a
        `recorder` (YesNoRecorder), `ScoredText` with p(Yes) at the Yes/No tokens kept."""
        eos_ids, texts = self._eos_ids(), []
        steps = recorder.per_row() if recorder is not None else None
        for row, (ids, cap, row_stops) in enumerate(zip(rows, caps, stops)):
            ids = ids[:cap]
            for position, token in enumerate(ids):
                if token in eos_ids:
                    ids = ids[:position]
                    break
            text = cut_at_stops(self.tokenizer.decode(ids, skip_special_tokens=True), row_stops)
            if steps is not None:
                text = ScoredText(text, label_offsets(self.tokenizer, ids, steps[row],
                                                      recorder.labels, len(text)))
            texts.append(text)
        return texts

    def check_label_probabilities(self) -> None:
        """Refuse (SumbenchError) a tokenizer without single Yes and No tokens."""
        label_token_ids(self.tokenizer)

    def _recorder(self, label_probabilities: bool):
        """A YesNoRecorder of the tokenizer's label tokens when asked for, else None."""
        return YesNoRecorder(label_token_ids(self.tokenizer)) if label_probabilities else None

    def _run_generate(self, input_ids, attention_mask, caps, stops, start: int, recorder=None):
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        criteria = StoppingCriteriaList([_StopOnStrings(self.tokenizer, stops, start)])
        extra = {"logits_processor": LogitsProcessorList([recorder])} if recorder else {}
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            return self.model.generate(
                input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                max_new_tokens=max(caps), do_sample=False, num_beams=1,
                pad_token_id=self._pad_id(), stopping_criteria=criteria, **extra)


class CausalLMBackend(HFBackend):
    """A decoder-only model: the prompt is continued; only the continuation is returned."""

    model_type = "hf-causal"
    output_in_context = True

    def encode(self, text: str) -> list[int]:
        """Token ids with the tokenizer's special tokens (BOS), minus a trailing EOS."""
        ids = list(self.tokenizer(text)["input_ids"])
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            ids = ids[:-1]
        return ids

    def _generate_batch(self, encoded, caps, stops, label_probabilities=False):
        import torch

        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self._pad_id(), dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):  # left padding
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        recorder = self._recorder(label_probabilities)
        output = self._run_generate(input_ids, mask, caps, stops, start=width, recorder=recorder)
        return self._decode_rows([row[width:].tolist() for row in output], caps, stops,
                                 recorder)


class Seq2SeqBackend(HFBackend):
    """An encoder-decoder model: the prompt is the encoder input (with its EOS)."""

    model_type = "hf-seq2seq"

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def _generate_batch(self, encoded, caps, stops, label_probabilities=False):
        import torch

        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self._pad_id(), dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):  # right padding
            input_ids[row, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, :len(ids)] = 1
        recorder = self._recorder(label_probabilities)
        output = self._run_generate(input_ids, mask, caps, stops, start=1, recorder=recorder)
        return self._decode_rows([row[1:].tolist() for row in output], caps, stops, recorder)


def _stored(text: str) -> Any:
    """An output as the cache stores it: the text, or text and p(Yes) at its Yes/No words."""
    if isinstance(text, ScoredText):
        return {"text": str(text), "yes_probabilities": sorted(text.yes_probabilities.items())}
    return text


def _restored(value: Any) -> str:
    if isinstance(value, dict):
        return ScoredText(value["text"], {int(offset): float(p)
                                          for offset, p in value["yes_probabilities"]})
    return value


# ---- loading --------------------------------------------------------------------------
def load_hf_backend(model_name: str, *, model_type: str = "causal", revision: str | None = None,
                    cache: DiskCache | str | None = None, batch_size: int = 8,
                    device: str = "auto", dtype: str = "float32") -> HFBackend:
    """Load a local or hub model (`model_type` "causal" or "seq2seq") into a backend."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    classes = {"causal": (AutoModelForCausalLM, CausalLMBackend),
               "seq2seq": (AutoModelForSeq2SeqLM, Seq2SeqBackend)}
    if model_type not in classes:
        raise ValueError(f"model_type must be one of {sorted(classes)}, got {model_type!r}")
    model_class, backend_class = classes[model_type]
    check_model_source(model_name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_name, revision=revision)
        model = model_class.from_pretrained(model_name, revision=revision,
                                            dtype=getattr(torch, dtype))
    except load_errors() as error:
        raise load_failure(model_name, error) from None
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    info = {"name": model_name, "revision": revision, "dtype": dtype,
            "commit": hub_commit(model_name, revision)}
    return backend_class(model, tokenizer, cache=cache, batch_size=batch_size, info=info)
