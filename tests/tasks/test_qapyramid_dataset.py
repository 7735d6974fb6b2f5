"""QAPyramid dataset-format loader, hub downloader injection, id splits, raw predicate groups."""
from __future__ import annotations

import collections
import json

import pytest

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.qapyramid.dataset import (
    HUB_REPO_ID,
    hub_downloader,
    load_examples,
    raw_predicate_groups,
    read_examples,
    split_of,
)
from tasks.qapyramid.units import group_by_predicate

QAS = ["Who escaped from something? Juan Arango",
       "What did someone escape from? punishment from the referee",
       "Who might face something? He",
       "What might someone face? a retrospective ban"]


def make_record(example_id="ex1", **overrides):
    record = {"example_id": example_id, "source": "A long article.",
              "reference": "Juan Arango escaped punishment . He might face a retrospective ban .",
              "QAs": list(QAS),
              "QA_labels": {"bart": [1, 1, 0, 1], "gpt": None},
              "system_outputs": {"bart": "Arango escaped punishment.", "gpt": None},
              "system_scores": {"bart": {"QAPyramid": 0.75}}}
    record.update(overrides)
    return record


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_json_and_folder_give_the_same_examples(tmp_path):
    records = [make_record("ex1"), make_record("ex2", QA_labels={}, system_outputs={})]
    jsonl = write_jsonl(tmp_path / "data.jsonl", records)
    (tmp_path / "list.json").write_text(json.dumps(records))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "QAPyramid.json").write_text(json.dumps({"cnndm_test": records}))
    first = read_examples(jsonl)
    assert read_examples(tmp_path / "list.json") == first
    assert load_examples(tmp_path / "dir") == first
    example = first[0]
    assert example.qas[1] == ("What did someone escape from?", "punishment from the referee")
    assert example.qa_labels == {"bart": (1, 1, 0, 1)}  # null systems skipped
    assert example.system_outputs == {"bart": "Arango escaped punishment."}
    assert example.labelled_systems == ["bart"] and first[1].labelled_systems == []
    assert example.predicate_groups() == [[0, 1], [2, 3]]


@pytest.mark.parametrize("override, line, field", [
    ({"reference": ""}, 2, "reference"),
    ({"QAs": "not a list"}, 2, "QAs"),
    ({"QA_labels": {"bart": [1, 0]}}, 2, "QA_labels.bart"),
    ({"QA_labels": {"bart": [1, 0, 2, 1]}}, 2, "QA_labels.bart"),
    ({"system_outputs": {"bart": 3}}, 2, "system_outputs.bart"),
])
def test_errors_name_file_line_and_field(tmp_path, override, line, field):
    path = write_jsonl(tmp_path / "bad.jsonl", [make_record("ok"), make_record("bad", **override)])
    with pytest.raises(DataError) as error:
        read_examples(path)
    assert (error.value.path, error.value.line, error.value.field) == (str(path), line, field)


def test_duplicate_ids_and_missing_files(tmp_path):
    path = write_jsonl(tmp_path / "dup.jsonl", [make_record("a"), make_record("b"),
                                                make_record("a")])
    with pytest.raises(DataError) as error:
        read_examples(path)
    assert (error.value.path, error.value.line, error.value.field) == (str(path), 3, "example_id")
    assert error.value.reason == f"duplicate example_id 'a' (first at {path}:1)"
    with pytest.raises(DataError) as error:  # records of a hub download: by index
        load_examples(downloader=lambda repo: [make_record("a"), make_record("a")],
                      repo_id="org/qa")
    assert error.value.path == "org/qa[record 1]"
    assert error.value.reason == "duplicate example_id 'a' (first at org/qa[record 0])"
    with pytest.raises(DataError, match="no QAPyramid data file"):
        load_examples(tmp_path)
    (tmp_path / "broken.json").write_text('[{"example_id": "x",')
    with pytest.raises(DataError, match="malformed JSON"):
        read_examples(tmp_path / "broken.json")


def test_hub_loading_through_an_injected_downloader(tmp_path):
    calls = []

    def downloader(repo_id):
        calls.append(repo_id)
        return [make_record("hub1")]

    examples = load_examples(None, downloader=downloader)
    assert calls == [HUB_REPO_ID] and [e.example_id for e in examples] == ["hub1"]
    path = write_jsonl(tmp_path / "local.jsonl", [make_record("p1")])
    assert load_examples(None, downloader=lambda repo: str(path))[0].example_id == "p1"
    with pytest.raises(DataError, match=r"shiyue/QAPyramid\[record 0\]"):
        load_examples(None, downloader=lambda repo: [{"example_id": "x"}])


def test_default_hub_downloader_fails_cleanly_offline():
    with pytest.raises(SumbenchError, match="could not load 'shiyue/QAPyramid'"):
        hub_downloader(HUB_REPO_ID)


def test_split_of_is_seeded_stable_and_near_60_20_20():
    ids = [f"id{i}" for i in range(3000)]
    counts = collections.Counter(split_of(i) for i in ids)
    assert 0.57 < counts["train"] / 3000 < 0.63
    assert 0.17 < counts["validation"] / 3000 < 0.23 and 0.17 < counts["test"] / 3000 < 0.23
    assert [split_of(i) for i in ids[:6]] == [split_of(i) for i in ids[:6]]
    assert [split_of(i) for i in ("cnndm1017", "cnndm10586", "cnndm1521")] == \
        ["test", "train", "test"]  # pinned: changing the hash rule reshuffles the splits
    assert sum(split_of(i) != split_of(i, seed=1) for i in ids) > 1000


def test_raw_judgments_file_is_not_the_dataset_format(qapyramid_judgments):
    with pytest.raises(DataError, match="raw judgments file"):
        read_examples(qapyramid_judgments)


@pytest.mark.slow
def test_raw_predicate_groups(qapyramid_judgments):
    groups = raw_predicate_groups(qapyramid_judgments)
    assert len(groups) == 50
    assert sum(len(predicates) for predicates in groups.values()) == 396
    assert sum(len(qas) for predicates in groups.values() for _, qas in predicates) == 891
    example = dict(groups["0281c649039f99af337e91190d5bdcb5e9734969"])
    assert example["0281c649039f99af337e91190d5bdcb5e9734969_6"] == [
        ("Who did not respond?", "British police"),
        ("Where did someone not respond?", "jewelry district"),
        ("What did someone not respond to?", "a burglar alarm")]
    for predicates in groups.values():  # numeric order: _9 before _10
        numbers = [int(pid.rsplit("_", 1)[1]) for pid, _ in predicates]
        assert numbers == sorted(numbers)


def test_grouping_heuristic_recovers_most_raw_predicates(qapyramid_judgments):
    exact = total = 0
    for predicates in raw_predicate_groups(qapyramid_judgments).values():
        flat, gold = [], []
        for _, qas in predicates:
            gold.append(tuple(range(len(flat), len(flat) + len(qas))))
            flat.extend(qas)
        found = {tuple(group) for group in group_by_predicate(flat)}
        exact += len(found & set(gold))
        total += len(gold)
    assert (exact, total) == (372, 396)
