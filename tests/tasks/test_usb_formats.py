"""Exact §5 input strings on the fixture records, targets, and parser round trips."""
from __future__ import annotations

import pytest

from tasks import get_task, task_names
from tasks.plumbing.io import read_jsonl

HOLLOW_LINES = (
    "Hollow Creek Bridge", "Aftermath.",
    "Hollow Creek Bridge acquired a small campus in Ohio in 1871.",
    "Hollow Creek Bridge closed a larger branch in Kent in 1925.", "History",
    "Hollow Creek Bridge moved a second campus in Osaka in 1964.",
    "Hollow Creek Bridge founded a larger plant in Perth in 1990.", "Early life",
    "Hollow Creek Bridge rebuilt a new plant in Kent in 1941.",
    "Hollow Creek Bridge renamed a new plant in Bergen in 1871.",
    "Hollow Creek Bridge moved a larger branch in Kent in 1913.")


def task_instances(usb_fixture_dir, name):
    task = get_task(name)
    path = usb_fixture_dir / "task_datasets" / "all" / task.name / "test.jsonl"
    return task, task.instances(read_jsonl(path))


def only_input(task, instance):
    inputs = task.format(instance)
    assert len(inputs) == 1 and inputs[0].window == 0
    return inputs[0]


def test_abs_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "ABS")
    model_input = only_input(task, instances[1])
    assert model_input.source == (
        "Summarize the following content :  Hollow Creek Bridge Aftermath. Hollow Creek Bridge "
        "acquired a small campus in Ohio in 1871. Hollow Creek Bridge closed a larger branch in "
        "Kent in 1925. History Hollow Creek Bridge moved a second campus in Osaka in 1964. Hollow "
        "Creek Bridge founded a larger plant in Perth in 1990. Early life Hollow Creek Bridge "
        "rebuilt a new plant in Kent in 1941. Hollow Creek Bridge renamed a new plant in Bergen in "
        "1871. Hollow Creek Bridge moved a larger branch in Kent in 1913.")
    assert model_input.target == (
        "Hollow Creek Bridge was closed in Ohio with the council during 1877 after a long review. "
        "Hollow Creek Bridge was renamed in Bergen by the council during 1984 after a long review. "
        "Hollow Creek Bridge was renamed in Ohio by a trust during 1931 after a long review. "
        "Hollow Creek Bridge was founded in Kent by its owners during 1807 after a long review. "
        "Hollow Creek Bridge was founded in Kent by the council during 1867 after a long review "
        "in Ohio.")
    assert model_input.lines is None


def test_comp_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "COMP")
    model_input = only_input(task, instances[1])
    assert model_input.source == ("Summarize the following content in a single line :  "
                                  "Port Alden acquired a new plant in Perth in 1892.")
    assert model_input.target == ("Port Alden was renamed in Quebec by its owners during 1838 "
                                  "after a long review.")


def test_topic_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "TOPIC")
    model_input = only_input(task, instances[2])
    assert model_input.source == (
        "Summarize the given content for the following topic :  TOPIC: Aftermath CONTENT: "
        "The 1911 Tarrow flood The 1911 Tarrow flood acquired a new campus in Ohio in 1958. "
        "The 1911 Tarrow flood moved a small office in Lisbon in 1950. The 1911 Tarrow flood "
        "moved a small campus in Lisbon in 1907. The 1911 Tarrow flood renamed a new wing in "
        "Lisbon in 1991. The 1911 Tarrow flood founded a new campus in Kent in 1995. The 1911 "
        "Tarrow flood acquired a second plant in Bergen in 1878. The 1911 Tarrow flood expanded "
        "a new plant in Kent in 1949.")
    assert model_input.target == ("The 1911 Tarrow flood was opened in Bergen by the council "
                                  "during 1974 after a long review.")


def test_fix_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "FIX")
    model_input = only_input(task, instances[0])
    assert model_input.source == (
        "Rewrite the given summary of the content to make it factually correct.  Summary: Port "
        "Alden was closed in Tucson by the council during 1990 after a long review. Content: Port "
        "Alden moved a larger office in Ohio in 1921. Port Alden opened a second branch in Ohio "
        "in 1985.")
    assert model_input.target == ("Port Alden was closed in Tucson with the council during 1990 "
                                  "after a long review.")


def test_unsup_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "UNSUP")
    model_input = only_input(task, instances[3])
    assert model_input.source == (
        "Annotate parts of the summary which are not supported by evidence from the content.  "
        "Summary: Known locally as the grand site , Hollow Creek Bridge was renamed in Ohio by a "
        "trust during 1931 after a long review and a vote. Content: Hollow Creek Bridge closed a "
        "larger branch in Kent in 1925. Hollow Creek Bridge moved a second campus in Osaka in "
        "1964.")
    assert model_input.target == (
        "[] Known locally as the grand site ,[/] Hollow Creek Bridge was renamed in Ohio by a "
        "trust during 1931 after a long review[] and a vote[/] .")


def test_fac_sources_and_yes_no_targets(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "FAC")
    supported, unsupported = (only_input(task, instance) for instance in instances[:2])
    assert unsupported.source == (
        "Is there sufficient evidence for the summary in the content? :  SUMMARY: Port Alden was "
        "closed in Tucson by the council during 1990 after a long review. CONTENT: Port Alden "
        "moved a larger office in Ohio in 1921. Port Alden opened a second branch in Ohio in "
        "1985.")
    assert (supported.target, unsupported.target) == ("Yes", "No")
    assert [only_input(task, i).target for i in instances] == [
        "No" if i["label"] else "Yes" for i in instances]


def test_ext_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "EXT")
    model_input = only_input(task, instances[1])
    assert tuple(instances[1]["input_lines"]) == HOLLOW_LINES
    assert model_input.source == (
        "For each sentence, predict if it is important.  SENT0 Hollow Creek Bridge SENT1 "
        "Aftermath. SENT2 Hollow Creek Bridge acquired a small campus in Ohio in 1871. SENT3 "
        "Hollow Creek Bridge closed a larger branch in Kent in 1925. SENT4 History SENT5 Hollow "
        "Creek Bridge moved a second campus in Osaka in 1964. SENT6 Hollow Creek Bridge founded "
        "a larger plant in Perth in 1990. SENT7 Early life SENT8 Hollow Creek Bridge rebuilt a "
        "new plant in Kent in 1941. SENT9 Hollow Creek Bridge renamed a new plant in Bergen in "
        "1871. SENT10 Hollow Creek Bridge moved a larger branch in Kent in 1913.")
    assert model_input.target == ("SENT0 No SENT1 No SENT2 Yes SENT3 Yes SENT4 No SENT5 Yes "
                                  "SENT6 No SENT7 No SENT8 Yes SENT9 Yes SENT10 No")
    assert model_input.lines == (0, 11)


def test_evext_instances_source_and_target(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "EVEXT")
    assert [(i["id"].split("/")[0], i["summ_idx"]) for i in instances][3:6] == [
        ("biographies", 3), ("companies", 0), ("companies", 1)]
    assert len(instances) == 13
    model_input = only_input(task, instances[6])
    assert model_input.source == (
        "For each sentence in the content, predict if it provides any evidence for the claim.  "
        "CLAIM: Hollow Creek Bridge was renamed in Ohio by a trust during 1931 after a long "
        "review. CONTENT:  SENT0 Hollow Creek Bridge SENT1 Aftermath. SENT2 Hollow Creek Bridge "
        "acquired a small campus in Ohio in 1871. SENT3 Hollow Creek Bridge closed a larger "
        "branch in Kent in 1925. SENT4 History SENT5 Hollow Creek Bridge moved a second campus in "
        "Osaka in 1964. SENT6 Hollow Creek Bridge founded a larger plant in Perth in 1990. SENT7 "
        "Early life SENT8 Hollow Creek Bridge rebuilt a new plant in Kent in 1941. SENT9 Hollow "
        "Creek Bridge renamed a new plant in Bergen in 1871. SENT10 Hollow Creek Bridge moved a "
        "larger branch in Kent in 1913.")
    assert instances[6]["labels"] == [3, 5]
    assert model_input.target == ("SENT0 No SENT1 No SENT2 No SENT3 Yes SENT4 No SENT5 Yes "
                                  "SENT6 No SENT7 No SENT8 No SENT9 No SENT10 No")


@pytest.mark.parametrize("name", ["ABS", "COMP", "TOPIC", "FIX", "UNSUP"])
def test_text_targets_parse_back_to_the_reference(usb_fixture_dir, name):
    task, instances = task_instances(usb_fixture_dir, name)
    reference_field = {"FIX": "fixed_summary", "UNSUP": "annotated_summary"}.get(name)
    for instance in instances:
        model_input = only_input(task, instance)
        expected = (instance[reference_field] if reference_field
                    else " ".join(instance["output_lines"]))
        assert task.parse(model_input.target, instance, model_input) == expected
        assert task.parse(f"  {expected}\n", instance, model_input) == f"  {expected}\n"
        assert task.is_parseable(model_input.target, instance, model_input)


def test_fac_parse_round_trip_and_tolerance(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "FAC")
    for instance in instances:
        target = only_input(task, instance).target
        assert task.parse(target, instance) == [1.0 - instance["label"]]
    instance = instances[0]
    for text, value in [(" yes.", 1.0), ("YES!", 1.0), ("No", 0.0), ("\"no\", it is not", 0.0),
                        ("Yes, the content says so", 1.0)]:
        assert task.parse(text, instance) == [value] and task.is_parseable(text, instance)
    for text in ["", "maybe", "Nothing supports it", "Yesterday"]:
        assert task.parse(text, instance) == [0.5]
        assert not task.is_parseable(text, instance)


@pytest.mark.parametrize("name", ["EXT", "EVEXT"])
def test_line_targets_parse_back_to_gold_labels(usb_fixture_dir, name):
    task, instances = task_instances(usb_fixture_dir, name)
    for instance in instances:
        model_input = only_input(task, instance)
        gold = [float(label) for label in task.line_labels(instance)]
        parsed = task.parse(model_input.target, instance, model_input)
        assert parsed == gold and len(gold) == len(instance["input_lines"])
        assert task.combine([parsed], instance, [model_input]) == gold
    assert sum(task.line_labels(instances[0])) >= 1


def test_line_parse_missing_duplicate_and_out_of_range_pairs(usb_fixture_dir):
    task, instances = task_instances(usb_fixture_dir, "EXT")
    instance = instances[1]  # 11 lines
    text = "SENT0: yes, SENT2 - YES SENT2 No SENT10 yes SENT11 Yes garbage"
    assert task.parse(text, instance) == [1.0, 0.0, 1.0] + [0.0] * 7 + [1.0]
    assert not task.is_parseable(text, instance)
    assert task.parse("", instance) == [0.0] * 11


def test_every_task_formats_every_fixture_record(usb_fixture_dir):
    for name in task_names("usb"):
        task, instances = task_instances(usb_fixture_dir, name)
        for instance in instances:
            (model_input,) = task.format(instance)
            assert model_input.target and model_input.source == model_input.source.strip()
            double_spaces = 2 if task.name == "evidence_extraction" else 1  # + "CONTENT:  SENT0"
            assert model_input.source.count("  ") == double_spaces
