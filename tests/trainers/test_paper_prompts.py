"""The paper's few-shot prompts (USB, usb-baselines.md §5.1-§5.2): Tables 7 and 8 verbatim in
the release's plain-text layout for `llama` and `vicuna`, Table 9's FIX wording for `gpt-3.5`,
the release's first one for `gpt-3.5-first`, and the chat-template variant `vicuna-chat`."""
from __future__ import annotations

import pytest

from benchmark.commands.options import SHARED, prompt_style
from tasks import get_task, task_names
from tasks.plumbing.errors import UnknownNameError
from tasks.plumbing.io import read_jsonl
from trainers.fewshot import official_prompts
from trainers.fewshot.prompts import VICUNA_SYSTEM, get_style, instruction, render, style_names

# usb-baselines.md §5.1, copied byte for byte from Tables 7 and 8 (endings as printed)
TABLE_7_LLAMA = {
    "abstractive_summarization": "Write a concise summary of the following paragraph",
    "multisentence_compression": "Write a one-line summary of the content shown below.",
    "topicbased_summarization": "Summarize the given content for the following topic.",
    "fixing_factuality": "Rewrite the given summary of the content to make it factually "
                         "correct.",
    "factuality_classification": "Is there sufficient evidence for the summary in the content?",
    "unsupported_span_prediction": "Regenerate the given summary, while surrounding those "
                                   "parts which do not have any supporting evidence in the "
                                   "content using [] and [/] tags",
    "extractive_summarization": "For each sentence in the given content, label it as Yes if it "
                                "is noteworthy enough to be included in a summary, or No "
                                "otherwise.",
    "evidence_extraction": "Go over each sentence in the content, and decide if it supports the "
                           "claim or not. Answer in Yes for a sentence if it supports the claim, "
                           "and answer No otherwise.",
}
TABLE_8_VICUNA = {
    "abstractive_summarization": "Draft a summary for the given document.",
    "multisentence_compression": "Write a single sentence summarizing the important points in "
                                 "the given content.",
    "topicbased_summarization": "Generate a summary of the given content covering the given "
                                "topic.",
    "fixing_factuality": "Rewrite the following summary to make it factually accurate",
    "factuality_classification": "Decide if the following summary is consistent with the "
                                 "corresponding content. Note that consistency means all "
                                 "information in the summary is supported by the content. "
                                 "Explain your reasoning step by step then answer (yes or no) "
                                 "the question",
    "unsupported_span_prediction": "Annotate parts of the summary which are not supported by "
                                   "evidence from the content",
    "extractive_summarization": "For each sentence, predict if it is important.",
    "evidence_extraction": "Predict which sentences in the given content can be used to infer "
                           "facts in the claim.",
}
FIX_FIRST = ("The summary might be incorrect. How would you rewrite it to make it factually "
             "accurate?")
FIX_TABLE_9 = FIX_FIRST + (" Make as little changes as possible. Do not add any new "
                           "information to the summary.")

FIXTURES = "task_datasets/all"
#: per task: how the shots and the item are cut from the fixture records ("whole": as they
#: are; "head": the first three input lines; (shot lines, item lines): EXT/EVEXT windows), and
#: how many shots (the first training instances)
SETUP = {"COMP": ("whole", 1), "FIX": ("whole", 1), "UNSUP": ("whole", 1), "FAC": ("whole", 2),
         "ABS": ("head", 1), "TOPIC": ("head", 1), "EXT": (((2, 5), (3, 5)), 1),
         "EVEXT": (((9, 11), (7, 9)), 1)}
#: the prompt after the instruction line, by hand: no space after a cue but FAC's " Yes" /
#: " No", SENT numbering from 0 in every window, `SENTk Yes|No` outputs, EVEXT's two spaces
#: after "CONTENT:" (the release's converter writes them)
BODIES = {
    "COMP": (
        'CONTENT: Mara Voss rebuilt a larger office in Lisbon in 1994. Mara Voss renamed '
        'a larger wing in Quebec in 1988. Mara Voss moved a small plant in Osaka in '
        '1913.\n'
        'SUMMARY:Mara Voss was acquired in Lisbon by its owners during 1931 after a long '
        'review.\n'
        'CONTENT: Port Alden moved a larger office in Ohio in 1921. Port Alden opened a '
        'second branch in Ohio in 1985.\n'
        'SUMMARY:'
    ),
    "FIX": (
        'CONTENT: Mara Voss rebuilt a larger office in Lisbon in 1994. Mara Voss renamed '
        'a larger wing in Quebec in 1988. Mara Voss moved a small plant in Osaka in '
        '1913.\n'
        'SUMMARY: Known locally as the grand site , Mara Voss was acquired in Lisbon by '
        'its owners during 1931 after a long review and a vote.\n'
        'FIXED SUMMARY:Mara Voss was acquired in Lisbon by its owners during 1931 after '
        'a long review.\n'
        'CONTENT: Port Alden moved a larger office in Ohio in 1921. Port Alden opened a '
        'second branch in Ohio in 1985.\n'
        'SUMMARY: Port Alden was closed in Tucson by the council during 1990 after a '
        'long review.\n'
        'FIXED SUMMARY:'
    ),
    "UNSUP": (
        'CONTENT: Mara Voss rebuilt a larger office in Lisbon in 1994. Mara Voss renamed '
        'a larger wing in Quebec in 1988. Mara Voss moved a small plant in Osaka in '
        '1913.\n'
        'SUMMARY: Known locally as the grand site , Mara Voss was acquired in Lisbon by '
        'its owners during 1931 after a long review and a vote.\n'
        'OUTPUT:[] Known locally as the grand site ,[/] Mara Voss was acquired in Lisbon '
        'by its owners during 1931 after a long review[] and a vote[/] .\n'
        'CONTENT: Port Alden acquired a new plant in Perth in 1892.\n'
        'SUMMARY: Port Alden was renamed in Quebec by its owners during 1838 after a '
        'long review.\n'
        'OUTPUT:'
    ),
    "FAC": (
        'CONTENT: Mara Voss rebuilt a larger office in Lisbon in 1994. Mara Voss renamed '
        'a larger wing in Quebec in 1988. Mara Voss moved a small plant in Osaka in '
        '1913.\n'
        'SUMMARY: Mara Voss was acquired in Lisbon by its owners during 1931 after a '
        'long review.\n'
        'LABEL: Yes\n'
        'CONTENT: Mara Voss rebuilt a larger office in Lisbon in 1994. Mara Voss renamed '
        'a larger wing in Quebec in 1988. Mara Voss moved a small plant in Osaka in '
        '1913.\n'
        'SUMMARY: Known locally as the grand site , Mara Voss was acquired in Lisbon by '
        'its owners during 1931 after a long review and a vote.\n'
        'LABEL: No\n'
        'CONTENT: Port Alden moved a larger office in Ohio in 1921. Port Alden opened a '
        'second branch in Ohio in 1985.\n'
        'SUMMARY: Port Alden was closed in Tucson with the council during 1990 after a '
        'long review.\n'
        'LABEL:'
    ),
    "ABS": (
        'CONTENT: Mara Voss Career Mara Voss founded a new branch in Lisbon in 1943.\n'
        'SUMMARY:Mara Voss was acquired in Lisbon by its owners during 1931 after a long '
        'review. Mara Voss was renamed in Tucson by the council during 1810 after a long '
        'review. Mara Voss was opened in Perth by a trust during 1927 after a long '
        'review. Mara Voss was acquired in Tucson by a trust during 1970 after a long '
        'review.\n'
        'CONTENT: Port Alden Early life Port Alden acquired a small campus in Ohio in '
        '1902.\n'
        'SUMMARY:'
    ),
    "TOPIC": (
        'TOPIC: History\n'
        'CONTENT: Mara Voss Mara Voss founded a new branch in Lisbon in 1943. Mara Voss '
        'founded a second office in Lisbon in 1961.\n'
        'SUMMARY:Mara Voss was renamed in Tucson by the council during 1810 after a long '
        'review.\n'
        'TOPIC: Early life\n'
        'CONTENT: Port Alden Port Alden acquired a small campus in Ohio in 1902. Port '
        'Alden opened a second branch in Ohio in 1985.\n'
        'SUMMARY:'
    ),
    "EXT": (
        'CONTENT: SENT0 Mara Voss founded a new branch in Lisbon in 1943. SENT1 Mara '
        'Voss founded a second office in Lisbon in 1961. SENT2 Mara Voss closed a new '
        'campus in Lisbon in 1991.\n'
        'LABELS:SENT0 No SENT1 Yes SENT2 No\n'
        'CONTENT: SENT0 Port Alden opened a second branch in Ohio in 1985. SENT1 Port '
        'Alden acquired a new plant in Perth in 1892.\n'
        'LABELS:'
    ),
    "EVEXT": (
        'CLAIM: Mara Voss was acquired in Lisbon by its owners during 1931 after a long '
        'review.\n'
        'CONTENT:  SENT0 Mara Voss expanded a larger branch in Quebec in 1876. SENT1 '
        'Mara Voss rebuilt a larger office in Lisbon in 1994.\n'
        'LABELS:SENT0 No SENT1 Yes\n'
        'CLAIM: Port Alden was closed in Tucson with the council during 1990 after a '
        'long review.\n'
        'CONTENT:  SENT0 Port Alden rebuilt a second wing in Kent in 1901. SENT1 Port '
        'Alden moved a larger office in Ohio in 1921.\n'
        'LABELS:'
    ),
}


def instances(usb_fixture_dir, task, split):
    return task.instances(read_jsonl(usb_fixture_dir / FIXTURES / task.name / f"{split}.jsonl"))


def build(usb_fixture_dir, alias):
    """(task, shots, item) of SETUP[alias] from the fixture records."""
    task = get_task(alias)
    train, test = instances(usb_fixture_dir, task, "train"), instances(usb_fixture_dir, task,
                                                                        "test")
    how, n_shots = SETUP[alias]
    if how == "whole":
        return task, [task.fewshot_parts(r) for r in train[:n_shots]], task.fewshot_parts(test[0])
    if how == "head":
        def cut(record):
            return dict(record, input_lines=record["input_lines"][:3])
        return task, [task.fewshot_parts(cut(train[0]))], task.fewshot_parts(cut(test[0]))
    shot_lines, item_lines = how
    return (task, [task.fewshot_parts(train[0], lines=shot_lines)],
            task.fewshot_parts(test[0], lines=item_lines))


def test_the_sixteen_instructions_are_tables_7_and_8_byte_for_byte(usb_fixture_dir):
    assert sorted(TABLE_7_LLAMA) == sorted(TABLE_8_VICUNA) == task_names("usb")
    for style, table in (("llama", TABLE_7_LLAMA), ("vicuna", TABLE_8_VICUNA),
                         ("vicuna-chat", TABLE_8_VICUNA)):
        for alias in SETUP:
            task, shots, item = build(usb_fixture_dir, alias)
            text = render(shots, item, style, task.name).text
            assert instruction(style, task.name) == table[task.name]
            if style == "vicuna-chat":
                assert text.startswith(f"{VICUNA_SYSTEM} USER: {table[task.name]}\n")
            else:
                assert text.startswith(table[task.name] + "\n")
    # the endings as printed: five strings end without a period or question mark
    assert [t for t in (*TABLE_7_LLAMA.values(), *TABLE_8_VICUNA.values())
            if not t.endswith((".", "?"))] == [
        TABLE_7_LLAMA["abstractive_summarization"], TABLE_7_LLAMA["unsupported_span_prediction"],
        TABLE_8_VICUNA["fixing_factuality"], TABLE_8_VICUNA["factuality_classification"],
        TABLE_8_VICUNA["unsupported_span_prediction"]]


@pytest.mark.parametrize("alias", list(SETUP))
@pytest.mark.parametrize("style, table", [("llama", TABLE_7_LLAMA), ("vicuna", TABLE_8_VICUNA)])
def test_paper_prompt_of_each_task_equals_the_hand_written_one(usb_fixture_dir, alias, style,
                                                               table):
    task, shots, item = build(usb_fixture_dir, alias)
    prompt = render(shots, item, style, task.name)
    assert prompt.text == table[task.name] + "\n" + BODIES[alias]
    assert prompt.messages is None and prompt.payload() == prompt.text
    assert "[INST]" not in prompt.text and "USER:" not in prompt.text
    assert prompt.line_output == "yes_no" and prompt.cue == item.cue
    assert prompt.stops == ("\n",)  # the answer ends at its first newline (§5.4)


def test_zero_shot_prompt_is_the_instruction_and_the_item(usb_fixture_dir):
    task, _, item = build(usb_fixture_dir, "FAC")
    prompt = render([], item, "llama", task.name)
    assert prompt.text == (TABLE_7_LLAMA["factuality_classification"] + "\n"
                           + BODIES["FAC"][BODIES["FAC"].index("CONTENT: Port Alden"):])


def test_the_layout_is_the_release_converters(usb_fixture_dir):
    """Shots and item as trainers.fewshot.official_prompts converts the records (the release's
    GPT-3.5 converter; its input strings and, outside EXT/EVEXT, its outputs)."""
    for alias in ("COMP", "FIX", "UNSUP", "FAC", "ABS", "TOPIC"):
        task = get_task(alias)
        train, test = (instances(usb_fixture_dir, task, split) for split in ("train", "test"))
        shots, item = train[:SETUP[alias][1]], test[0]
        expected = TABLE_7_LLAMA[task.name] + "\n"
        for shot in shots:
            converted = official_prompts.convert(task.name, shot, 10**6)[0]
            expected += converted["input_string"] + converted["output_string"] + "\n"
        expected += official_prompts.convert(task.name, item, 10**6)[0]["input_string"]
        rendered = render([task.fewshot_parts(s) for s in shots], task.fewshot_parts(item),
                          "llama", task.name)
        assert rendered.text == expected
    task = get_task("EXT")
    record = instances(usb_fixture_dir, task, "test")[0]
    converted = official_prompts.convert(task.name, record, 10**6)
    assert len(converted) == 1
    assert render([], task.fewshot_parts(record), "vicuna", task.name).text == (
        TABLE_8_VICUNA[task.name] + "\n" + converted[0]["input_string"])


def test_gpt35_takes_table_9s_fix_and_gpt35_first_the_releases_first_wording():
    assert instruction("gpt-3.5", "fixing_factuality") == FIX_TABLE_9
    assert instruction("gpt-3.5-first", "fixing_factuality") == FIX_FIRST
    assert official_prompts.INSTRUCTIONS["fixing_factuality"] == FIX_TABLE_9
    for name in task_names("usb"):
        assert instruction("gpt-3.5", name) == official_prompts.INSTRUCTIONS[name]
        if name != "fixing_factuality":
            assert instruction("gpt-3.5-first", name) == instruction("gpt-3.5", name)
    assert get_style("gpt-3.5-first").kind == "chat"
    assert get_style("gpt-3.5-first").line_output == "id_list"


def test_style_listing_help_and_unknown_styles():
    assert style_names() == ["flan-t5", "gpt-3.5", "gpt-3.5-first", "llama", "vicuna",
                             "vicuna-chat"]
    assert SHARED["style"].help == (
        "prompt style: flan-t5, gpt-3.5, gpt-3.5-first, llama, vicuna, vicuna-chat, "
        "gpt-3.5-official (default: the backend's; llama for hf-causal and lm-eval)")
    for name in ("vicuna-chat", "gpt-3.5-first", "gpt-3.5-official"):
        assert prompt_style(name) == name
    with pytest.raises(UnknownNameError) as caught:
        get_style("llama-2-chat")
    assert str(caught.value) == (
        "unknown prompt style 'llama-2-chat' (known: flan-t5, gpt-3.5, gpt-3.5-first, llama, "
        "vicuna, vicuna-chat)")
    assert "\n" not in str(caught.value)
