"""QuestEval as a named summary evaluator (tasks.metrics.evaluators): `sumbench meta-eval
--metric questeval [--metric-option KEY=VALUE ...]` and the summaries track's reference-free
column (`NAME=source:questeval[,KEY=VALUE...]` in the instance's evaluators).

It reads the sources (each summary against its document; with `references=true` the
references too, the max taken as the code does) and carries its settings by name (OPTIONS).
The models are loaded once per process for one set of model settings, so a worker scoring
submission after submission, or meta-eval scoring system after system, loads them once; the
model outputs are kept in memory between calls (or in `cache=FILE`), so the sources'
questions are generated once for every system.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leaderboard.evaluators.questeval.answers import answer_source
from leaderboard.evaluators.questeval.bertscore import BERTSCORE_MODEL, load_bertscore
from leaderboard.evaluators.questeval.models import (
    QUESTION_ANSWERER,
    QUESTION_GENERATOR,
    TRUE,
    UNANSWERABLE,
    WEIGHTER,
    load_t2t,
)
from leaderboard.evaluators.questeval.scoring import Models, Settings, Summary, questeval
from tasks.metrics.questeval import check_score_types
from tasks.plumbing.errors import SumbenchError, UnknownNameError, did_you_mean
from tasks.plumbing.spacy_loader import DEFAULT_PIPELINE
from trainers.models.disk_cache import open_cache

#: the models an evaluator loads (and what a column's settings may point at a model root)
MODEL_OPTIONS = ("question_generator", "question_answerer", "weighter_model",
                 "bertscore_model")


def _flag(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _count(text: str) -> int:
    value = int(str(text).strip())
    if value < 1:
        raise ValueError("expected a positive integer")
    return value


def _scores(text: str) -> tuple[str, ...]:
    """Score types joined by "," or "+" (a board column's options are comma-separated)."""
    parts = str(text).replace("+", ",").split(",")
    return check_score_types([part.strip() for part in parts if part.strip()])


#: option -> (parser of its text, default)
OPTIONS: dict[str, tuple[Any, Any]] = {
    "protocol": (str, "v0.2.4"), "question_scores": (_scores, None),
    "weighter": (_flag, None), "references": (_flag, False),
    "answers": (str, None), "spacy_pipeline": (str, DEFAULT_PIPELINE),
    "question_generator": (str, QUESTION_GENERATOR),
    "question_answerer": (str, QUESTION_ANSWERER), "weighter_model": (str, WEIGHTER),
    "bertscore_model": (str, BERTSCORE_MODEL), "bertscore_layer": (_count, None),
    "source_windows": (_flag, False), "window_stride": (_count, 128),
    "batch_size": (_count, None), "device": (str, "auto"), "cache": (str, None),
}


def parse_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's value, `options` (text or already parsed) over the defaults."""
    unknown = [name for name in options if name not in OPTIONS]
    if unknown:
        raise UnknownNameError(f"unknown QuestEval option {unknown[0]!r} (known: "
                               f"{', '.join(OPTIONS)}){did_you_mean(unknown[:1], OPTIONS)}")
    values = {name: default for name, (_, default) in OPTIONS.items()}
    for name, value in options.items():
        parse = OPTIONS[name][0]
        try:
            values[name] = value if not isinstance(value, str) or parse is str else \
                parse(value)
        except (ValueError, SumbenchError) as error:
            raise SumbenchError(f"QuestEval option {name}={value!r}: {error}") from None
    settings_of(values)  # the protocol, scores and windows checked here, once
    return values


def settings_of(values: Mapping[str, Any]) -> Settings:
    return Settings(values["protocol"], values["question_scores"], values["weighter"],
                    values["source_windows"], values["window_stride"])


@dataclass(frozen=True)
class ModelNames:
    """Which models to load (hub ids or folders) and how to run them."""
    question_generator: str = QUESTION_GENERATOR
    question_answerer: str = QUESTION_ANSWERER
    weighter_model: str = WEIGHTER
    bertscore_model: str = BERTSCORE_MODEL
    bertscore_layer: int | None = None
    batch_size: int | None = None
    device: str = "auto"

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ModelNames:
        return cls(**{name: values[name] for name in cls.__dataclass_fields__})


def load_models(names: ModelNames, settings: Settings) -> Models:
    """The models `settings` use (the weighter and BERTScore only when used); a missing
    bert-score fails before the T5 models load."""
    bertscore, revisions = None, {}
    if "bertscore" in settings.scores:
        bertscore, revisions["bertscore"] = load_bertscore(
            names.bertscore_model, names.bertscore_layer, batch_size=names.batch_size or 64,
            device=names.device)
    batch = names.batch_size or 48
    generator, revisions["generator"] = load_t2t(
        names.question_generator, role="question generator", word=None,
        batch_size=names.batch_size or 36, device=names.device)
    answerer, revisions["answerer"] = load_t2t(
        names.question_answerer, role="question answerer", word=UNANSWERABLE,
        batch_size=batch, device=names.device)
    weighter = None
    if settings.weighted:
        weighter, revisions["weighter"] = load_t2t(names.weighter_model, role="weighter",
                                                   word=TRUE, batch_size=batch,
                                                   device=names.device)
    return Models(generator, answerer, weighter, bertscore, revisions)


_LOADED: dict[tuple, Models] = {}   # one set of models per process: the latest asked for
_LOADING = threading.Lock()


def shared_models(names: ModelNames, settings: Settings) -> Models:
    key = (names, settings.scores, settings.weighted)
    with _LOADING:
        if key not in _LOADED:
            _LOADED.clear()
            _LOADED[key] = load_models(names, settings)
        return _LOADED[key]


class MemoryCache:
    """The DiskCache interface (get_many, set_many) over a dict of at most `limit` outputs
    (emptied when full: a worker's memory stays bounded)."""

    def __init__(self, limit: int = 200_000):
        self.values: dict[str, Any] = {}
        self.limit = limit

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        return {key: self.values[key] for key in keys if key in self.values}

    def set_many(self, items) -> None:
        items = list(items)
        if len(self.values) + len(items) > self.limit:
            self.values.clear()
        self.values.update(items)


class QuestEvalEvaluator:
    """QuestEval's score of each summary against its source (see the module)."""

    needs_sources = True

    def __init__(self, options: Mapping[str, Any] | None = None, models: Models | None = None):
        self.values = parse_options(options or {})
        self.config = settings_of(self.values)
        self.models, self.memory, self.answers = models, MemoryCache(), None
        self.revisions: dict[str, str] = {}
        self.last: dict | None = None  # the latest call's seconds and model calls

    def with_options(self, options: Mapping[str, Any]) -> QuestEvalEvaluator:
        return QuestEvalEvaluator({**self.values, **options})

    @property
    def settings(self) -> dict:
        return {"evaluator": "questeval", "protocol": self.config.name,
                "question_scores": list(self.config.scores),
                "weighter": self.config.weighted,
                **{name: value for name, value in self.values.items()
                   if name not in ("protocol", "question_scores", "weighter")},
                **({"revisions": dict(self.revisions)} if self.revisions else {}),
                **({"answers_source": dict(self.answers.description)} if self.answers else {})}

    def __call__(self, summaries: Sequence[str], references: Sequence[str],
                 sources: Sequence[str]) -> list[float]:
        if len(sources) != len(summaries):
            raise SumbenchError(f"QuestEval got {len(sources)} sources for {len(summaries)} "
                                f"summaries")
        with_references = self.values["references"]
        rows = [Summary(str(index), summary, source,
                        (references[index],) if with_references else ())
                for index, (summary, source) in enumerate(zip(summaries, sources))]
        started = time.perf_counter()
        models = self.models or shared_models(ModelNames.of(self.values), self.config)
        if self.answers is None:
            self.answers = answer_source(self.values["answers"], self.values["spacy_pipeline"])
        result = self._run(rows, models, self.answers)
        self.revisions = dict(models.revisions)
        self.last = {"seconds": round(time.perf_counter() - started, 3),
                     "model_calls": dict(result["computed"])}
        return [row["score"] for row in result["summaries"]]

    def _run(self, rows, models, answers) -> dict:
        if not self.values["cache"]:
            return questeval(rows, models, answers, self.config, self.memory)
        cache = open_cache(self.values["cache"])
        try:
            return questeval(rows, models, answers, self.config, cache)
        finally:
            cache.close()


def register_questeval(registry) -> None:
    """Add "questeval" (its defaults: v0.2.4 against the source) to an evaluator registry."""
    if "questeval" not in registry:
        registry.register("questeval", QuestEvalEvaluator())
