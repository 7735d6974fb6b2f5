"""Robust few-shot output parsers: (prediction, ok), never an exception."""
from __future__ import annotations

import pytest

from tasks import get_task
from tasks.base import FewShotParts
from trainers.fewshot.parsers import (
    clean_text_output,
    parse_fewshot_output,
    parse_id_list,
    parse_spans,
    parse_yes_no,
    parse_yes_no_sequence,
    parse_yes_probability,
)

STOPS = ("\nCONTENT:", "\nSUMMARY:")


def test_text_is_cut_at_the_next_demonstration_and_loses_a_repeated_cue():
    assert clean_text_output(" The summary.\nCONTENT: next shot", "SUMMARY:", STOPS) == (
        "The summary.", True)
    assert clean_text_output("\n summary: Twice cued.\nSUMMARY: x", "SUMMARY:", STOPS) == (
        "Twice cued.", True)
    assert clean_text_output("Two\nlines kept.", "SUMMARY:", STOPS) == ("Two\nlines kept.", True)
    assert clean_text_output("   ", "SUMMARY:", STOPS) == ("", False)
    assert clean_text_output("\nCONTENT: only the next shot", "SUMMARY:", STOPS) == ("", False)
    assert clean_text_output(None, "SUMMARY:") == ("", False)


@pytest.mark.parametrize("text, expected", [
    ("Yes", True), (" no.", False), ("YES, the summary is supported.", True),
    ("No - it is not.", False), ("The summary is not supported by the content.", False),
    ("Not consistent", False), ("The summary is inconsistent.", False),
    ("Insufficient evidence.", False), ("The summary is consistent with the content.", True),
    ("present", True), ("not present", False), ("True", True), ("false", False),
    ("I think yes", True), ("Answer: no", False),
])
def test_yes_no_answers(text, expected):
    assert parse_yes_no(text) == (expected, True)


@pytest.mark.parametrize("text", ["", "maybe", "Notable", "???", "I am unsure."])
def test_unreadable_yes_no(text):
    assert parse_yes_no(text) == (None, False)
    assert parse_yes_probability(text) == ([0.5], False)


def test_yes_probability():
    assert parse_yes_probability(" Yes") == ([1.0], True)
    assert parse_yes_probability("No.") == ([0.0], True)


def test_yes_no_sequences_with_noise():
    assert parse_yes_no_sequence("SENT0 Yes SENT1 No SENT2 yes", 3) == ([1.0, 0.0, 1.0], True)
    noisy = "SENT0: Yes, SENT1 - no; sent 2 YES. SENT1 Yes SENT7 Yes"
    assert parse_yes_no_sequence(noisy, 3) == ([1.0, 0.0, 1.0], True)  # first label wins
    assert parse_yes_no_sequence("SENT0 Yes SENT2 No", 3) == ([1.0, 0.0, 0.0], False)
    assert parse_yes_no_sequence("Yes No Yes", 3) == ([1.0, 0.0, 1.0], True)
    assert parse_yes_no_sequence("Yes No", 3) == ([0.0, 0.0, 0.0], False)
    assert parse_yes_no_sequence("gibberish", 2) == ([0.0, 0.0], False)
    assert parse_yes_no_sequence("", 0) == ([], True)


@pytest.mark.parametrize("text", ["SENT2 SENT5", "SENT2, SENT 5", "[2, 5]", "2,5",
                                  "Sentences 2 and 5.", "sent5 sent2 SENT9", "[SENT2, SENT5]"])
def test_positive_id_lists(text):
    assert parse_id_list(text, 6) == ([0.0, 0.0, 1.0, 0.0, 0.0, 1.0], True)


@pytest.mark.parametrize("text, ok", [("NONE", True), ("[]", True), ("", True),
                                      ("None.", True), ("No sentences", True),
                                      ("I cannot tell", False), ("SENT9", False),
                                      ("SENT12, SENT40", False)])
def test_empty_and_unusable_id_lists(text, ok):
    assert parse_id_list(text, 4) == ([0.0] * 4, ok)


def test_span_markers_are_normalised_and_repaired():
    assert parse_spans("[] Known locally ,[/] it was built .") == (
        "[] Known locally ,[/] it was built .", True)
    assert parse_spans("[ ] a [ / ] b") == ("[] a [/] b", True)
    assert parse_spans("a [/] b [] c [/]") == ("a  b [] c [/]", True)
    assert parse_spans("[] a [] b [/] c") == ("[] a  b [/] c", True)
    assert parse_spans("a [] b c") == ("a [] b c", True)  # unclosed: runs to the end
    assert parse_spans("[][/]") == ("[][/]", False)
    assert parse_spans("") == ("", False)


def test_repaired_spans_score_with_the_official_metric():
    task = get_task("UNSUP")
    summary = "Mara Voss was acquired in Lisbon after a long review and a vote ."
    gold = "Mara Voss was acquired in Lisbon after a long review[] and a vote[/] ."
    record = {"summary": summary, "annotated_summary": gold}
    predicted, ok = parse_spans("Mara Voss was acquired in Lisbon after a long review"
                                "[ ] and a vote[ /] .[/]")
    assert ok
    scores = task.score([{**record, "prediction": predicted}])
    assert scores["f1"] == pytest.approx(1.0)


def test_dispatch_by_task_and_output_form():
    ext = get_task("EXT")
    item = FewShotParts("CONTENT: SENT0 a SENT1 b SENT2 c", "SENT0 No SENT1 Yes SENT2 No",
                        "LABELS:", {"line_labels": [0, 1, 0]})
    stops = ("\nCONTENT:", "\nLABELS:")
    assert parse_fewshot_output(ext, " SENT0 No SENT1 Yes SENT2 Yes\nCONTENT: SENT0 No", item,
                                cue="LABELS:", stops=stops, line_output="yes_no") == (
        [0.0, 1.0, 1.0], True)
    assert parse_fewshot_output(ext, "LABELS: SENT1\nCONTENT: SENT0", item, cue="LABELS:",
                                stops=stops, line_output="id_list") == ([0.0, 1.0, 0.0], True)
    fac = get_task("FAC")
    plain = FewShotParts("CONTENT: x\nSUMMARY: y", "Yes", "LABEL:")
    assert parse_fewshot_output(fac, " No\nCONTENT: Yes", plain, cue="LABEL:",
                                stops=("\nCONTENT:",), line_output="yes_no") == ([0.0], True)
    assert parse_fewshot_output(fac, "\nCONTENT: Yes", plain, cue="LABEL:",
                                stops=("\nCONTENT:",), line_output="yes_no") == ([0.5], False)
    unsup = get_task("UNSUP")
    assert parse_fewshot_output(unsup, " a [ ] b\nCONTENT: c", plain, cue="OUTPUT:",
                                stops=("\nCONTENT:",), line_output="yes_no") == ("a [] b", True)
    abs_task = get_task("ABS")
    assert parse_fewshot_output(abs_task, " A summary.\nCONTENT: z", plain, cue="SUMMARY:",
                                stops=("\nCONTENT:",), line_output="id_list") == (
        "A summary.", True)
