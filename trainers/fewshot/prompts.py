"""Few-shot prompt formatting: instruction sets per style, output forms, `render`.

Everything a style changes is data (`STYLE_SPECS`, `INSTRUCTIONS`), never a code branch:

- Layout (all styles): the instruction on its own line, then one block per shot,
  `{content}\\n{cue} {output}\\n`, then the item's `{content}\\n{cue}` -- the official GPT-3.5
  layout of the USB release, where every shot's output and the final prompt follow a cue word
  ("SUMMARY:", "LABELS:", ...). Llama (`[INST] ... [/INST] {cue}`) and Vicuna
  (`... USER: ... ASSISTANT: {cue}`) wrap it in their chat templates, written as plain
  strings, with the item's cue after the template's answer marker.
- Output form of the line-labelling tasks (EXT, EVEXT): `yes_no` writes `SENT0 Yes SENT1 No ...`
  (the fine-tuning target); `id_list` writes the positive sentence ids, `SENT2 SENT5` (what the
  release asked of GPT-3.5), or `NONE` when no sentence is positive.
- `gpt-3.5` is a chat style: the body is sent as one user message (as in the release).

The GPT-3.5 instructions are the wordings of the USB release; the Flan-T5 ones follow the
fine-tuning instructions (usb-format.md §5); the Llama and Vicuna wordings are ours (the paper's
tables are not available here) and say explicitly which output form is expected.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.base import FewShotParts
from tasks.plumbing.errors import check_choice

LINE_OUTPUT_FORMS = ("yes_no", "id_list")
#: what an `id_list` output says when no sentence is positive
NO_POSITIVE_IDS = "NONE"
_FIELD_LABEL = re.compile(r"^([A-Z][A-Z ]*[A-Z]:)", re.MULTILINE)

VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                 "The assistant gives helpful, detailed, and polite answers to the user's "
                 "questions.")

#: per style: kind ("text": one string; "chat": messages), template of the whole prompt
#: ({instruction}, {shots}: the demonstrations, {content}, {cue}: it must end with the cue),
#: line-task output form, extra stop strings
STYLE_SPECS: dict[str, dict] = {
    "flan-t5": {"kind": "text", "template": "{instruction}\n{shots}{content}\n{cue}",
                "line_output": "yes_no", "stops": ()},
    "llama": {"kind": "text", "template": "[INST] {instruction}\n{shots}{content} [/INST] {cue}",
              "line_output": "yes_no", "stops": ("[INST]",)},
    "vicuna": {"kind": "text",
               "template": (VICUNA_SYSTEM
                            + " USER: {instruction}\n{shots}{content} ASSISTANT: {cue}"),
               "line_output": "yes_no", "stops": ("USER:",)},
    "gpt-3.5": {"kind": "chat", "template": "{instruction}\n{shots}{content}\n{cue}",
                "line_output": "id_list", "stops": ()},
}

INSTRUCTIONS: dict[str, dict[str, str]] = {
    "gpt-3.5": {
        "multisentence_compression": "Summarize the following content in a single line.",
        "abstractive_summarization": "Draft a summary for the given document.",
        "fixing_factuality": "The summary might be incorrect. How would you rewrite it to make "
                             "it factually accurate?",
        "unsupported_span_prediction": "Go over the given summary carefully, and regenerate it "
                                       "while surrounding any parts which are not supported by "
                                       "the content using [] and [/] tags.",
        "topicbased_summarization": "Create a short summary of the given content that touches "
                                    "upon information which fall under the specified topic.",
        "factuality_classification": "Decide if the following summary is consistent with the "
                                     "corresponding content. Note that consistency means all "
                                     "information in the summary is supported by the content. "
                                     "Answer yes or no.",
        "extractive_summarization": "For the task of extractive summarization, list all the "
                                    "SENTs of the content which would be included in its "
                                    "summary.",
        "evidence_extraction": "Below is a claim along with its corresponding content. Identify "
                               "and list all the sentences within the content that partially or "
                               "entirely support the claim.",
    },
    "flan-t5": {
        "multisentence_compression": "Summarize the following content in a single line.",
        "abstractive_summarization": "Summarize the following content.",
        "fixing_factuality": "Rewrite the given summary of the content to make it factually "
                             "correct.",
        "unsupported_span_prediction": "Annotate parts of the summary which are not supported "
                                       "by evidence from the content.",
        "topicbased_summarization": "Summarize the given content for the following topic.",
        "factuality_classification": "Is there sufficient evidence for the summary in the "
                                     "content? Answer Yes or No.",
        "extractive_summarization": "For each sentence, predict if it is important.",
        "evidence_extraction": "For each sentence in the content, predict if it provides any "
                               "evidence for the claim.",
    },
    "llama": {
        "multisentence_compression": "Combine the information of the given content into a "
                                     "single summary sentence.",
        "abstractive_summarization": "Write a summary of the given article. Keep it faithful "
                                     "to the article.",
        "fixing_factuality": "The summary may contain information that the content does not "
                             "support. Rewrite the summary with as few changes as possible so "
                             "that every part of it is supported by the content.",
        "unsupported_span_prediction": "Copy the summary, surrounding every part that the "
                                       "content does not support with [] and [/] tags.",
        "topicbased_summarization": "Write a short summary of the given article that covers "
                                    "only the information about the given topic.",
        "factuality_classification": "Is every piece of information in the summary supported "
                                     "by the content? Answer Yes or No.",
        "extractive_summarization": "For each sentence of the article (SENT0, SENT1, ...), "
                                    "answer Yes if it belongs in a summary of the article and "
                                    "No otherwise.",
        "evidence_extraction": "For each sentence of the content (SENT0, SENT1, ...), answer "
                               "Yes if it supports the claim, fully or in part, and No "
                               "otherwise.",
    },
    "vicuna": {
        "multisentence_compression": "Summarize the following content in one sentence.",
        "abstractive_summarization": "Write a concise summary of the following document.",
        "fixing_factuality": "The summary below might not be accurate. Edit it so that it is "
                             "factually consistent with the content, changing as little as "
                             "possible.",
        "unsupported_span_prediction": "Repeat the summary and mark the parts that are not "
                                       "supported by the content by enclosing them in [] and "
                                       "[/].",
        "topicbased_summarization": "Summarize the information in the following content that "
                                    "is related to the given topic.",
        "factuality_classification": "Does the content support all of the information in the "
                                     "summary? Answer Yes or No.",
        "extractive_summarization": "Label each sentence of the content (SENT0, SENT1, ...) "
                                    "with Yes if it should be included in an extractive "
                                    "summary, or No if it should not.",
        "evidence_extraction": "Label each sentence of the content (SENT0, SENT1, ...) with "
                               "Yes if it provides evidence for the claim, or No if it does "
                               "not.",
    },
}


@dataclass(frozen=True)
class PromptStyle:
    name: str
    kind: str
    template: str
    line_output: str
    stops: tuple[str, ...]


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: `text` always (for chat styles, the user message), `messages` for
    chat styles; `stops` end a generated continuation; `cue` precedes the output."""
    text: str
    messages: tuple[dict, ...] | None
    cue: str
    stops: tuple[str, ...]
    line_output: str

    def payload(self) -> str | list[dict]:
        """What a per-example output file records: the messages or the text."""
        return [dict(message) for message in self.messages] if self.messages else self.text


#: the USB release's own GPT-3.5 protocol (trainers.fewshot.official), not a PromptStyle
OFFICIAL_GPT35_STYLE = "gpt-3.5-official"


def style_names() -> list[str]:
    return sorted(STYLE_SPECS)


def get_style(style: str | PromptStyle) -> PromptStyle:
    if isinstance(style, PromptStyle):
        return style
    spec = STYLE_SPECS[check_choice(style, style_names(), "prompt style")]
    if spec["line_output"] not in LINE_OUTPUT_FORMS:
        raise ValueError(f"style {style!r}: line_output must be one of {LINE_OUTPUT_FORMS}")
    if not spec["template"].endswith("{cue}"):
        raise ValueError(f"style {style!r}: the template must end with {{cue}}")
    return PromptStyle(style, spec["kind"], spec["template"], spec["line_output"],
                       tuple(spec["stops"]))


def instruction(style: str | PromptStyle, task_name: str) -> str:
    name = get_style(style).name
    try:
        return INSTRUCTIONS[name][task_name]
    except KeyError:
        raise ValueError(f"style {name!r} has no instruction for task {task_name!r}") from None


def render_output(parts: FewShotParts, style: str | PromptStyle) -> str:
    """The gold output as the style writes it (line tasks: Yes/No sequence or id list)."""
    labels = parts.extra.get("line_labels")
    if labels is None or get_style(style).line_output == "yes_no":
        return parts.output
    positives = [f"SENT{k}" for k, label in enumerate(labels) if label]
    return " ".join(positives) or NO_POSITIVE_IDS


def render_shot(parts: FewShotParts, style: str | PromptStyle) -> str:
    """One demonstration: the content, the cue and the output (what the shot budget counts)."""
    return f"{parts.content}\n{parts.cue} {render_output(parts, style)}"


def stop_strings(item: FewShotParts, style: PromptStyle) -> tuple[str, ...]:
    """A newline followed by the cue or by any field label that opens a content line (where
    the next demonstration would start), plus the style's own stops."""
    labels = dict.fromkeys(_FIELD_LABEL.findall(item.content) + [item.cue])
    return tuple(f"\n{label}" for label in labels) + style.stops


def render(shots: Sequence[FewShotParts], item: FewShotParts, style: str | PromptStyle,
           task_name: str) -> Prompt:
    """The prompt for `item` after the `shots`, in `style`, with `task_name`'s instruction."""
    style = get_style(style)
    text = style.template.format(
        instruction=instruction(style, task_name),
        shots="".join(render_shot(shot, style) + "\n" for shot in shots),
        content=item.content, cue=item.cue)
    messages = ({"role": "user", "content": text},) if style.kind == "chat" else None
    return Prompt(text, messages, item.cue, stop_strings(item, style), style.line_output)
