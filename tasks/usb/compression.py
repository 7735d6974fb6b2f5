"""COMP: compress the evidence sentences of one summary sentence into a single line."""
from __future__ import annotations

from tasks.plumbing.registry import TASKS
from tasks.usb.common import TextTask, instructed, joined


@TASKS.decorator("COMP")
class MultisentenceCompression(TextTask):
    name = "multisentence_compression"
    description = "Compress a summary sentence's evidence into one line (ROUGE geometric mean)."
    title = "Compression"
    record_fields = ("id", "summ_idx", "input_lines", "output_lines")

    def source(self, instance: dict) -> str:
        return instructed("Summarize the following content in a single line : ",
                          joined(instance["input_lines"]))
