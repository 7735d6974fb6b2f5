"""`sumbench score --data DIR`: prediction files checked against the gold split before
scoring (tasks.gold) — the official script scores whatever references a file holds."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmark.cli import main
from tasks.plumbing.io import read_jsonl
from tests.tasks.test_windowed_files import official_windows

GOLD_ITEMS = {"abstractive_summarization": 3, "evidence_extraction": 13,
              "extractive_summarization": 3, "factuality_classification": 14,
              "fixing_factuality": 7, "multisentence_compression": 13,
              "topicbased_summarization": 3, "unsupported_span_prediction": 9}


def score(capsys, *args) -> tuple[int, str, str]:
    code = main(["score", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_records(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.fixture
def predictions(usb_fixture_dir) -> Path:
    return usb_fixture_dir / "predictions"


def test_complete_files_score_as_without_the_check_and_record_the_gold(
        capsys, tmp_path, predictions, data_dir):
    files = sorted(predictions.glob("*.jsonl"))
    code, unchecked, _ = score(capsys, *files)
    assert code == 0
    out = tmp_path / "scores.json"
    code, checked, err = score(capsys, *files, "--data", data_dir, "--out", out)
    assert (code, err) == (0, "")
    assert checked == unchecked
    against = json.loads(out.read_text())["_provenance"]["config"]["checked_against"]
    assert against["data"] == str(data_dir.resolve())
    assert (against["variant"], against["split"]) == ("all", "test")
    assert {name: entry["items"] for name, entry in against["tasks"].items()} == GOLD_ITEMS
    assert all(len(entry["gold_digest"]) == 32 for entry in against["tasks"].values())


def test_a_subset_of_the_test_items_is_refused_and_writes_nothing(
        capsys, tmp_path, predictions, data_dir):
    records = read_jsonl(predictions / "multisentence_compression.jsonl")
    path = write_records(tmp_path / "comp.jsonl", records[:5] + records[6:])
    assert score(capsys, path)[0] == 0  # the official way scores it
    out = tmp_path / "scores.json"
    code, stdout, err = score(capsys, path, "--data", data_dir, "--out", out)
    assert (code, stdout) == (2, "")
    assert (f"{path}: 1 of 13 gold test items of multisentence_compression have no "
            f"prediction record (first: multisentence_compression: "
            f"id={records[5]['id']!r}, summ_idx={records[5]['summ_idx']})") in err
    assert not out.exists()


def test_an_edited_reference_names_line_and_field(capsys, tmp_path, predictions, data_dir):
    records = read_jsonl(predictions / "fixing_factuality.jsonl")
    records[3]["fixed_summary"] += " And more."
    path = write_records(tmp_path / "fix.jsonl", records)
    code, _, err = score(capsys, path, "--data", data_dir)
    assert code == 2
    assert f"{path}:4, field 'fixed_summary': differs from the gold item's in {data_dir}" in err


def test_an_extractive_item_missing_its_last_window_is_caught(
        capsys, tmp_path, predictions, data_dir):
    task = "extractive_summarization"
    windows = [window for record in read_jsonl(predictions / f"{task}.jsonl")
               for window in official_windows(record, task)]
    last = max(range(len(windows)), key=lambda i: (windows[i]["id"] == windows[0]["id"], i))
    path = write_records(tmp_path / "ext.jsonl", windows[:last] + windows[last + 1:])
    assert score(capsys, path)[0] == 0
    code, _, err = score(capsys, path, "--data", data_dir)
    assert code == 2
    assert "field 'input_lines': differs from the gold item's" in err
    assert f"id={windows[0]['id']!r}" in err


def test_items_of_another_variant_and_a_flipped_fac_label(capsys, tmp_path, predictions,
                                                          data_dir):
    code, _, err = score(capsys, predictions / "abstractive_summarization.jsonl",
                         "--data", data_dir, "--variant", "biographies")
    assert code == 2
    assert "abstractive_summarization.jsonl:2, field 'id': no such test item in" in err
    assert "(variant 'biographies'): abstractive_summarization: id='companies/" in err
    # FAC's two records of one sentence share id and summ_idx; a flipped label (its twin
    # left out) makes a record claim the twin's identity, whose claim is another sentence
    records = read_jsonl(predictions / "factuality_classification.jsonl")
    twin = next(i for i, r in enumerate(records) if i and (r["id"], r["summ_idx"])
                == (records[0]["id"], records[0]["summ_idx"]))
    records[0]["label"] = 1 - records[0]["label"]
    path = write_records(tmp_path / "fac.jsonl", records[:twin] + records[twin + 1:])
    assert score(capsys, path)[0] == 0
    code, _, err = score(capsys, path, "--data", data_dir)
    assert code == 2
    assert f"{path}:1, field 'summary_sent': differs from the gold item's" in err


def test_items_of_another_split_name_it(capsys, predictions, data_dir):
    code, _, err = score(capsys, predictions / "fixing_factuality.jsonl", "--data", data_dir,
                         "--split", "validation")
    assert code == 2 and err.startswith("sumbench score: error: ")
    assert err.rstrip().endswith("; it is a test item: give --split test")
    assert "no such validation item in" in err and len(err.splitlines()) == 1


def test_missing_folder_and_missing_task_split(capsys, tmp_path, predictions, data_dir):
    abs_file = predictions / "abstractive_summarization.jsonl"
    code, _, err = score(capsys, abs_file, "--split", "validation")
    assert code == 2 and "--split name what --data is checked against; give --data DIR" in err
    code, _, err = score(capsys, abs_file, "--data", tmp_path / "nowhere")
    assert code == 2
    assert f"{tmp_path / 'nowhere'}: --data: no such task-datasets folder" in err
    partial = Path(shutil.copytree(data_dir, tmp_path / "data"))
    shutil.rmtree(partial / "all" / "abstractive_summarization")
    code, _, err = score(capsys, abs_file, "--data", partial)
    assert code == 2
    assert ("--data: cannot read the gold test split of abstractive_summarization "
            "(variant 'all')") in err
    assert "task data file not found" in err


@pytest.mark.parametrize("task", ["extractive_summarization", "evidence_extraction"])
def test_complete_official_windowed_files_pass_the_check(capsys, tmp_path, predictions,
                                                         data_dir, task):
    """The official windows list EVEXT's evidence lines in line order (the dataset in its own)
    and carry no `claim` (it is only inside their input_string)."""
    windows = [window for record in read_jsonl(predictions / f"{task}.jsonl")
               for window in official_windows(record, task)]
    path = write_records(tmp_path / f"{task}.jsonl", windows)
    code, unchecked, _ = score(capsys, path)
    assert code == 0
    code, checked, err = score(capsys, path, "--data", data_dir)
    assert (code, err) == (0, "")
    assert checked == unchecked


def test_evidence_lines_in_another_order_are_the_same_reference(capsys, tmp_path,
                                                                predictions, data_dir):
    records = read_jsonl(predictions / "evidence_extraction.jsonl")
    assert any(record["labels"] != sorted(record["labels"]) for record in records)
    for record in records:
        record["labels"] = sorted(record["labels"], reverse=True)
    path = write_records(tmp_path / "evext.jsonl", records)
    assert score(capsys, path, "--data", data_dir)[0] == 0
    records[0]["labels"] = records[0]["labels"][1:]
    path = write_records(tmp_path / "evext.jsonl", records)
    code, _, err = score(capsys, path, "--data", data_dir)
    assert code == 2 and "evext.jsonl:1, field 'labels': differs from the gold item's" in err


def test_a_task_without_the_variant_names_the_folder(capsys, tmp_path, data_dir):
    record = {"task": "qa_generation", "id": "e1-0", "example_id": "e1", "predicate_index": 0,
              "predicate": "won", "qas": [["Who won something?", "the team"]],
              "prediction": [["Who won something?", "the team"]]}
    path = write_records(tmp_path / "qa.jsonl", [record])
    code, _, err = score(capsys, path, "--data", data_dir)
    assert code == 2
    assert (f"{data_dir}: --data: cannot read the gold test split of qa_generation: unknown "
            f"qa_generation variant 'all' (known: qapyramid, raw)") in err


def test_gold_that_lists_an_item_twice_is_refused(capsys, tmp_path, predictions, data_dir):
    """Which copy a record is checked against was unclear (the last one was kept), and a
    copy with other references made the prediction file look wrong."""
    data = Path(shutil.copytree(data_dir, tmp_path / "data"))
    gold = data / "all" / "abstractive_summarization" / "test.jsonl"
    first = gold.read_text().splitlines()[0]
    gold.write_text(gold.read_text() + first + "\n")
    code, out, err = score(capsys, predictions / "abstractive_summarization.jsonl", "--data",
                           data)
    assert code == 2 and out == ""
    assert (f"{gold}: --data: the gold test split of abstractive_summarization (variant "
            f"'all') lists one item twice, as its items 1 and 4 in file order (") in err


def test_empty_options_and_a_folder_of_several_datasets_are_refused(
        capsys, tmp_path, predictions, data_dir):
    """`--data ""` was the current folder, `--variant ""` was `all`, and a folder holding two
    task-datasets folders gave the first by name."""
    abs_file = predictions / "abstractive_summarization.jsonl"
    for option, value in (("--data", ""), ("--variant", "")):
        extra = () if option == "--data" else ("--data", data_dir)
        code, _, err = score(capsys, abs_file, option, value, *extra)
        assert code == 2 and f"{option} is given empty" in err
    two = tmp_path / "two"
    for name in ("a-data", "b-data"):
        shutil.copytree(data_dir, two / name)
    code, _, err = main(["baseline", "--data", str(two), "--tasks", "abs", "--out",
                         str(tmp_path / "b")]), None, capsys.readouterr().err
    assert code == 2 and not (tmp_path / "b").exists()
    assert (f"{two}: 2 task-datasets folders under this folder ({two / 'a-data'}, "
            f"{two / 'b-data'}): give one of them") in err
    code, _, err = main(["baseline", "--data", "", "--tasks", "abs", "--out",
                         str(tmp_path / "b")]), None, capsys.readouterr().err
    assert code == 2 and "the data folder is given empty" in err
