"""The official converter's windowed EXT / EVEXT prediction files (one record per window,
`sub_index`) are read and scored as the official evaluation pools them."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn import metrics

from tasks.plumbing.errors import DataError
from tasks.plumbing.io import read_jsonl
from tasks.scoring import score_files


def official_windows(record: dict, task: str, size: int = 3) -> list[dict]:
    """A record cut into windows of `size` lines as the release's converter writes them."""
    windows, lines = [], record["input_lines"]
    for sub_index, start in enumerate(range(0, len(lines), size)):
        end = min(start + size, len(lines))
        window = {"task": task, "id": record["id"], "input_lines": lines[start:end],
                  "prediction": record["prediction"][start:end], "sub_index": sub_index,
                  "input_string": "...", "output_string": "..."}
        if task == "evidence_extraction":
            window["summ_idx"] = record["summ_idx"]
            window["labels"] = [j - start for j in record["labels"] if start <= j < end]
        else:
            window["labels"] = record["labels"][start:end]
        windows.append(window)
    return windows


def official_pooled(windows: list[dict], task: str) -> dict:
    """evaluate_all.py's computation over window records (truncate / pad per record)."""
    labels, probs = [], []
    for window in windows:
        size = len(window["input_lines"])
        prediction = (window["prediction"][:size] + [0] * size)[:size]
        if task == "evidence_extraction":
            onehot = [0] * size
            for index in window["labels"]:
                onehot[index] = 1
            labels.extend(onehot)
        else:
            labels.extend(window["labels"])
        probs.extend(prediction)
    predicted = np.round(probs).astype(int)
    return {"auc": metrics.roc_auc_score(labels, probs),
            "f1": metrics.f1_score(labels, predicted),
            "precision": metrics.precision_score(labels, predicted),
            "recall": metrics.recall_score(labels, predicted),
            "accuracy": metrics.accuracy_score(labels, predicted)}


@pytest.mark.parametrize("task", ["extractive_summarization", "evidence_extraction"])
def test_windowed_files_score_as_the_official_evaluation(usb_fixture_dir, tmp_path, task):
    records = read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")
    windows = [w for record in records for w in official_windows(record, task)]
    windows[1]["prediction"] = windows[1]["prediction"][:-1]  # one short window
    path = tmp_path / f"{task}.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for w in windows))
    scores = score_files([path])[task]
    expected = official_pooled(windows, task)
    for key, value in expected.items():
        assert scores[key] == pytest.approx(value, abs=1e-12), key
    assert scores["n_records"] == len(records) and scores["length_mismatches"] == 1


def test_unwindowed_and_windowed_files_agree(usb_fixture_dir, tmp_path):
    task = "extractive_summarization"
    records = read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")
    path = tmp_path / "ext.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for r in records
                            for w in official_windows(r, task)))
    windowed = score_files([path])[task]
    whole = score_files([usb_fixture_dir / "predictions" / f"{task}.jsonl"])[task]
    assert windowed == whole


@pytest.mark.parametrize("edit, message", [
    (lambda ws: ws + [dict(ws[0])], r"have sub_index \[0, 0, 1"),
    (lambda ws: [w for w in ws if w["sub_index"] != 1 or w is not ws[1]], "expected 0.."),
])
def test_broken_window_sets_are_errors(usb_fixture_dir, tmp_path, edit, message):
    task = "extractive_summarization"
    records = read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")
    windows = edit(official_windows(records[0], task))
    path = tmp_path / "ext.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for w in windows))
    with pytest.raises(DataError, match=message) as caught:
        score_files([path])
    assert caught.value.field == "sub_index" and caught.value.path == str(path)


def _edited(window: dict, **changes) -> dict:
    edited = {**window, **changes}
    return {key: value for key, value in edited.items() if value is not _DROP}


_DROP = object()


@pytest.mark.parametrize("task, position, changes, field, message", [
    ("extractive_summarization", 1, {"sub_index": "1"}, "sub_index", "non-negative integer"),
    ("extractive_summarization", 1, {"sub_index": True}, "sub_index", "got true"),
    ("extractive_summarization", 1, {"sub_index": None}, "sub_index", "got null"),
    ("extractive_summarization", 1, {"sub_index": 1.0}, "sub_index", "got 1.0"),
    ("extractive_summarization", 1, {"id": ["a"]}, "id", "expected a string"),
    ("extractive_summarization", 1, {"input_lines": _DROP}, "input_lines", "missing field"),
    ("extractive_summarization", 1, {"sub_index": 0}, "sub_index", r"\[0, 0, 2, "),
    ("evidence_extraction", 0, {"summ_idx": "0"}, "summ_idx", "non-negative integer"),
])
def test_a_bad_window_is_named_by_its_line_and_field(usb_fixture_dir, tmp_path, task, position,
                                                     changes, field, message):
    records = read_jsonl(usb_fixture_dir / "predictions" / f"{task}.jsonl")
    windows = official_windows(records[0], task)
    assert len(windows) >= 3
    windows[position] = _edited(windows[position], **changes)
    path = tmp_path / "windows.jsonl"
    path.write_text("".join(json.dumps(w) + "\n" for w in windows))
    with pytest.raises(DataError, match=message) as caught:
        score_files([path])
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), position + 1, field)
