"""Few-shot prompt parts of the USB tasks and their rendering in the four styles."""
from __future__ import annotations

import pytest

from tasks import get_task, task_names
from tasks.base import FewShotParts
from tasks.plumbing.errors import UnknownNameError
from tasks.plumbing.io import read_jsonl
from trainers.fewshot.prompts import (
    INSTRUCTIONS,
    STYLE_SPECS,
    VICUNA_SYSTEM,
    get_style,
    instruction,
    render,
    render_output,
    render_shot,
    style_names,
)

STYLES = ("flan-t5", "gpt-3.5", "gpt-3.5-first", "llama", "vicuna", "vicuna-chat")
CUES = {"ABS": "SUMMARY:", "COMP": "SUMMARY:", "TOPIC": "SUMMARY:", "FIX": "FIXED SUMMARY:",
        "UNSUP": "OUTPUT:", "FAC": "LABEL:", "EXT": "LABELS:", "EVEXT": "LABELS:"}


def split_instances(usb_fixture_dir, alias, split="test"):
    task = get_task(alias)
    path = usb_fixture_dir / "task_datasets" / "all" / task.name / f"{split}.jsonl"
    return task, task.instances(read_jsonl(path))


def test_every_style_has_an_instruction_for_every_task():
    assert style_names() == sorted(STYLES)
    assert sorted(INSTRUCTIONS) == ["flan-t5", "gpt-3.5", "gpt-3.5-first", "llama", "vicuna"]
    assert {style: get_style(style).instructions for style in STYLES} == {
        "flan-t5": "flan-t5", "gpt-3.5": "gpt-3.5", "gpt-3.5-first": "gpt-3.5-first",
        "llama": "llama", "vicuna": "vicuna", "vicuna-chat": "vicuna"}
    for name in INSTRUCTIONS:
        assert sorted(INSTRUCTIONS[name]) == task_names("usb")
        assert all(text.strip() == text and text for text in INSTRUCTIONS[name].values())
    for style in STYLES:
        assert STYLE_SPECS[style]["template"].endswith("{cue}")
    assert get_style("gpt-3.5").kind == "chat" and get_style("gpt-3.5").line_output == "id_list"
    assert get_style("gpt-3.5-first").kind == "chat"
    assert {get_style(s).line_output
            for s in ("flan-t5", "llama", "vicuna", "vicuna-chat")} == {"yes_no"}
    with pytest.raises(UnknownNameError, match="unknown prompt style 'gpt-4'"):
        get_style("gpt-4")
    with pytest.raises(ValueError, match="no instruction"):
        instruction("llama", "qa_generation")


def test_text_task_parts(usb_fixture_dir):
    task, instances = split_instances(usb_fixture_dir, "FIX")
    record = instances[0]
    parts = task.fewshot_parts(record)
    assert parts == FewShotParts(
        f"CONTENT: {' '.join(record['input_lines'])}\nSUMMARY: {record['initial_summary']}",
        record["fixed_summary"], "FIXED SUMMARY:")
    task, instances = split_instances(usb_fixture_dir, "TOPIC")
    parts = task.fewshot_parts(instances[1])
    assert parts.content == (f"TOPIC: {instances[1]['topic_name']}\n"
                             f"CONTENT: {' '.join(instances[1]['input_lines'])}")
    assert parts.output == " ".join(instances[1]["output_lines"])
    task, instances = split_instances(usb_fixture_dir, "FAC")
    assert [task.fewshot_parts(r).output for r in instances[:2]] == ["Yes", "No"]
    assert [r["label"] for r in instances[:2]] == [0, 1]
    task, instances = split_instances(usb_fixture_dir, "UNSUP")
    parts = task.fewshot_parts(instances[0])
    assert parts.output == instances[0]["annotated_summary"]
    assert parts.content.endswith(f"\nSUMMARY: {instances[0]['summary']}")


def test_every_task_and_style_renders_ending_with_the_cue(usb_fixture_dir):
    for alias, cue in CUES.items():
        task, instances = split_instances(usb_fixture_dir, alias)
        shots = [task.fewshot_parts(r) for r in instances[:2]]
        item = task.fewshot_parts(instances[-1])
        assert item.cue == cue
        for style in STYLES:
            prompt = render(shots, item, style, task.name)
            assert prompt.text.endswith(cue) and prompt.cue == cue
            assert instruction(style, task.name) in prompt.text
            assert prompt.text.count(item.content) >= 1
            assert f"\n{cue}" in prompt.stops or prompt.stops == ("\n",)


def test_line_task_parts_windows_and_output_forms(usb_fixture_dir):
    task, instances = split_instances(usb_fixture_dir, "EXT")
    record = instances[0]
    lines, labels = record["input_lines"], record["labels"]
    parts = task.fewshot_parts(record)
    assert parts.content == "CONTENT: " + " ".join(f"SENT{k} {line}"
                                                   for k, line in enumerate(lines))
    assert parts.output == task.format(record)[0].target  # the fine-tuning target
    assert parts.extra == {"line_labels": labels}
    window = task.fewshot_parts(record, lines=(2, 5))
    assert window.content == f"CONTENT: SENT0 {lines[2]} SENT1 {lines[3]} SENT2 {lines[4]}"
    assert window.extra["line_labels"] == labels[2:5]
    positives = " ".join(f"SENT{k}" for k, label in enumerate(labels) if label)
    assert render_output(parts, "gpt-3.5") == positives
    assert render_output(parts, "llama") == parts.output
    empty = FewShotParts("CONTENT: SENT0 a", "SENT0 No", "LABELS:", {"line_labels": [0]})
    assert render_output(empty, "gpt-3.5") == "NONE"

    task, instances = split_instances(usb_fixture_dir, "EVEXT")
    record = instances[0]
    parts = task.fewshot_parts(record, lines=(1, 3))
    assert parts.content == (f"CLAIM: {record['claim']}\nCONTENT:  SENT0 "
                             f"{record['input_lines'][1]} SENT1 {record['input_lines'][2]}")
    assert parts.extra["line_labels"] == [int(j in record["labels"]) for j in (1, 2)]


SHOTS = [FewShotParts("CONTENT: a b c", "abc", "SUMMARY:"),
         FewShotParts("CONTENT: {d} e", "de", "SUMMARY:")]
ITEM = FewShotParts("TOPIC: t\nCONTENT: x y", "xy", "SUMMARY:")
ABS = "abstractive_summarization"


def test_exact_layout_of_each_style():
    body = "CONTENT: a b c\nSUMMARY: abc\nCONTENT: {d} e\nSUMMARY: de\nTOPIC: t\nCONTENT: x y"
    flan = render(SHOTS, ITEM, "flan-t5", ABS)
    assert flan.text == f"Summarize the following content.\n{body}\nSUMMARY:"
    assert flan.messages is None and flan.payload() == flan.text
    assert flan.stops == ("\nTOPIC:", "\nCONTENT:", "\nSUMMARY:")
    llama = render(SHOTS, ITEM, "llama", ABS)
    assert llama.text == ("Write a concise summary of the following paragraph\n"
                          "CONTENT: a b c\nSUMMARY:abc\nCONTENT: {d} e\nSUMMARY:de\n"
                          "TOPIC: t\nCONTENT: x y\nSUMMARY:")
    assert llama.messages is None and llama.stops == ("\n",)
    vicuna = render(SHOTS, ITEM, "vicuna-chat", ABS)
    assert vicuna.text == (f"{VICUNA_SYSTEM} USER: Draft a summary for the given document.\n"
                           "CONTENT: a b c\nSUMMARY:abc\nCONTENT: {d} e\nSUMMARY:de\n"
                           "TOPIC: t\nCONTENT: x y ASSISTANT: SUMMARY:")
    assert vicuna.stops[-1] == "USER:"
    chat = render(SHOTS, ITEM, "gpt-3.5", ABS)
    assert chat.text == f"Draft a summary for the given document.\n{body}\nSUMMARY:"
    assert chat.messages == ({"role": "user", "content": chat.text},)
    assert chat.payload() == [{"role": "user", "content": chat.text}]
    zero = render([], ITEM, "flan-t5", ABS)
    assert zero.text == "Summarize the following content.\nTOPIC: t\nCONTENT: x y\nSUMMARY:"
    assert render_shot(SHOTS[0], "flan-t5") == "CONTENT: a b c\nSUMMARY: abc"
    assert render_shot(SHOTS[0], "llama", ABS) == "CONTENT: a b c\nSUMMARY:abc"
