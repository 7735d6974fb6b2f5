"""FIX: rewrite an unsupported summary sentence so its evidence supports it."""
from __future__ import annotations

from tasks.plumbing.registry import TASKS
from tasks.usb.common import TextTask, instructed, joined


@TASKS.decorator("FIX")
class FixingFactuality(TextTask):
    name = "fixing_factuality"
    description = "Rewrite a summary sentence to be factually correct (exact match)."
    title = "Fixing factuality"
    record_fields = ("id", "summ_idx", "input_lines", "initial_summary", "fixed_summary")
    main_metric = "exactmatch"

    def reference(self, instance: dict) -> str:
        return instance["fixed_summary"]

    fewshot_cue = "FIXED SUMMARY:"

    def fewshot_content(self, instance: dict) -> str:
        return (f"CONTENT: {joined(instance['input_lines'])}\n"
                f"SUMMARY: {instance['initial_summary']}")

    def source(self, instance: dict) -> str:
        return instructed(
            "Rewrite the given summary of the content to make it factually correct. ",
            f"Summary: {instance['initial_summary']} Content: {joined(instance['input_lines'])}")
