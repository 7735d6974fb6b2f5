"""A base for simple outside tasks: text in, text out, over JSON Lines files.

A subclass names its fields, a prompt and its metrics, and is a whole task:

    class TitleGeneration(JsonlTask):
        name = "title_generation"
        description = "Write a short title for a paragraph (token F1)."
        input_field, target_field = "text", "title"
        prompt = "Write a title: {text}"
        metric_names, main_metric = ("exactmatch", "token_f1"), "token_f1"
        metrics = title_metrics    # (predictions, references) -> {metric: fraction}

Its data is DATA/<variant>/<name>/<split>.jsonl, one object a line with `id`, the input field
and (in labelled splits) the target field. Records are {"task", "id", <target_field>,
"prediction"}; the headline is 100 x the main metric. Every other Task hook keeps the base's
behaviour and may be overridden (docs/adding-a-task.md).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from tasks.base import FewShotParts, ModelInput, Task
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import iter_jsonl
from tasks.validation import require_str


class JsonlTask(Task):
    """Text-to-text over JSON Lines (see the module's docstring)."""

    input_field: ClassVar[str] = "input"
    target_field: ClassVar[str] = "target"
    #: the model input: str.format over the instance's fields ("Summarize: {input}")
    prompt: ClassVar[str] = "{input}"
    #: (predictions, references) -> {metric: fraction}: a pure function
    metrics: ClassVar[Callable[[list[str], list[str]], dict]]
    variants = ("all",)

    def __init_subclass__(cls, **keywords):
        super().__init_subclass__(**keywords)
        if "name" not in vars(cls):
            return  # an intermediate base
        if not callable(getattr(cls, "metrics", None)):
            raise TypeError(f"{cls.__name__} names no metrics function")
        if cls.main_metric not in cls.metric_names:
            raise TypeError(f"{cls.__name__}: main_metric {cls.main_metric!r} is not one of "
                            f"metric_names {cls.metric_names}")

    # ---- data -------------------------------------------------------------------------
    def load(self, split: str, variant: str = "all", data_dir: str | None = None):
        if data_dir is None:
            raise DataError(f"{self.name} reads its data from --data DIR")
        if variant not in self.variants or split not in self.splits:
            raise DataError(f"{self.name} has variants {', '.join(self.variants)} and splits "
                            f"{', '.join(self.splits)}; got {variant}/{split}")
        path = Path(data_dir) / variant / self.name / f"{split}.jsonl"
        records = []
        for line, record in iter_jsonl(path):
            for field in ("id", self.input_field):
                if field not in record:
                    raise DataError("missing field", path=str(path), line=line, field=field)
            records.append(record)
        return records

    # ---- formats and parsing ----------------------------------------------------------
    def format(self, instance: dict, tokenizer: Any = None,
               max_input_tokens: int | None = None) -> list[ModelInput]:
        try:
            source = self.prompt.format(**instance)
        except KeyError as error:
            raise DataError("the prompt names a field the instance lacks",
                            field=error.args[0]) from None
        return [ModelInput(source, str(instance.get(self.target_field, "")))]

    def fewshot_parts(self, instance: dict) -> FewShotParts:
        return FewShotParts(str(instance[self.input_field]),
                            str(instance.get(self.target_field, "")))

    def parse(self, text: str, instance: dict, model_input: ModelInput | None = None) -> str:
        return text.strip()

    # ---- records and metrics ----------------------------------------------------------
    def prediction_record(self, instance: dict, prediction: Any) -> dict:
        return {"task": self.name, "id": instance["id"],
                self.target_field: instance.get(self.target_field), "prediction": prediction}

    def validate_fields(self, record: dict) -> None:
        require_str(record, "prediction")
        require_str(record, self.target_field)

    def score_examples(self, records: Sequence[dict]) -> list:
        return [(record["prediction"], record[self.target_field]) for record in records]

    def aggregate_scores(self, examples: Sequence) -> dict:
        metrics = type(self).metrics
        return dict(metrics([prediction for prediction, _ in examples],
                            [reference for _, reference in examples]))

    def headline(self, scores: dict) -> float:
        return 100.0 * scores[self.main_metric]
