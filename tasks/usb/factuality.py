"""FAC: is a summary sentence supported by its evidence? (probability of Yes)."""
from __future__ import annotations

import re
from collections.abc import Sequence

from tasks.base import ModelInput
from tasks.metrics.classification import fac_probability, flagged_scores
from tasks.plumbing.registry import TASKS
from tasks.usb.common import CLASSIFICATION_METRICS, UsbTask, instructed, joined
from tasks.validation import require_binary_label, require_probabilities

_ANSWER = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
#: what `parse` returns when the output starts with neither Yes nor No: no information
UNPARSEABLE = [0.5]


@TASKS.decorator("FAC")
class FactualityClassification(UsbTask):
    name = "factuality_classification"
    description = "Classify whether the evidence supports a summary sentence (AUC)."
    title = "Factuality"
    record_fields = ("id", "summ_idx", "input_lines", "summary_sent", "label")
    output_kind = "probabilities"
    metric_names = CLASSIFICATION_METRICS
    main_metric = "auc"
    #: each edited sentence gives two records with one summ_idx: label 0 and label 1
    identity_extra = ("label",)
    length_mismatch_effect = "scored 0 as officially"

    def source(self, instance: dict) -> str:
        return instructed("Is there sufficient evidence for the summary in the content? : ",
                          f"SUMMARY: {instance['summary_sent']} "
                          f"CONTENT: {joined(instance['input_lines'])}")

    def target(self, instance: dict) -> str:
        return "No" if instance["label"] else "Yes"

    def gold_prediction(self, record: dict) -> list[float]:
        """[p_yes] of the gold label (label 1 = unsupported: p_yes 0)."""
        return [1.0 - float(record["label"])]

    fewshot_cue = "LABEL:"

    def fewshot_content(self, instance: dict) -> str:
        return (f"CONTENT: {joined(instance['input_lines'])}\n"
                f"SUMMARY: {instance['summary_sent']}")

    def parse(self, text: str, instance: dict,
              model_input: ModelInput | None = None) -> list[float]:
        """[p_yes]: [1.0] when the output starts with "yes", [0.0] with "no" (any case,
        surrounding punctuation ignored), else [0.5] (see `is_parseable`)."""
        match = _ANSWER.match(text)
        if match is None:
            return list(UNPARSEABLE)
        return [1.0] if match.group(1).lower() == "yes" else [0.0]

    def is_parseable(self, text: str, instance: dict,
                     model_input: ModelInput | None = None) -> bool:
        return _ANSWER.match(text) is not None

    def validate_fields(self, record: dict) -> None:
        """A `prediction` list of any length is valid (officially, length != 1 scores 0)."""
        require_probabilities(record, "prediction")
        require_binary_label(record, "label")

    def score_examples(self, records: Sequence[dict]) -> list[tuple[list[float], list[int], bool]]:
        """Per record: [probability of "unsupported"], [label], whether the list had length != 1."""
        return [([fac_probability(r["prediction"])], [r["label"]], len(r["prediction"]) != 1)
                for r in records]

    def aggregate_scores(self, examples: Sequence) -> dict:
        return flagged_scores(examples)
