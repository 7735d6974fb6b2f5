"""Model presence backends: NLI, seq2seq Yes/No and causal LM, on a shared batched base.

Registered in `leaderboard.evaluators.pyramid.presence.PRESENCE_BACKENDS` (as `nli`, `seq2seq`,
`causal-lm`) when this module is imported; `build_backend` imports it on demand, and every
name here is importable from `leaderboard.evaluators.pyramid.presence` too.

- `nli`: a sequence-classification checkpoint; premise = summary, hypothesis = unit. The
  entailment class is looked up in `config.id2label`, which indexes the logits (case-insensitive
  "entailment" or `entailment_label`; `label2id` only without id2label; maps that disagree on
  it are an error). Outputs:
  `p3` = softmax entailment probability; `p2` = Lite²Pyramid's 2-class probability: the other
  classes' LOGITS are added into one logit and the softmax is taken over [logit_e, sum of the
  other logits] = sigmoid(logit_e - sum(others)); `label3` = argmax of all classes is
  entailment; `label2` = the 2-class argmax, entailment when logit_e >= sum(others) (the
  first index wins a tie, and the release's entailment index is 0). `mode` picks the reported
  one (Lite²Pyramid's p2c, l2c, p3c, l3c). Inputs are (summary, unit) pairs truncated to
  `max_length` tokens (longest first), 400 by default as in the release.
- `seq2seq`: a model trained on the `presence_detection` format; P(Yes) / (P(Yes) + P(No)) of
  the first decoder step.
- `causal-lm`: the task's few-shot prompt (`FewShotPrompter`) and the next-token Yes/No
  probabilities after `ANSWER:`.
`BatchedModelBackend` tokenises a chunk, sorts it by length, runs it in batches of
`batch_size` padded to their longest input, and caches raw outputs on disk keyed by (backend,
model id, revision, settings, the exact model input); revision = the given one, else a hash
of a local folder's weight, config and tokenizer files, else the hub commit hash, else a
parameter hash.
Labels use p > 0.5 (0.5 is "not present", as numpy rounding in the task metrics). torch and
transformers are imported inside the functions that need them.
"""
from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from leaderboard.evaluators.batching import filled_batches
from leaderboard.evaluators.pyramid.nli_outputs import NLI_MAX_LENGTH, entailment_index, nli_outputs
from leaderboard.evaluators.pyramid.presence import (
    NLI_MODES,
    PRESENCE_BACKENDS,
    FewShotPrompter,
    PresenceBackend,
    PresenceBackendError,
    PresenceResult,
    pair_parts,
    pair_progress,
    presence_task,
)
from trainers.models.disk_cache import cache_key, model_revision, open_cache
from trainers.models.model_loading import load_errors, looks_local
from trainers.models.padding import feature_tensors as pad_batch


# ---- model backends: shared batching, sorting and caching -------------------------------
def _chunks(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    return iter(lambda: list(islice(iterator, size)), [])


def load_pretrained(model: Any, tokenizer: Any, auto_class: str, revision: str | None):
    """(model, tokenizer, model_id) from a path/hub id or from loaded objects."""
    import transformers

    if isinstance(model, (str, Path)):
        model_id = str(model)

        if looks_local(model_id) and not Path(model_id).expanduser().exists():
            raise PresenceBackendError(f"model path {model_id} does not exist")
        try:
            loaded = getattr(transformers, auto_class).from_pretrained(model_id,
                                                                       revision=revision)
            tokenizer = tokenizer or transformers.AutoTokenizer.from_pretrained(
                model_id, revision=revision)
        except load_errors() as error:  # missing/damaged files, bad id, wrong kind
            raise PresenceBackendError(f"cannot load {auto_class} from {model_id!r}: "
                                       f"{str(error).splitlines()[0]}") from error
        return loaded.eval(), tokenizer, model_id
    if tokenizer is None:
        raise PresenceBackendError("a loaded model needs its tokenizer (tokenizer=...)")
    return model.eval(), tokenizer, getattr(model.config, "name_or_path", "") or "in-memory"


def single_token_id(tokenizer: Any, text: str) -> int:
    """The one (non-blank) token `text` encodes to; an error if it needs several."""
    ids = [i for i in tokenizer(text, add_special_tokens=False)["input_ids"]
           if tokenizer.decode([i]).strip()]
    if len(ids) != 1:
        raise PresenceBackendError(f"{text!r} is not a single token for this tokenizer "
                                   f"({tokenizer.convert_ids_to_tokens(ids)})")
    return ids[0]


class BatchedModelBackend(PresenceBackend):
    """Chunked, length-sorted, batched and cached scoring; subclasses prepare and forward."""

    def __init__(self, model: Any, tokenizer: Any, auto_class: str, *, revision: str | None,
                 model_id: str | None, batch_size: int, chunk_size: int, cache: Any,
                 device: str):
        if batch_size < 1 or chunk_size < 1:
            raise ValueError("batch_size and chunk_size must be >= 1")
        self.model, self.tokenizer, loaded_id = load_pretrained(model, tokenizer, auto_class,
                                                                revision)
        self.model.to(device)
        self.model_id, self.device = model_id or loaded_id, device
        self.revision = model_revision(self.model_id, self.model, revision)
        self.batch_size, self.chunk_size = batch_size, chunk_size
        self.cache = open_cache(cache)
        self.forward_calls = 0

    def settings(self) -> str:
        return ""

    def fingerprint(self) -> str:
        return f"{self.name}:{self.model_id}@{self.revision}:{self.settings()}"

    def key_parts(self, pair: Sequence[str]) -> tuple:
        return pair_parts(pair)[:2]

    @abc.abstractmethod
    def prepare(self, pairs: Sequence[Sequence[str]]) -> list[dict]:
        """Token features per pair (lists of ids, truncated)."""

    @abc.abstractmethod
    def forward(self, features: Sequence[dict]) -> list[list[float]]:
        """Raw outputs (logits) per pair of one batch."""

    @abc.abstractmethod
    def result(self, raw: Sequence[float]) -> PresenceResult:
        """The result from the raw outputs of one pair."""

    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        for chunk in _chunks(pair_progress(pairs, self.name), self.chunk_size):
            yield from self._score_chunk(chunk)

    def _score_chunk(self, chunk: list) -> Iterator[PresenceResult]:
        fingerprint = self.fingerprint() if self.cache is not None else ""
        keys = [cache_key(fingerprint, *self.key_parts(p)) for p in chunk] \
            if self.cache is not None else []
        found = self.cache.get_many(keys) if self.cache is not None else {}
        missing = [i for i in range(len(chunk)) if not keys or keys[i] not in found]
        computed = dict(zip(missing, self._run([chunk[i] for i in missing]))) \
            if missing else {}
        if self.cache is not None and missing:
            self.cache.set_many((keys[i], computed[i][0]) for i in missing)
        for i in range(len(chunk)):
            yield computed[i][1] if i in computed else self.result(found[keys[i]])

    def _run(self, pairs: list) -> list[tuple[list[float], PresenceResult]]:
        """(raw outputs, result) of `pairs`: each distinct pair computed once, in
        length-sorted batches with dynamic padding (a repeated pair gets a result object of
        its own)."""
        position: dict[tuple, int] = {}
        slots = [position.setdefault(tuple(self.key_parts(pair)), len(position))
                 for pair in pairs]
        if len(position) == len(pairs):
            return self._run_distinct(pairs)
        outputs = self._run_distinct(list({slot: pair for slot, pair in zip(slots, pairs)}
                                          .values()))
        results, seen = [], set()
        for slot in slots:
            raw, result = outputs[slot]
            results.append((raw, result) if slot not in seen else (raw, self.result(raw)))
            seen.add(slot)
        return results

    def _run_distinct(self, pairs: list) -> list[tuple[list[float], PresenceResult]]:
        """Each pair's raw output and result (`batched_forward` over the pairs)."""
        outputs = []
        for row in self.batched_forward(self.prepare(pairs)):
            raw = [float(value) for value in row]
            outputs.append((raw, self.result(raw)))
        return outputs

    def batched_forward(self, features: Sequence[dict]) -> list:
        """`forward`'s output for each of `features`, in their order: longest first, in
        batches of at most `batch_size` inputs that padding (to each batch's longest) fills to
        at most a fifth (leaderboard.evaluators.batching)."""
        import torch

        order = sorted(range(len(features)),
                       key=lambda j: (-len(features[j]["input_ids"]), j))
        outputs: list = [None] * len(features)
        with torch.inference_mode():
            for batch in filled_batches(order, lambda j: (len(features[j]["input_ids"]),),
                                        self.batch_size):
                rows = self.forward([features[j] for j in batch])
                self.forward_calls += 1
                for j, row in zip(batch, rows):
                    outputs[j] = row
        return outputs

    def _pad_id(self) -> int:
        tokenizer = self.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else \
            tokenizer.eos_token_id
        return int(pad or 0)

    def _tensors(self, features: Sequence[dict]) -> dict:
        return {k: v.to(self.device) for k, v in pad_batch(features, self._pad_id()).items()}


# ---- NLI (labels and outputs: leaderboard.evaluators.pyramid.nli_outputs) ----------------------
@PRESENCE_BACKENDS.decorator()
class NLIBackend(BatchedModelBackend):
    name = "nli"

    def __init__(self, model: Any, tokenizer: Any = None, *, mode: str = "prob2",
                 entailment_label: str | None = None, revision: str | None = None,
                 model_id: str | None = None, batch_size: int = 32,
                 max_length: int = NLI_MAX_LENGTH, chunk_size: int = 2048, cache: Any = None,
                 device: str = "cpu"):
        if mode not in NLI_MODES:
            raise ValueError(f"mode must be one of {', '.join(NLI_MODES)}, got {mode!r}")
        super().__init__(model, tokenizer, "AutoModelForSequenceClassification",
                         revision=revision, model_id=model_id, batch_size=batch_size,
                         chunk_size=chunk_size, cache=cache, device=device)
        self.mode, self.max_length = mode, max_length
        config = self.model.config
        self.entail = entailment_index(getattr(config, "id2label", None),
                                       getattr(config, "label2id", None), entailment_label)
        if not 0 <= self.entail < int(config.num_labels):
            raise PresenceBackendError(f"entailment index {self.entail} is outside the model's "
                                       f"{config.num_labels} classes")

    def settings(self) -> str:
        return f"max_length={self.max_length}"

    def prepare(self, pairs):
        premises, hypotheses = zip(*(pair_parts(p)[:2] for p in pairs))
        encoded = self.tokenizer(list(premises), list(hypotheses), truncation=True,
                                 max_length=self.max_length)
        names = [name for name in ("input_ids", "token_type_ids") if name in encoded]
        return [{name: encoded[name][i] for name in names} for i in range(len(premises))]

    def forward(self, features):
        return self.model(**self._tensors(features)).logits.float().tolist()

    def result(self, raw):
        details = nli_outputs(raw, self.entail)
        kind = self.mode[-1]
        probability = details[f"p{kind}"] if self.mode.startswith("prob") else \
            float(details[f"label{kind}"])
        return PresenceResult(probability, details[f"label{kind}"], details)


# ---- seq2seq Yes/No ----------------------------------------------------------------------
def _yes_no_result(logit_yes: float, logit_no: float) -> PresenceResult:
    p_yes = 1.0 / (1.0 + math.exp(max(min(logit_no - logit_yes, 700.0), -700.0)))
    return PresenceResult(p_yes, int(p_yes > 0.5), {"logit_yes": logit_yes, "logit_no": logit_no})


@PRESENCE_BACKENDS.decorator()
class Seq2SeqYesNoBackend(BatchedModelBackend):
    name = "seq2seq"

    def __init__(self, model: Any, tokenizer: Any = None, *, revision: str | None = None,
                 model_id: str | None = None, batch_size: int = 16, max_length: int = 512,
                 chunk_size: int = 2048, cache: Any = None, device: str = "cpu"):
        super().__init__(model, tokenizer, "AutoModelForSeq2SeqLM", revision=revision,
                         model_id=model_id, batch_size=batch_size, chunk_size=chunk_size,
                         cache=cache, device=device)
        self.task, self.max_length = presence_task(), max_length
        self.yes_id = single_token_id(self.tokenizer, "Yes")
        self.no_id = single_token_id(self.tokenizer, "No")

    def settings(self) -> str:
        return f"max_length={self.max_length},yes={self.yes_id},no={self.no_id}"

    def source(self, pair: Sequence[str]) -> str:
        """The model input: the presence task's instruction with the summary and unit."""
        return self.task.source_text(*pair_parts(pair)[:2])

    def key_parts(self, pair):
        return (self.source(pair),)

    def prepare(self, pairs):
        sources = [self.source(p) for p in pairs]
        encoded = self.tokenizer(sources, truncation=True, max_length=self.max_length)
        return [{"input_ids": ids} for ids in encoded["input_ids"]]

    def forward(self, features):
        import torch

        tensors = self._tensors(features)
        start = self.model.config.decoder_start_token_id
        decoder = torch.full((len(features), 1), int(start), device=self.device)
        logits = self.model(**tensors, decoder_input_ids=decoder).logits[:, 0, :]
        return logits[:, [self.yes_id, self.no_id]].float().tolist()

    def result(self, raw):
        return _yes_no_result(*raw)


# ---- causal LM -------------------------------------------------------------------------
@PRESENCE_BACKENDS.decorator()
class CausalLMBackend(BatchedModelBackend):
    name = "causal-lm"

    def __init__(self, model: Any, tokenizer: Any = None, *, pool: Sequence[dict] = (),
                 shots: int = 0, seed: int = 0, revision: str | None = None,
                 model_id: str | None = None, batch_size: int = 8, max_length: int = 1024,
                 chunk_size: int = 512, cache: Any = None, device: str = "cpu"):
        super().__init__(model, tokenizer, "AutoModelForCausalLM", revision=revision,
                         model_id=model_id, batch_size=batch_size, chunk_size=chunk_size,
                         cache=cache, device=device)
        self.prompter, self.max_length = FewShotPrompter(pool, shots, seed), max_length
        self.yes_id = single_token_id(self.tokenizer, " Yes")
        self.no_id = single_token_id(self.tokenizer, " No")

    def settings(self) -> str:
        return (f"max_length={self.max_length},yes={self.yes_id},no={self.no_id},"
                f"{self.prompter.fingerprint()}")

    def key_parts(self, pair):
        return (self.prompter.prompt(pair),)

    def prepare(self, pairs):
        bos = self.tokenizer.bos_token_id
        features = []
        for pair in pairs:
            ids = self.tokenizer(self.prompter.prompt(pair), add_special_tokens=False)["input_ids"]
            ids = ([bos] if bos is not None else []) + ids
            features.append({"input_ids": ids[-self.max_length:]})  # keep the query's end
        return features

    def forward(self, features):
        import torch

        tensors = self._tensors(features)
        logits = self.model(**tensors).logits
        last = tensors["attention_mask"].sum(dim=1) - 1
        rows = logits[torch.arange(len(features), device=self.device), last]
        return rows[:, [self.yes_id, self.no_id]].float().tolist()

    def result(self, raw):
        return _yes_no_result(*raw)
