"""Few-shot prompt formatting: instruction sets per style, output forms, `render`.

Everything a style changes is data (`STYLE_SPECS`, `INSTRUCTIONS`), never a code branch:

- Layout (all styles): the instruction on its own line, then one block per shot,
  `{content}\\n{cue}{gap}{output}\\n`, then the item's `{content}\\n{cue}` -- the layout of the
  USB release, where every shot's output and the final prompt follow a cue word ("SUMMARY:",
  "LABELS:", ...). The gap between a shot's cue and its output is the style's `cue_gap`, or
  its `task_gaps` entry for the task: the paper's Llama and Vicuna styles write the release's
  plain text (usb-baselines.md §5.2), no gap except FAC's " Yes" / " No"; the other styles
  one space. `vicuna-chat` wraps that layout in Vicuna v1.1's chat template, written as a
  plain string, with the item's cue after the template's answer marker (not the paper's).
- Output form of the line-labelling tasks (EXT, EVEXT): `yes_no` writes `SENT0 Yes SENT1 No ...`
  (the fine-tuning target); `id_list` writes the positive sentence ids, `SENT2 SENT5` (what the
  release asked of GPT-3.5), or `NONE` when no sentence is positive.
- `gpt-3.5` and `gpt-3.5-first` are chat styles: the body is sent as one user message (as in
  the release).

Instruction sets (a style names one): `llama` and `vicuna` are the paper's Tables 7 and 8,
verbatim with their endings as printed (usb-baselines.md §5.1); `gpt-3.5` is Table 9, the
release's newest wordings (trainers.fewshot.official_prompts); `gpt-3.5-first` keeps the
release's first FIX wording (commit 4aeed6e, without "Make as little changes as possible. ...");
the Flan-T5 ones follow the fine-tuning instructions (usb-format.md §5).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.base import FewShotParts
from tasks.plumbing.errors import check_choice
from trainers.fewshot.official_prompts import INSTRUCTIONS as RELEASE_GPT35_INSTRUCTIONS

LINE_OUTPUT_FORMS = ("yes_no", "id_list")
#: what an `id_list` output says when no sentence is positive
NO_POSITIVE_IDS = "NONE"
_FIELD_LABEL = re.compile(r"^([A-Z][A-Z ]*[A-Z]:)", re.MULTILINE)

VICUNA_SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. "
                 "The assistant gives helpful, detailed, and polite answers to the user's "
                 "questions.")
_PLAIN = "{instruction}\n{shots}{content}\n{cue}"
#: Table 10's Llama/Vicuna budgets with usb-baselines.md §5.3's choices: prompts of at most
#: 6144 tokens (content cut by the cumulative token count of its lines, 8 tokens spare),
#: 512 new tokens, EXT/EVEXT windows closing at 512 tokens of Yes/No output
PAPER_LLM_BUDGET = {"max_prompt_tokens": 6144, "max_new_tokens": 512, "content_margin": 8,
                    "max_window_output_tokens": 512}
#: the release's plain text (the output right after the cue, but FAC's " Yes" / " No") and
#: the paper's budgets
_RELEASE_GAPS = {"cue_gap": "", "task_gaps": {"factuality_classification": " "},
                 "budget": PAPER_LLM_BUDGET}

#: per style: kind ("text": one string; "chat": messages), instruction set, template of the
#: whole prompt ({instruction}, {shots}: the demonstrations, {content}, {cue}: it must end
#: with the cue), line-task output form, extra stop strings, gap between a shot's cue and
#: its output (`cue_gap`, per task `task_gaps`)
STYLE_SPECS: dict[str, dict] = {
    "flan-t5": {"kind": "text", "instructions": "flan-t5", "template": _PLAIN,
                "line_output": "yes_no", "stops": ()},
    "llama": {"kind": "text", "instructions": "llama", "template": _PLAIN,
              "line_output": "yes_no", "stops": ("\n",), **_RELEASE_GAPS},
    "vicuna": {"kind": "text", "instructions": "vicuna", "template": _PLAIN,
               "line_output": "yes_no", "stops": ("\n",), **_RELEASE_GAPS},
    "vicuna-chat": {"kind": "text", "instructions": "vicuna",
                    "template": (VICUNA_SYSTEM
                                 + " USER: {instruction}\n{shots}{content} ASSISTANT: {cue}"),
                    "line_output": "yes_no", "stops": ("USER:",), **_RELEASE_GAPS},
    "gpt-3.5": {"kind": "chat", "instructions": "gpt-3.5", "template": _PLAIN,
                "line_output": "id_list", "stops": ()},
    "gpt-3.5-first": {"kind": "chat", "instructions": "gpt-3.5-first", "template": _PLAIN,
                      "line_output": "id_list", "stops": ()},
}

INSTRUCTIONS: dict[str, dict[str, str]] = {
    "gpt-3.5": dict(RELEASE_GPT35_INSTRUCTIONS),
    "gpt-3.5-first": {
        **RELEASE_GPT35_INSTRUCTIONS,
        "fixing_factuality": "The summary might be incorrect. How would you rewrite it to make "
                             "it factually accurate?",
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
    # Table 7 (Llama-13B), verbatim: endings as printed, missing final periods kept
    "llama": {
        "abstractive_summarization": "Write a concise summary of the following paragraph",
        "multisentence_compression": "Write a one-line summary of the content shown below.",
        "topicbased_summarization": "Summarize the given content for the following topic.",
        "fixing_factuality": "Rewrite the given summary of the content to make it factually "
                             "correct.",
        "factuality_classification": "Is there sufficient evidence for the summary in the "
                                     "content?",
        "unsupported_span_prediction": "Regenerate the given summary, while surrounding those "
                                       "parts which do not have any supporting evidence in the "
                                       "content using [] and [/] tags",
        "extractive_summarization": "For each sentence in the given content, label it as Yes if "
                                    "it is noteworthy enough to be included in a summary, or No "
                                    "otherwise.",
        "evidence_extraction": "Go over each sentence in the content, and decide if it supports "
                               "the claim or not. Answer in Yes for a sentence if it supports "
                               "the claim, and answer No otherwise.",
    },
    # Table 8 (Vicuna-13B), verbatim: endings as printed, missing final periods kept
    "vicuna": {
        "abstractive_summarization": "Draft a summary for the given document.",
        "multisentence_compression": "Write a single sentence summarizing the important points "
                                     "in the given content.",
        "topicbased_summarization": "Generate a summary of the given content covering the given "
                                    "topic.",
        "fixing_factuality": "Rewrite the following summary to make it factually accurate",
        "factuality_classification": "Decide if the following summary is consistent with the "
                                     "corresponding content. Note that consistency means all "
                                     "information in the summary is supported by the content. "
                                     "Explain your reasoning step by step then answer (yes or "
                                     "no) the question",
        "unsupported_span_prediction": "Annotate parts of the summary which are not supported "
                                       "by evidence from the content",
        "extractive_summarization": "For each sentence, predict if it is important.",
        "evidence_extraction": "Predict which sentences in the given content can be used to "
                               "infer facts in the claim.",
    },
}


@dataclass(frozen=True)
class PromptStyle:
    name: str
    kind: str
    template: str
    line_output: str
    stops: tuple[str, ...]
    instructions: str = ""
    cue_gap: str = " "
    task_gaps: tuple[tuple[str, str], ...] = ()
    #: the style's own prompt budgets (PAPER_LLM_BUDGET's keys); empty: the runner's
    budget: tuple[tuple[str, int], ...] = ()

    def gap(self, task_name: str | None) -> str:
        """What separates a shot's cue from its output in `task_name`'s prompts."""
        return dict(self.task_gaps).get(task_name, self.cue_gap)


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
                       tuple(spec["stops"]), spec["instructions"], spec.get("cue_gap", " "),
                       tuple(sorted(spec.get("task_gaps", {}).items())),
                       tuple(sorted(spec.get("budget", {}).items())))


def instruction(style: str | PromptStyle, task_name: str) -> str:
    chosen = get_style(style)
    try:
        return INSTRUCTIONS[chosen.instructions][task_name]
    except KeyError:
        raise ValueError(f"style {chosen.name!r} has no instruction for task "
                         f"{task_name!r}") from None


def render_output(parts: FewShotParts, style: str | PromptStyle) -> str:
    """The gold output as the style writes it (line tasks: Yes/No sequence or id list)."""
    labels = parts.extra.get("line_labels")
    if labels is None or get_style(style).line_output == "yes_no":
        return parts.output
    positives = [f"SENT{k}" for k, label in enumerate(labels) if label]
    return " ".join(positives) or NO_POSITIVE_IDS


def render_shot(parts: FewShotParts, style: str | PromptStyle,
                task_name: str | None = None) -> str:
    """One demonstration: the content, the cue, the style's gap for `task_name` and the
    output (what the shot budget counts)."""
    style = get_style(style)
    return f"{parts.content}\n{parts.cue}{style.gap(task_name)}{render_output(parts, style)}"


def stop_strings(item: FewShotParts, style: PromptStyle) -> tuple[str, ...]:
    """A newline followed by the cue or by any field label that opens a content line (where
    the next demonstration would start), plus the style's own stops; only the style's when
    they end the answer at its first newline (`llama`, `vicuna`: every gold output of the
    release's layout is one line, usb-baselines.md §5.4)."""
    if "\n" in style.stops:
        return style.stops
    labels = dict.fromkeys(_FIELD_LABEL.findall(item.content) + [item.cue])
    return tuple(f"\n{label}" for label in labels) + style.stops


def render(shots: Sequence[FewShotParts], item: FewShotParts, style: str | PromptStyle,
           task_name: str) -> Prompt:
    """The prompt for `item` after the `shots`, in `style`, with `task_name`'s instruction."""
    style = get_style(style)
    text = style.template.format(
        instruction=instruction(style, task_name),
        shots="".join(render_shot(shot, style, task_name) + "\n" for shot in shots),
        content=item.content, cue=item.cue)
    messages = ({"role": "user", "content": text},) if style.kind == "chat" else None
    return Prompt(text, messages, item.cue, stop_strings(item, style), style.line_output)
