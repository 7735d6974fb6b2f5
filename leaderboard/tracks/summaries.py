"""Track "summaries": system summaries of the documents of a Pyramid set, scored server-side.

One board per loaded set (e.g. `realsumm`, `pyrxsum`). A submission is one JSON line per
example: `{"dataset": "realsumm", "id": "<example id>", "summary": "..."}`, every id of the set
exactly once. The instance's evaluators (`SummariesEvaluator`: units x presence backend) score
it; lexical presence needs no model, so the defaults work offline: Pyramid over SCUs, Pyramid
over STUs, and QAPyramid over QA units when the set has them (`qas.jsonl`). The first
evaluator a set supports gives the headline (its mean x100). The human-judged systems of the
set are scored the same way as reference rows, with their human Pyramid score beside.

A column of any registered evaluator (leaderboard.evaluators.registry: ROUGE, QuestEval, an
installed package's): `NAME=evaluator:EVALUATOR[,KEY=VALUE...]` scores each summary with it
(the keys are its options; `NAME=source:questeval,...` is the older spelling), against the
set's references and, for an evaluator that reads sources, its documents (on sets whose gold
keeps them). What an evaluator says it cost (QuestEval: seconds, model calls) is recorded in
the result under `cost`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leaderboard.evaluators.pyramid.presence import LexicalBackend
from leaderboard.evaluators.pyramid.scoring import (
    check_backend_options,
    check_presence_options,
    evaluate_system,
    presence_factory,
)
from leaderboard.evaluators.registry import evaluator_of
from leaderboard.ranking import mean_statistic
from leaderboard.tracks.base import PartScore
from leaderboard.tracks.pyramid_gold import (
    EXTRA_UNIT_KINDS,
    PyramidSetTrack,
    dataset_of,
    human_pyramid,
)
from tasks.metrics.evaluators import Evaluator, score_summaries
from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.kept import kept_model
from tasks.qapyramid.pyramid_data import sentence_units
from tasks.units.kinds import UnitKind, check_unit_kind, spellings

#: a column of a registered evaluator: `NAME=evaluator:EVALUATOR`, or as first written
#: `NAME=source:EVALUATOR` (kept as written, so stored settings keep their fingerprint)
EVALUATOR_COLUMNS = ("evaluator", "source")
#: the units a Pyramid-style column may score with (the set's own, those of unit files a
#: set is loaded with, or its references' sentences)
UNIT_KINDS = (*spellings(UnitKind.SCUS, UnitKind.STUS, UnitKind.SENTENCES, UnitKind.QAS),
              *EXTRA_UNIT_KINDS)


@dataclass(frozen=True)
class SummariesEvaluator:
    """A column: units of the set x a presence backend with options (Pyramid-style), or a
    registered evaluator with options (`units` "evaluator", `presence` its name)."""
    name: str
    units: str                       # "scus" | "stus" | "sentences" | "qas" | "evaluator"
    presence: str = "lexical"        # a backend of leaderboard.evaluators.pyramid.scoring
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.options.items() if isinstance(self.options, Mapping) else self.options
        object.__setattr__(self, "options", tuple(sorted((str(k), v) for k, v in pairs)))
        if self.presence == "human":
            raise SumbenchError("the human labels cannot score a submitted summary")
        if self.presence == "questeval" and not self.of_evaluator:
            raise SumbenchError(f"evaluator {self.name!r}: QuestEval is an evaluator, not a "
                                f"presence backend: write NAME=evaluator:questeval"
                                f"[,KEY=VALUE...]")

    @property
    def of_evaluator(self) -> bool:
        """Whether this column is a registered evaluator's (not units x presence)."""
        return self.units in EVALUATOR_COLUMNS

    def check(self) -> SummariesEvaluator:
        """Refuse a column that could never score (its evaluator, units, presence backend or
        options unknown or wrong), naming it; `init` checks every column before it writes
        anything. (Stored columns are not checked again when loaded: a plug-in may come and
        go.)"""
        options = dict(self.options)
        if self.of_evaluator:
            try:
                problem = evaluator_of(self.presence, options).problem()
            except SumbenchError as error:
                raise SumbenchError(f"evaluator {self.name!r}: {error}") from None
            if problem:
                raise SumbenchError(f"evaluator {self.name!r}: {problem}")
            return self
        try:  # as `per_example` checks them when it scores
            check_choice(self.units, UNIT_KINDS, "units")
            if self.presence == "lexical":
                check_backend_options("lexical", options)
            else:
                check_presence_options(self.presence, "scus" if self.units == "qas"
                                       else self.units, options)
            if "threshold" in options:
                float(options["threshold"])
        except ValueError:
            raise SumbenchError(f"evaluator {self.name!r}: threshold "
                                f"{options['threshold']!r} is not a number") from None
        except SumbenchError as error:
            raise SumbenchError(f"evaluator {self.name!r}: {error}") from None
        return self

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "options": dict(self.options)}

    @classmethod
    def from_dict(cls, data: Mapping) -> SummariesEvaluator:
        return cls(data["name"], data["units"], data.get("presence", "lexical"),
                   tuple(dict(data.get("options", {})).items()))

    @classmethod
    def parse(cls, text: str) -> SummariesEvaluator:
        """`NAME=UNITS:PRESENCE[,KEY=VALUE...]`, e.g. `pyramid-scus-nli=scus:nli,model=DIR`;
        UNITS in any spelling of its kind (`qa` is `qas`, `scu` is `scus`: tasks.units.kinds),
        kept as the board spells it."""
        name, sep, rest = text.partition("=")
        spec, _, extra = rest.partition(",")
        units, colon, presence = spec.partition(":")
        if not sep or not name or not units or not colon or not presence:
            raise SumbenchError(f"evaluator {text!r}: expected NAME=UNITS:PRESENCE[,KEY=VALUE]")
        if units not in EVALUATOR_COLUMNS:  # any spelling of a kind, stored as the board's
            try:
                units = check_unit_kind(units, UNIT_KINDS, "units")
            except SumbenchError as error:
                raise SumbenchError(f"evaluator {name!r}: {error}") from None
        options = {}
        for item in filter(None, extra.split(",")):
            key, eq, value = item.partition("=")
            if not eq:
                raise SumbenchError(f"evaluator {text!r}: option {item!r} is not KEY=VALUE")
            options[key] = value
        return cls(name, units, presence, tuple(options.items()))

    def supports(self, payload: Mapping) -> bool:
        if self.of_evaluator:
            return bool(payload.get("documents")) or \
                not column_evaluator(self.presence, self.options).reads_sources
        return self.units == "sentences" or self.units in payload["units"]

    def per_example(self, payload: Mapping, summaries: Sequence[str]) -> list[float]:
        """The column's score of each summary (aligned with the set's ids)."""
        if self.of_evaluator:
            return score_summaries(column_evaluator(self.presence, self.options), summaries,
                                   payload["references"], payload.get("documents"),
                                   self.presence)
        dataset = dataset_of(payload)
        units = dataset.units.get(self.units) if self.units != "sentences" else None
        if units is None:
            units = sentence_units(dataset.references)
        options = dict(self.options)
        if self.presence == "lexical":
            presence = LexicalBackend(float(options.get("threshold",
                                                        payload["lexical_threshold"])))
        else:
            check_presence_options(self.presence, "scus" if self.units == "qas" else self.units,
                                   options)
            presence = presence_factory(self.presence)(dataset, "submission", self.units,
                                                       **options)
        return list(evaluate_system("submission", summaries, units, presence).per_example)


def column_evaluator(name: str, options: tuple[tuple[str, Any], ...]) -> Evaluator:
    """One evaluator per column (name and options) in a process, kept as loaded models are
    (tasks.plumbing.kept): its models load once, and what it keeps between calls (QuestEval:
    the sources' questions) serves every submission."""
    return kept_model("board columns", (name, options),
                      lambda: evaluator_of(name, dict(options)))


def parse_evaluators(texts: Sequence[str]) -> list[SummariesEvaluator]:
    """`--evaluator` columns, each parsed and checked (`SummariesEvaluator.check`), their
    names distinct."""
    parsed = [SummariesEvaluator.parse(text).check() for text in texts]
    names = [evaluator.name for evaluator in parsed]
    if len(set(names)) != len(names):
        raise SumbenchError(f"two evaluators share a name: {names}")
    return parsed


def default_summary_evaluators() -> list[SummariesEvaluator]:
    return [SummariesEvaluator("pyramid-scus-lexical", "scus"),
            SummariesEvaluator("pyramid-stus-lexical", "stus"),
            SummariesEvaluator("qapyramid-lexical", "qas")]


class SummariesTrack(PyramidSetTrack):
    name = "summaries"
    title = "Summaries: Pyramid-scored system summaries"
    description = ("System summaries of REALSumm/PyrXSum documents scored on the server by "
                   "Pyramid and QAPyramid evaluators; human-judged systems shown as reference "
                   "rows with their human scores.")
    submission_fields = ("dataset", "id", "summary")
    id_fields = ("id",)
    value_field = "summary"

    def __init__(self, evaluators: Sequence[SummariesEvaluator] | None = None):
        self.evaluators = list(evaluators or default_summary_evaluators())

    def value_problem(self, value) -> str | None:
        return None if isinstance(value, str) and value.strip() else "expected a non-empty string"

    def evaluator_scores(self, payload: Mapping, summaries: Sequence[str],
                         cost: dict | None = None) -> dict[str, list]:
        """name -> each summary's score, of the evaluators the set supports; `cost` gets
        what each evaluator column says it spent."""
        scores = {}
        for evaluator in self.evaluators:
            if not evaluator.supports(payload):
                continue
            scores[evaluator.name] = evaluator.per_example(payload, summaries)
            if cost is not None and evaluator.of_evaluator:
                spent = column_evaluator(evaluator.presence, evaluator.options).cost()
                if spent is not None:
                    cost[evaluator.name] = spent
        return scores

    def score(self, checked, gold, board: str) -> dict[str, PartScore]:
        payload = gold[board][board]
        summaries = [record["summary"] for record in checked[board]]
        cost: dict = {}
        per_evaluator = self.evaluator_scores(payload, summaries, cost)
        if not per_evaluator:
            raise SumbenchError(f"no configured evaluator supports {board}")
        headline_name = next(iter(per_evaluator))
        result = {name: sum(values) / len(values) for name, values in per_evaluator.items()}
        headline = 100.0 * result[headline_name]
        kinds = {e.name: e.units for e in self.evaluators if e.name in per_evaluator}
        result.update(headline=headline, headline_evaluator=headline_name,
                      n_examples=len(summaries), units=kinds, **({"cost": cost} if cost else {}))
        return {board: PartScore(result, headline, per_evaluator[headline_name])}

    def statistic(self, part: str, gold, board: str):
        return mean_statistic()

    def headline_name(self, part: str) -> str:
        return next((e.name for e in self.evaluators), "headline")

    def reference_systems(self, gold, board: str) -> dict[str, dict]:
        """system -> {"summaries": [...], "human": human Pyramid mean} of the set's judged
        systems (submitted as reference rows by the service)."""
        payload = gold[board][board]
        human = human_pyramid(payload)
        return {system: {"summaries": list(payload["summaries"][system]),
                         "human": sum(human[system]) / len(human[system])}
                for system in sorted(payload["labels"])}
