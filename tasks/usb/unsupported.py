"""UNSUP: re-write a summary sentence with `[]`...`[/]` around its unsupported parts."""
from __future__ import annotations

from collections.abc import Sequence

from tasks.metrics.spans import aggregate_spans, span_example_counts
from tasks.plumbing.registry import TASKS
from tasks.usb.common import SPAN_METRICS, UsbTask, instructed, joined
from tasks.validation import require_str


@TASKS.decorator("UNSUP")
class UnsupportedSpanPrediction(UsbTask):
    name = "unsupported_span_prediction"
    description = "Mark the unsupported spans of a summary sentence with [] [/] (span F1)."
    title = "Unsupported spans"
    record_fields = ("summ_idx", "id", "input_lines", "summary", "annotated_summary")
    output_kind = "spans"
    metric_names = SPAN_METRICS
    main_metric = "f1"

    def record_keys(self, instance: dict) -> tuple[str, ...]:
        """Official order: `summ_idx` first when nothing is marked, else `id` first."""
        if instance.get("summary") == instance.get("annotated_summary"):
            return self.record_fields
        return ("id", "summ_idx", "input_lines", "summary", "annotated_summary")

    def source(self, instance: dict) -> str:
        return instructed(
            "Annotate parts of the summary which are not supported by evidence from the content. ",
            f"Summary: {instance['summary']} Content: {joined(instance['input_lines'])}")

    fewshot_cue = "OUTPUT:"

    def fewshot_content(self, instance: dict) -> str:
        return f"CONTENT: {joined(instance['input_lines'])}\nSUMMARY: {instance['summary']}"

    def target(self, instance: dict) -> str:
        return instance["annotated_summary"]

    def gold_prediction(self, record: dict) -> str:
        return record["annotated_summary"]

    def validate_fields(self, record: dict) -> None:
        for field in ("prediction", "summary", "annotated_summary"):
            require_str(record, field)

    def reproduces_gold(self, record: dict) -> bool:
        """The same spans as the gold, as span F1 counts them (every predicted span right,
        every gold span predicted)."""
        if not isinstance(record.get("prediction"), str):
            return False
        correct, predicted, gold = span_example_counts(
            record["prediction"], record["summary"], record["annotated_summary"])
        return correct == predicted == gold

    def score_examples(self, records: Sequence[dict]) -> list[tuple[int, int, int]]:
        """Per record: (correct, predicted, gold) span counts (`span_example_counts`)."""
        return [span_example_counts(r["prediction"], r["summary"], r["annotated_summary"])
                for r in records]

    def aggregate_scores(self, examples: Sequence) -> dict:
        return aggregate_spans(examples)
