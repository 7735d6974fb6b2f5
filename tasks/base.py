"""The Task interface every benchmark task implements.

Data flows one way: loader -> instances -> format (model inputs) -> model -> parse/combine
(prediction) -> prediction record (official shape) -> score. A task never touches models or
files other than its own data; trainers and the leaderboard only talk to this interface.
"""
from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tasks.plumbing.errors import DataError, json_type

USB_DOMAINS = ("biographies", "companies", "disasters", "schools", "landmarks", "newspapers")
USB_VARIANTS = USB_DOMAINS + ("all",)
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class ModelInput:
    """One seq2seq example produced by `Task.format`.

    `window` numbers the pieces of an instance cut to fit an input budget (0 when uncut);
    `lines` is the [start, end) range of input lines the window covers, where that applies.
    """
    source: str
    target: str
    window: int = 0
    lines: tuple[int, int] | None = None


@dataclass(frozen=True)
class FewShotParts:
    """Prompt material for few-shot runners: the content, the gold output, its cue word."""
    content: str
    output: str
    cue: str = "OUTPUT:"
    extra: dict = field(default_factory=dict)


#: how pages name a headline metric
METRIC_LABELS = {"auc": "AUC", "f1": "F1", "exactmatch": "exact match",
                 "rouge_gmean": "ROUGE geo-mean", "accuracy": "accuracy", "rougel": "ROUGE-L"}


class Task(abc.ABC):
    """A benchmark task: data, formats, parser and metrics, but never a model.

    Class attributes describe the task; `TASKS.register` (see tasks.plumbing.registry) makes it
    reachable by name. Subclasses must stay stateless apart from constructor options.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    #: a short name for people ("Factuality"); `display_name` adds the headline metric
    title: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    #: the benchmark the task belongs to ("usb", "qapyramid"); `all` in commands means a suite
    suite: ClassVar[str] = ""
    splits: ClassVar[tuple[str, ...]] = SPLITS
    variants: ClassVar[tuple[str, ...]] = USB_VARIANTS
    #: the official metric keys `score` returns (fractions in 0..1)
    metric_names: ClassVar[tuple[str, ...]] = ()
    #: name of the paper's headline number (used for early stopping and leaderboards)
    main_metric: ClassVar[str] = "headline"
    #: "text" (generated string), "probabilities" (list of floats) or "spans" (tagged text)
    output_kind: ClassVar[str] = "text"
    #: constructor options the task takes (scoring passes only these to it)
    option_names: ClassVar[tuple[str, ...]] = ()
    #: record fields that tell apart records sharing `id` and `summ_idx` (FAC: `label`)
    identity_extra: ClassVar[tuple[str, ...]] = ()
    #: reference fields the scoring reads as sets, whatever their order (EVEXT `labels`)
    set_fields: ClassVar[tuple[str, ...]] = ()
    #: what the official scorer does with a prediction of the wrong length
    length_mismatch_effect: ClassVar[str] = "truncated or zero-padded as officially"

    # ---- data -------------------------------------------------------------------------
    @abc.abstractmethod
    def load(self, split: str, variant: str = "all", data_dir: str | None = None):
        """Return the split as a `datasets.Dataset` of records in the task's dataset shape."""

    def instances(self, records: Sequence[dict]) -> list[dict]:
        """The units a model predicts, one prediction record each. Default: the records."""
        return [dict(record) for record in records]

    def group_key(self, instance: dict) -> str:
        """The source document an instance comes from (few-shot never mixes the same one)."""
        return str(instance.get("id", ""))

    def first_of_its_record(self, instance: dict) -> bool:
        """Whether the instance is the first its dataset record gives (the USB release's
        few-shot pool takes only those). Default: every instance is a record of its own."""
        return True

    # ---- formats ----------------------------------------------------------------------
    @abc.abstractmethod
    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        """Seq2seq input/target pairs for one instance (several for windowed tasks)."""

    def fewshot_parts(self, instance: dict) -> FewShotParts:
        raise NotImplementedError(f"task {self.name} has no few-shot format")

    # ---- parsing ----------------------------------------------------------------------
    @abc.abstractmethod
    def parse(self, text: str, instance: dict, model_input: ModelInput | None = None) -> Any:
        """Turn one model output (for one window) into a prediction."""

    def combine(self, window_predictions: Sequence[Any], instance: dict,
                model_inputs: Sequence[ModelInput]) -> Any:
        """Stitch per-window predictions into one prediction for the instance."""
        if len(window_predictions) != 1:
            raise ValueError(f"task {self.name} expects one window, got {len(window_predictions)}")
        return window_predictions[0]

    # ---- records and metrics ----------------------------------------------------------
    @abc.abstractmethod
    def prediction_record(self, instance: dict, prediction: Any) -> dict:
        """The record in the official shape that `sumbench score` reads."""

    def validate_record(self, record: dict) -> None:
        """Raise tasks.plumbing.errors.DataError(field=...) if a prediction record is unusable: not
        a
        JSON object, another task's record, or bad fields (`validate_fields`)."""
        if not isinstance(record, dict):
            raise DataError(f"expected a JSON object, got {json_type(record)}")
        task = record.get("task", self.name)
        if task != self.name:
            raise DataError(f"record of task {task!r} given to {self.name!r}", field="task")
        self.validate_fields(record)

    @abc.abstractmethod
    def validate_fields(self, record: dict) -> None:
        """Check the fields of one record (helpers in tasks.validation)."""

    def score(self, records: Sequence[dict]) -> dict:
        """Official metrics over prediction records: {metric: fraction, ...}.

        May add diagnostics as extra numeric keys (e.g. `length_mismatches`).
        """
        return self.aggregate_scores(self.score_examples(records))

    @abc.abstractmethod
    def score_examples(self, records: Sequence[dict]) -> list:
        """Per-record metric material, in record order (the bootstrap resamples these)."""

    @abc.abstractmethod
    def aggregate_scores(self, examples: Sequence) -> dict:
        """The metrics over per-record material from `score_examples`."""

    @abc.abstractmethod
    def headline(self, scores: dict) -> float:
        """The paper's headline number (x100) computed from `score`'s output."""

    # ---- description ------------------------------------------------------------------
    def display_name(self) -> str:
        """"Factuality (AUC)": the title and the headline's metric, as pages show a task."""
        metric = METRIC_LABELS.get(self.main_metric, self.main_metric)
        return f"{self.title or self.name} ({metric})"

    def describe(self) -> dict:
        return {"name": self.name, "suite": self.suite, "description": self.description,
                "version": self.version,
                "splits": list(self.splits), "variants": list(self.variants),
                "main_metric": self.main_metric, "metrics": list(self.metric_names),
                "output_kind": self.output_kind}
