"""ABS: summarize a whole article (ROUGE against the kept summary sentences)."""
from __future__ import annotations

from tasks.plumbing.registry import TASKS
from tasks.usb.common import TextTask, instructed, joined


@TASKS.decorator("ABS")
class AbstractiveSummarization(TextTask):
    name = "abstractive_summarization"
    description = "Summarize a whole article (ROUGE geometric mean of R1/R2/RL)."
    title = "Abstractive"
    record_fields = ("id", "input_lines", "output_lines")

    def source(self, instance: dict) -> str:
        return instructed("Summarize the following content : ", joined(instance["input_lines"]))
