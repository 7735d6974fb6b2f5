"""QuestEval as a registered evaluator (tasks.metrics.evaluators.Evaluator): `sumbench
meta-eval --metric questeval [--metric-option KEY=VALUE ...]`, the summaries track's column
(`NAME=evaluator:questeval[,KEY=VALUE...]`, or as before `NAME=source:questeval,...`) and
`sumbench questeval`, all configured by one options table (OPTIONS; its defaults those of
`Settings` and the official models).

It reads the sources (each summary against its document; with `references=true` every
reference too, as the official code compares a summary with each). The models are kept per
process (tasks.plumbing.kept, by model settings), so a worker scoring submission after
submission, or meta-eval scoring system after system, loads them once, and two columns with
different models keep both; the model outputs are kept in memory between calls (or in
`cache=FILE`), so the sources' questions are generated once for every system.
"""
from __future__ import annotations

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
from tasks.metrics.evaluator_base import option_values, positive_int
from tasks.metrics.evaluators import EVALUATORS, Evaluator, register_evaluator
from tasks.metrics.questeval import check_score_types
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.kept import kept_model
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


def _scores(text: str) -> tuple[str, ...]:
    """Score types joined by "," or "+" (a board column's options are comma-separated)."""
    parts = str(text).replace("+", ",").split(",")
    return check_score_types([part.strip() for part in parts if part.strip()])


DEFAULTS = Settings()
#: option -> (parser of its text, default)
OPTIONS: dict[str, tuple[Any, Any]] = {
    "protocol": (str, DEFAULTS.protocol), "question_scores": (_scores, None),
    "weighter": (_flag, None), "references": (_flag, False),
    "answers": (str, None), "spacy_pipeline": (str, DEFAULT_PIPELINE),
    "question_generator": (str, QUESTION_GENERATOR),
    "question_answerer": (str, QUESTION_ANSWERER), "weighter_model": (str, WEIGHTER),
    "bertscore_model": (str, BERTSCORE_MODEL), "bertscore_layer": (positive_int, None),
    "source_windows": (_flag, False), "window_stride": (positive_int, DEFAULTS.window_stride),
    "batch_size": (positive_int, None), "device": (str, "auto"), "cache": (str, None),
}


def parse_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's value, `options` (text or already parsed) over the defaults."""
    values = option_values(options, OPTIONS, "QuestEval")
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


def shared_models(names: ModelNames, settings: Settings) -> Models:
    """The models of `names` for `settings`, kept per process (tasks.plumbing.kept)."""
    key = (names, settings.scores, settings.weighted)
    return kept_model("questeval models", key, lambda: load_models(names, settings))


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


class QuestEvalEvaluator(Evaluator):
    """QuestEval's score of each summary against its source (see the module)."""

    name = "questeval"
    reads_sources = True
    model_options = MODEL_OPTIONS
    option_names = tuple(OPTIONS)

    def __init__(self, options: Mapping[str, Any] | None = None, models: Models | None = None):
        self.values = parse_options(options or {})
        self.config = settings_of(self.values)
        self.reads_references = bool(self.values["references"])
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

    def run_config(self) -> dict:
        """What a run of `sumbench questeval --out` records: the protocol, its scores and
        weighter, the answers' source, the models used and their revisions."""
        scores, names = self.config.scores, self.values
        return {"protocol": self.config.name, "question_scores": list(scores),
                "weighter": self.config.weighted,
                "answers": dict(self.answers.description) if self.answers else None,
                "models": {"generator": names["question_generator"],
                           "answerer": names["question_answerer"],
                           **({"weighter": names["weighter_model"]}
                              if self.config.weighted else {}),
                           **({"bertscore": names["bertscore_model"]}
                              if "bertscore" in scores else {})},
                "revisions": dict(self.revisions)}

    def cost(self) -> dict | None:
        return None if self.last is None else {**self.last, "revisions": dict(self.revisions)}

    def score(self, summaries: Sequence[str], references: Sequence[Sequence[str]],
              sources: Sequence[str] | None) -> list[float]:
        if sources is None or len(sources) != len(summaries):
            raise SumbenchError(f"QuestEval got {len(sources or ())} sources for "
                                f"{len(summaries)} summaries")
        rows = [Summary(str(index), summary, source,
                        tuple(references[index]) if self.reads_references else ())
                for index, (summary, source) in enumerate(zip(summaries, sources))]
        return [row["score"] for row in self.evaluate(rows)["summaries"]]

    def evaluate(self, rows: Sequence[Summary], progress=None, details: bool = False) -> dict:
        """QuestEval's whole result of `rows` (scoring.questeval: every summary's score,
        precision, recall and questions, the corpus mean, the model calls made)."""
        started = time.perf_counter()
        models = self.models or shared_models(ModelNames.of(self.values), self.config)
        if self.answers is None:
            self.answers = answer_source(self.values["answers"], self.values["spacy_pipeline"])
        cache = open_cache(self.values["cache"]) if self.values["cache"] else self.memory
        try:
            result = questeval(rows, models, self.answers, self.config, cache, progress,
                               details=details)
        finally:
            if cache is not self.memory:
                cache.close()
        self.revisions = dict(models.revisions)
        self.last = {"seconds": round(time.perf_counter() - started, 3),
                     "model_calls": dict(result["computed"])}
        return result


def register() -> None:
    """Add "questeval" (its defaults: v0.2.4 against the source) to the evaluator registry,
    once per process."""
    if "questeval" not in EVALUATORS:
        register_evaluator("questeval", QuestEvalEvaluator())
