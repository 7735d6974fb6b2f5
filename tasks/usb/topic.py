"""TOPIC: summarize an article for one of its section topics."""
from __future__ import annotations

from tasks.plumbing.registry import TASKS
from tasks.usb.common import TextTask, instructed, joined


@TASKS.decorator("TOPIC")
class TopicBasedSummarization(TextTask):
    name = "topicbased_summarization"
    description = "Summarize an article for one section's topic (ROUGE geometric mean)."
    title = "Topic-based"
    record_fields = ("summ_idx", "id", "input_lines", "topic_name", "output_lines")

    def fewshot_content(self, instance: dict) -> str:
        return f"TOPIC: {instance['topic_name']}\nCONTENT: {joined(instance['input_lines'])}"

    def source(self, instance: dict) -> str:
        return instructed("Summarize the given content for the following topic : ",
                          f"TOPIC: {instance['topic_name']} "
                          f"CONTENT: {joined(instance['input_lines'])}")
