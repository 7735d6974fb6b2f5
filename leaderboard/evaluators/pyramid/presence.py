"""Presence backends: is a content unit present in a summary? One interface, swappable.

`PresenceBackend.score(pairs)` takes (summary, unit) pairs — or (summary, unit, example_id),
where the id keeps few-shot prompts from showing shots of the same example — and returns one
`PresenceResult(probability, label, details)` per pair, in order. `score_iter` streams results
chunk by chunk, so memory does not grow with the input. Calling a backend as
`backend(summaries, units) -> [[value per unit] per summary]` is the presence-callable shape
the Pyramid evaluators take; it returns probabilities, or labels where the backend's `use` is
"label" (the lexical backend's default; NLI labels come from `mode="label2"/"label3"`).

Backends (`build_backend(name, **options)`):
- `lexical` (here): share of the unit's distinct content tokens (Treebank tokens, lower-cased,
  a small built-in stopword list and punctuation removed) found among the summary's tokens;
  present if >= `threshold` (`calibrate_threshold` picks it to maximise F1 on labelled pairs).
- `nli`, `seq2seq`, `causal-lm`: model backends in `leaderboard.evaluators.pyramid.presence_models`
  (imported on first use, so this module needs neither torch nor transformers); their names
  are importable from here as well.
- `chat` (here): the presence task's few-shot prompt (`FewShotPrompter`: k shots drawn from a
  labelled pool, never from the query's example; seeded per query) sent to an
  OpenAI-compatible chat endpoint (trainers.fewshot.chat_client); the reply's first yes/no word is
  the
  label (probability 1/0; 0.5 and label 0 if neither). Its fingerprint names the endpoint,
  model, shots, seed, a hash of the pool and the request params (temperature, max_tokens).
"""
from __future__ import annotations

import abc
import hashlib
import importlib
import json
import math
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.kept import kept_model
from tasks.plumbing.plugins import Once, entry_points, load_plugins
from tasks.plumbing.registry import Registry
from tasks.plumbing.text import content_tokens
from tasks.qapyramid.presence_detection import PresenceDetection
from trainers.fewshot.chat_client import ChatClient, ChatError

#: the one registry of presence backends: name -> PresenceBackend class (built-in, or a
#: plug-in's); `sumbench pyramid` adds "human" (the dataset's own labels) on top
PRESENCE_BACKENDS: Registry = Registry("presence backend")
NLI_MODES = ("prob2", "prob3", "label2", "label3")
MODELS_MODULE = "leaderboard.evaluators.pyramid.presence_models"
#: modules whose import registers more backends (imported with MODELS_MODULE)
MORE_BACKEND_MODULES = ("leaderboard.evaluators.pyramid.minicheck",
                        "leaderboard.evaluators.pyramid.minicheck_chat",
                        "leaderboard.evaluators.pyramid.alignscore")
#: names defined in MODELS_MODULE and served from here on first access
MODEL_NAMES = ("BatchedModelBackend", "NLIBackend", "Seq2SeqYesNoBackend", "CausalLMBackend",
               "entailment_index", "nli_outputs", "load_pretrained", "pad_batch",
               "single_token_id")


def __getattr__(name: str) -> Any:
    """The model backends' names, imported from MODELS_MODULE when first asked for."""
    if name in MODEL_NAMES:
        return getattr(importlib.import_module(MODELS_MODULE), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class PresenceBackendError(SumbenchError):
    """A backend cannot run as configured (model labels, tokens, shots)."""


@dataclass(frozen=True)
class PresenceResult:
    probability: float
    label: int
    details: dict = field(default_factory=dict)


def pair_parts(pair: Sequence[str]) -> tuple[str, str, str | None]:
    if len(pair) not in (2, 3):
        raise ValueError(f"expected (summary, unit) or (summary, unit, example_id), got {pair!r}")
    return str(pair[0]), str(pair[1]), (str(pair[2]) if len(pair) == 3 else None)


def pair_progress(pairs: Iterable, name: str) -> Iterable:
    """`pairs` behind a tqdm bar on stderr (hidden when not a TTY)."""
    from tqdm import tqdm

    return tqdm(pairs, desc=f"{name} presence", unit="pair", disable=None, leave=False)


def presence_task():
    """The presence_detection task (its formats and few-shot prompt)."""
    return PresenceDetection()


class PresenceBackend(abc.ABC):
    name: ClassVar[str]
    #: what calling the backend as a presence callable returns: "probability" or "label"
    use: str = "probability"

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """What determines the outputs (backend, model, revision, settings): a cache key part."""

    @abc.abstractmethod
    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        """Results in input order, computed chunk by chunk."""

    def score(self, pairs: Iterable[Sequence[str]]) -> list[PresenceResult]:
        return list(self.score_iter(pairs))

    def __call__(self, summaries: Sequence[str], units: Sequence[Sequence[str]]) -> list:
        return presence_values(self, summaries, units, self.use)


def presence_values(backend: PresenceBackend, summaries: Sequence[str],
                    units: Sequence[Sequence[str]], use: str = "probability") -> list[list[float]]:
    """[[value per unit] per summary]; `use` = "probability" or "label"."""
    if use not in ("probability", "label"):
        raise ValueError(f"use must be 'probability' or 'label', got {use!r}")
    if len(summaries) != len(units):
        raise ValueError(f"{len(summaries)} summaries but {len(units)} unit lists")
    results = iter(backend.score_iter((s, u) for s, row in zip(summaries, units) for u in row))
    return [[float(getattr(next(results), use)) for _ in row] for row in units]


def load_backends() -> None:
    """Register the model backends (nli, seq2seq, causal-lm: imports torch; MiniCheck's and
    AlignScore's) and
    those of installed packages (`sumbench.presence_backends` entry points,
    tasks.plumbing.plugins), once."""
    for module in (MODELS_MODULE, *MORE_BACKEND_MODULES):
        importlib.import_module(module)
    _load_plugin_backends()


def _register_plugin_backends() -> None:
    load_plugins("sumbench.presence_backends", register_backend_class)


def register_backend_class(name: str, backend_class) -> None:
    """Register a plug-in's PresenceBackend class under its `name` (the entry point's)."""
    import inspect

    if not (isinstance(backend_class, type) and issubclass(backend_class, PresenceBackend)):
        raise TypeError(f"expected a PresenceBackend class, got {backend_class!r}")
    if inspect.isabstract(backend_class):
        raise TypeError(f"{backend_class.__name__} leaves abstract: "
                        f"{', '.join(sorted(backend_class.__abstractmethods__))}")
    if getattr(backend_class, "name", None) != name:
        raise ValueError(f"the entry point is named {name!r}, the backend "
                         f"{getattr(backend_class, 'name', None)!r}")
    PRESENCE_BACKENDS.register(name, backend_class)


#: reads the plug-ins' entry points once, whichever thread asks first
_load_plugin_backends = Once(_register_plugin_backends)


def plugin_backend_names() -> list[str]:
    """The names installed packages give their backends (read without importing them)."""
    return [point.name for point in entry_points("sumbench.presence_backends")]


def build_backend(name: str, **options: Any) -> PresenceBackend:
    """A backend by registry name (lexical, nli, seq2seq, causal-lm, chat, or a plug-in's)
    and its options."""
    if name not in PRESENCE_BACKENDS:
        load_backends()
    return PRESENCE_BACKENDS.get(name)(**options)


def pyramid_factory(name: str):
    """A factory of the Pyramid evaluator's shape `(dataset, system, units_kind, **options) ->
    presence callable`; options that are None are dropped. A backend (its model) is built
    once per options and kept per process (tasks.plumbing.kept): reused across systems, and
    two board columns with different models keep both."""
    def factory(dataset: Any, system: str, units_kind: str, **options: Any) -> PresenceBackend:
        options = {key: value for key, value in options.items() if value is not None}
        return kept_model(f"presence {name}", repr(sorted(options.items())),
                          lambda: build_backend(name, **options))

    return factory


# ---- lexical ----------------------------------------------------------------------------
def _content_set(text: str, cache: dict[str, frozenset] | None) -> frozenset:
    if cache is None:
        return frozenset(content_tokens(text))
    tokens = cache.get(text)
    if tokens is None:
        tokens = cache[text] = frozenset(content_tokens(text))
    return tokens


def unit_token_recall(summary: str, unit: str,
                      cache: dict[str, frozenset] | None = None) -> float:
    """Share of the unit's distinct content tokens present in the summary (0 if none).
    `cache` ({text: content tokens}, unbounded, one per run) tokenizes each text once: a
    summary is compared with every unit of its example."""
    unit_tokens = _content_set(unit, cache)
    if not unit_tokens:
        return 0.0
    return len(unit_tokens & _content_set(summary, cache)) / len(unit_tokens)


def calibrate_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The threshold t (present iff score >= t) among the observed scores that maximises F1
    against `labels`; ties go to the largest t."""
    if len(scores) != len(labels) or not scores:
        raise ValueError("calibration needs equally many (>0) scores and labels")
    ranked = sorted(zip(scores, labels), key=lambda pair: -pair[0])
    positives, best, best_f1, true_pos = sum(labels), math.inf, -1.0, 0
    for rank, (score, label) in enumerate(ranked, start=1):
        true_pos += label
        if rank < len(ranked) and ranked[rank][0] == score:
            continue  # all pairs with this score are predicted together
        f1 = 2 * true_pos / (rank + positives) if rank + positives else 0.0
        if f1 > best_f1:
            best, best_f1 = score, f1
    return float(best)


@PRESENCE_BACKENDS.decorator()
class LexicalBackend(PresenceBackend):
    name = "lexical"

    def __init__(self, threshold: float = 0.5, use: str = "label"):
        self.threshold, self.use = float(threshold), use
        self.tokens: dict[str, frozenset] = {}  # this run's token cache (unbounded)

    @classmethod
    def calibrated(cls, pairs: Sequence[Sequence[str]], labels: Sequence[int]) -> LexicalBackend:
        cache: dict[str, frozenset] = {}
        scores = [unit_token_recall(*pair_parts(pair)[:2], cache) for pair in pairs]
        backend = cls(calibrate_threshold(scores, labels))
        backend.tokens = cache
        return backend

    def fingerprint(self) -> str:
        return f"lexical:threshold={self.threshold!r}"

    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        for pair in pairs:
            summary, unit, _ = pair_parts(pair)
            recall = unit_token_recall(summary, unit, self.tokens)
            yield PresenceResult(recall, int(recall >= self.threshold))


# ---- few-shot prompting (causal LM and chat) ---------------------------------------------
def pool_fingerprint(pool: Sequence[dict]) -> str:
    """A stable hash of a shot pool (its items in order, as canonical JSON): 16 hex digits."""
    text = json.dumps([dict(item) for item in pool], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class FewShotPrompter:
    """The presence task's few-shot prompt with `shots` examples drawn from `pool` (presence
    instances with `example_id`, `summary`, `unit`, `label`), never from the query's example
    (its id, or else its summary text); the draw is seeded by (seed, query)."""

    def __init__(self, pool: Sequence[dict] = (), shots: int = 0, seed: int = 0):
        if shots < 0 or shots > len(pool):
            raise PresenceBackendError(f"{shots} shots requested from a pool of {len(pool)}")
        self.pool, self.shots, self.seed = list(pool), shots, seed
        self.task = presence_task()
        self._pool_hash = pool_fingerprint(self.pool)

    def fingerprint(self) -> str:
        """What decides the prompts besides the query: shots, seed and the pool's hash."""
        return f"shots={self.shots},seed={self.seed},pool={self._pool_hash}"

    def shots_for(self, summary: str, unit: str, group: str | None) -> list[dict]:
        if not self.shots:
            return []
        candidates = [shot for shot in self.pool if (str(shot["example_id"]) != group
                                                     if group is not None
                                                     else shot["summary"] != summary)]
        if len(candidates) < self.shots:
            raise PresenceBackendError(f"only {len(candidates)} pool items outside the "
                                       f"query's example; {self.shots} shots requested")
        return random.Random(f"{self.seed}|{group}|{summary}|{unit}").sample(candidates,
                                                                             self.shots)

    def prompt(self, pair: Sequence[str]) -> str:
        summary, unit, group = pair_parts(pair)
        return self.task.fewshot_prompt({"summary": summary, "unit": unit},
                                        self.shots_for(summary, unit, group))


# ---- OpenAI-compatible chat --------------------------------------------------------------
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str) -> int | None:
    """1 for yes, 0 for no: the first "yes"/"no" word of the reply; None if neither."""
    match = _YES_NO.search(text or "")
    return None if match is None else int(match.group(1).lower() == "yes")


#: QAPyramid's released GPT-4o presence prompt (run_autoqapyramid.py)
QAPYRAMID_GPT4O_PROMPT = ("Read the following summary. Then read a question and an answer. "
                          "Answer whether the question and answer pair can be inferred from "
                          "the summary. Please strictly output either [YES] or [NO].\n\n"
                          "[Summary]\n{summary}\n\n[Question]\n{question}\n\n"
                          "[Answer]\n{answer}")
PROMPT_STYLES = ("task", "qapyramid-gpt4o")


def split_qa(unit: str) -> tuple[str, str]:
    """(question, answer) of a "<question>? <answer>" unit (no "?": all question)."""
    question, mark, answer = unit.partition("?")
    return (question + mark).strip(), answer.strip()


def qapyramid_gpt4o_prompt(summary: str, unit: str) -> str:
    question, answer = split_qa(unit)
    return QAPYRAMID_GPT4O_PROMPT.format(summary=summary, question=question, answer=answer)


def parse_qapyramid_gpt4o(text: str) -> int | None:
    """QAPyramid's parser: exactly "[YES]" -> 1, "[NO]" -> 0; else "yes" anywhere in the
    lower-cased reply -> 1, else "no" anywhere -> 0; else None (unparsed)."""
    reply = text or ""
    if reply == "[YES]":
        return 1
    if reply == "[NO]":
        return 0
    lowered = reply.lower()
    return 1 if "yes" in lowered else 0 if "no" in lowered else None


@PRESENCE_BACKENDS.decorator()
class ChatBackend(PresenceBackend):
    """Presence from an OpenAI-compatible chat model. `prompt_style` "task" asks with the
    presence task's (few-shot) prompt, greedily; "qapyramid-gpt4o" sends QAPyramid's released
    GPT-4o prompt with the API's default sampling and parses the reply as its script does."""
    name = "chat"

    def __init__(self, client: Any = None, *, model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, cache: Any = None,
                 pool: Sequence[dict] = (), shots: int = 0, seed: int = 0,
                 params: dict | None = None, prompt_style: str = "task"):
        check_choice(prompt_style, PROMPT_STYLES, "prompt style")
        if client is None:
            if not model:
                raise PresenceBackendError("the chat backend needs a client or a model name")
            client = ChatClient(model=model, base_url=base_url, api_key=api_key, cache=cache)
        self.client, self.prompter = client, FewShotPrompter(pool, shots, seed)
        self.prompt_style = prompt_style
        default = {} if prompt_style == "qapyramid-gpt4o" else {"temperature": 0,
                                                                "max_tokens": 5}
        self.params = default if params is None else dict(params)

    def fingerprint(self) -> str:
        params = json.dumps(self.params, sort_keys=True, separators=(",", ":"), default=str)
        return (f"chat:{self.client.base_url}:{self.client.model}:{self.prompter.fingerprint()}"
                f",params={params},style={self.prompt_style}")

    def _prompt(self, pair: Sequence[str]) -> str:
        if self.prompt_style == "qapyramid-gpt4o":
            summary, unit, _ = pair_parts(pair)
            return qapyramid_gpt4o_prompt(summary, unit)
        return self.prompter.prompt(pair)

    def score_iter(self, pairs: Iterable[Sequence[str]]) -> Iterator[PresenceResult]:
        parse = parse_qapyramid_gpt4o if self.prompt_style == "qapyramid-gpt4o" \
            else parse_yes_no

        failures: list[str] = []
        for number, pair in enumerate(pair_progress(pairs, self.name), start=1):
            messages = [{"role": "user", "content": self._prompt(pair)}]
            try:
                reply = self.client.complete(messages, accept=lambda text: parse(text)
                                             is not None, **self.params)
            except ChatError as error:
                failures.append(f"pair {number}: {error}")
                continue
            answer = parse(reply)
            if answer is None:
                failures.append(f"pair {number}: unparseable reply {reply[:60]!r}")
                continue
            yield PresenceResult(float(answer), answer, {"reply": reply, "parsed": True})
        if failures:
            raise PresenceBackendError(
                f"chat presence: {len(failures)} of {number} pairs got no "
                f"usable answer (first: {failures[0]}); answered pairs are cached, so "
                "running the same command again asks only for these")
