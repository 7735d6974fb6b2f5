"""EXT: label each article sentence as important (in the summary's evidence) or not."""
from __future__ import annotations

from tasks.plumbing.registry import TASKS
from tasks.usb.common import LineLabelTask
from tasks.validation import require_binary_labels, require_probabilities


@TASKS.decorator("EXT")
class ExtractiveSummarization(LineLabelTask):
    name = "extractive_summarization"
    description = "Predict which article sentences are important, per sentence (AUC)."
    title = "Extractive"
    record_fields = ("id", "input_lines", "labels")
    main_metric = "auc"

    def prefix(self, instance: dict) -> str:
        return "For each sentence, predict if it is important. "

    def line_labels(self, instance: dict) -> list[int]:
        return list(instance["labels"])

    def validate_fields(self, record: dict) -> None:
        require_probabilities(record, "prediction")
        require_binary_labels(record, "labels")
