"""Reading processed USB task data from a folder, from $SUMBENCH_DATA and from the hub archive
(the hub replaced by a downloader that hands back a local archive built from the fixture)."""
from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from tasks.plumbing.errors import DataError
from tasks.plumbing.io import file_sha256
from tasks.usb.loaders import (
    ARCHIVE_INFO_FILE,
    TASK_FOLDERS,
    TASK_SCHEMAS,
    check_record,
    fetch_archive,
    fetch_processed_data,
    find_data_root,
    load_task_split,
    read_task_records,
    records_to_dataset,
    task_features,
)


@pytest.fixture(autouse=True)
def no_data_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SUMBENCH_DATA", raising=False)
    monkeypatch.setenv("SUMBENCH_CACHE", str(tmp_path / "env-cache"))


def fixture_records(data_dir: Path, variant: str, task: str, split: str) -> list[dict]:
    text = (data_dir / variant / task / f"{split}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


class LocalHub:
    """Stands in for hf_hub_download: returns a local archive and records each call."""

    def __init__(self, archive: Path):
        self.archive, self.calls = archive, []

    def __call__(self, **request) -> str:
        self.calls.append(request)
        return str(self.archive)


def make_archive(path: Path, data_dir: Path, top: str | None = "processed_data",
                 extra: list[tuple[tarfile.TarInfo, bytes | None]] = (),
                 variants: tuple[str, ...] = ("all", "companies")) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for variant in variants:
            tar.add(data_dir / variant, arcname=f"{top}/{variant}" if top else variant)
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


# ---------------------------------------------------------------- a local folder

def test_read_task_records_returns_every_fixture_record_in_order(data_dir):
    for task in TASK_FOLDERS:
        assert read_task_records(task, "test", "all", data_dir=data_dir) == fixture_records(
            data_dir, "all", task, "test")


def test_load_task_split_keeps_nested_lists_order_and_columns(data_dir):
    dataset = load_task_split("evidence_extraction", "test", data_dir=data_dir)
    expected = fixture_records(data_dir, "all", "evidence_extraction", "test")
    assert dataset.to_list() == expected
    assert dataset[0]["evidence_labels"] == [[8, 3], [4], [11, 4, 7], [2]]
    unsupported = load_task_split("unsupported_span_prediction", "train", "companies", data_dir)
    assert unsupported["annotated_summary"][0].endswith("review[] of its finances[/] .")


def test_an_empty_split_loads_with_its_columns(data_dir):
    dataset = load_task_split("topicbased_summarization", "test", "companies", data_dir)
    assert dataset.num_rows == 0
    assert set(dataset.column_names) == {"id", "summ_idx", "input_lines", "topic_name",
                                         "output_lines"}


def test_parent_folder_and_environment_variable_are_resolved(data_dir, usb_fixture_dir,
                                                             monkeypatch, tmp_path):
    assert find_data_root(usb_fixture_dir) == data_dir
    assert len(read_task_records("fixing_factuality", "train", data_dir=usb_fixture_dir)) == 7
    monkeypatch.setenv("SUMBENCH_DATA", str(data_dir))
    assert len(read_task_records("fixing_factuality", "train")) == 7
    monkeypatch.setenv("SUMBENCH_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match=r"\$SUMBENCH_DATA"):
        read_task_records("fixing_factuality", "train")
    assert len(read_task_records("fixing_factuality", "train", data_dir=data_dir)) == 7


def test_missing_files_say_what_exists(data_dir, tmp_path):
    with pytest.raises(DataError, match="variants present: all, biographies, companies, "):
        read_task_records("fixing_factuality", "train", "schools", data_dir)
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "companies", copy / "companies")
    (copy / "companies/fixing_factuality/validation.jsonl").unlink()
    with pytest.raises(DataError, match="splits present: test, train") as caught:
        read_task_records("fixing_factuality", "validation", "companies", copy)
    assert caught.value.path.endswith("companies/fixing_factuality/validation.jsonl")
    with pytest.raises(DataError, match="unknown USB task folder 'fixing'"):
        read_task_records("fixing", "validation", "companies", copy)
    (copy / "build_info.json").write_text("{}")  # a file, not a variant
    with pytest.raises(DataError) as caught:
        read_task_records("fixing_factuality", "train", "schools", copy)
    assert caught.value.reason.endswith("variants present: companies")
    (copy / "companies/fixing_factuality/validation.jsonl").mkdir()
    with pytest.raises(DataError) as caught:
        read_task_records("fixing_factuality", "validation", "companies", copy)
    assert caught.value.reason == "expected a JSON Lines file, got a folder"
    for variant in (str(copy / "companies"), "../data/companies", "..", "", ".hidden",
                    "companies/"):
        with pytest.raises(DataError) as caught:  # never a path to another folder
            read_task_records("fixing_factuality", "train", variant, copy)
        assert caught.value.field == "variant" and "name of one folder" in caught.value.reason


def test_malformed_lines_and_wrong_fields_name_file_line_and_field(data_dir, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "companies", copy / "companies")
    path = copy / "companies/factuality_classification/train.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1][:-1]] + lines[2:]) + "\n")
    with pytest.raises(DataError, match="malformed JSON") as caught:
        load_task_split("factuality_classification", "train", "companies", copy)
    assert (caught.value.path, caught.value.line) == (str(path), 2)
    record = json.loads(lines[1])
    record["labels"] = record.pop("label")
    path.write_text("\n".join([lines[0], "", json.dumps(record)]) + "\n")
    with pytest.raises(DataError, match="record fields differ") as caught:
        load_task_split("factuality_classification", "train", "companies", copy)
    assert (caught.value.line, caught.value.field) == (3, "label")


# ---------------------------------------------------------------- record checks (no casting)

@pytest.mark.slow
def test_every_fixture_file_loads_unchanged(data_dir):
    """Valid records pass the checks and load exactly as written (no value is cast)."""
    files = sorted(data_dir.glob("*/*/*.jsonl"))
    assert len(files) == 96
    for path in files:
        variant, task, split = path.parent.parent.name, path.parent.name, path.stem
        dataset = load_task_split(task, split, variant, data_dir)
        assert dataset.column_names == list(TASK_SCHEMAS[task])
        assert dataset.to_list() == fixture_records(data_dir, variant, task, split), path


def test_features_are_those_of_the_schema():
    from datasets import Features, List, Value

    assert task_features("evidence_extraction") == Features({
        "id": Value("string"), "input_lines": List(Value("string")),
        "summary_lines": List(Value("string")),
        "evidence_labels": List(List(Value("int64")))})
    assert task_features("factuality_classification") == Features({
        "id": Value("string"), "summ_idx": Value("int64"), "input_lines": List(Value("string")),
        "summary_sent": Value("string"), "label": Value("int64")})
    assert set(TASK_SCHEMAS) == set(TASK_FOLDERS)


EXT = {"id": "a", "input_lines": ["x.", "y."], "labels": [1, 0]}
EVEXT = {"id": "a", "input_lines": ["x.", "y."], "summary_lines": ["s.", "t."],
         "evidence_labels": [[1], [0, 1]]}
FAC = {"id": "a", "summ_idx": 0, "input_lines": ["x."], "summary_sent": "s.", "label": 1}
TOPIC = {"id": "a", "summ_idx": 2, "input_lines": ["x."], "topic_name": "Career",
         "output_lines": ["o."]}


@pytest.mark.parametrize("task, record, field, message", [
    ("extractive_summarization", dict(EXT, labels=[0.7, 0]), "labels", "0/1 integers"),
    ("extractive_summarization", dict(EXT, labels=[[1], 0]), "labels", "0/1 integers"),
    ("extractive_summarization", dict(EXT, labels=[True, 0]), "labels", "0/1 integers"),
    ("extractive_summarization", dict(EXT, labels=[1, 0, 1]), "labels",
     "3 labels for 2 input lines"),
    ("extractive_summarization", dict(EXT, labels=[1]), "labels", "1 labels for 2 input"),
    ("extractive_summarization", dict(EXT, input_lines="xy", labels=[1, 0]), "input_lines",
     "list of strings"),
    ("extractive_summarization", dict(EXT, id=5), "id", "expected a string, got integer"),
    ("evidence_extraction", dict(EVEXT, evidence_labels=[[1], [2]]), "evidence_labels",
     "item 1 holds 2, not an integer in [0, 2)"),
    ("evidence_extraction", dict(EVEXT, evidence_labels=[[-1], []]), "evidence_labels",
     "item 0 holds -1"),
    ("evidence_extraction", dict(EVEXT, evidence_labels=[[1.0], []]), "evidence_labels",
     "item 0 holds 1.0"),
    ("evidence_extraction", dict(EVEXT, evidence_labels=[1, 0]), "evidence_labels",
     "list of lists of integers"),
    ("evidence_extraction", dict(EVEXT, evidence_labels=[[1]]), "evidence_labels",
     "1 evidence lists for 2 summary lines"),
    ("evidence_extraction", dict(EVEXT, summary_lines=["s.", 3]), "summary_lines",
     "list of strings"),
    ("factuality_classification", dict(FAC, label=2), "label", "expected 0 or 1, got 2"),
    ("factuality_classification", dict(FAC, label="1"), "label", "expected 0 or 1"),
    ("factuality_classification", dict(FAC, summ_idx="0"), "summ_idx",
     "expected a non-negative integer below 2**63, got '0'"),
    ("factuality_classification", dict(FAC, summ_idx=1.0), "summ_idx", "non-negative integer"),
    ("factuality_classification", dict(FAC, summ_idx=2 ** 63), "summ_idx",
     "below 2**63, got 9223372036854775808"),
    ("factuality_classification", dict(FAC, summ_idx=10 ** 40), "summ_idx",
     "below 2**63, got 100000000000..."),
    ("factuality_classification", dict(FAC, summ_idx=-1), "summ_idx", "non-negative integer"),
    ("factuality_classification", dict(FAC, summary_sent=["s."]), "summary_sent",
     "expected a string, got array"),
    ("topicbased_summarization", dict(TOPIC, topic_name=None), "topic_name",
     "expected a string, got null"),
    ("topicbased_summarization", dict(TOPIC, output_lines="o."), "output_lines",
     "list of strings"),
])
def test_bad_records_name_file_line_and_field(tmp_path, task, record, field, message):
    good = {"extractive_summarization": EXT, "evidence_extraction": EVEXT,
            "factuality_classification": FAC, "topicbased_summarization": TOPIC}[task]
    check_record(task, good)
    path = tmp_path / "data" / "all" / task / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in (good, record)))
    for read in (load_task_split, read_task_records):
        with pytest.raises(DataError) as caught:
            read(task, "test", "all", tmp_path / "data")
        error = caught.value
        assert (error.path, error.line, error.field) == (str(path), 2, field)
        assert str(error).startswith(f"{path}:2, field '{field}': ") and message in str(error)


def test_records_to_dataset_checks_in_memory_records():
    dataset = records_to_dataset("extractive_summarization", [EXT])
    assert dataset.to_list() == [EXT]
    with pytest.raises(DataError) as caught:
        records_to_dataset("extractive_summarization", [EXT, dict(EXT, labels=[0.7, 0])],
                           path="mem.jsonl", line_numbers=[4, 9])
    assert (caught.value.path, caught.value.line, caught.value.field) == ("mem.jsonl", 9,
                                                                          "labels")
    with pytest.raises(DataError, match="line 1: expected a JSON object, got array"):
        records_to_dataset("extractive_summarization", [["a"]])


# ---------------------------------------------------------------- the hub archive

def test_archive_gives_the_folder_records_and_is_downloaded_once(data_dir, tmp_path):
    hub = LocalHub(make_archive(tmp_path / "processed_data.tar.gz", data_dir))
    cache = tmp_path / "cache"
    dataset = load_task_split("evidence_extraction", "test", downloader=hub, cache_dir=cache)
    assert dataset.to_list() == fixture_records(data_dir, "all", "evidence_extraction", "test")
    again = read_task_records("abstractive_summarization", "train", "companies",
                              downloader=hub, cache_dir=cache)
    assert again == fixture_records(data_dir, "companies", "abstractive_summarization", "train")
    assert hub.calls == [{"repo_id": "kundank/usb", "filename": "processed_data.tar.gz",
                          "repo_type": "dataset", "revision": None}]
    info = json.loads((cache / "main" / ARCHIVE_INFO_FILE).read_text())
    assert len(info["sha256"]) == 64 and info["repo_id"] == "kundank/usb"


def test_archive_without_top_folder_and_cache_from_environment(data_dir, tmp_path):
    hub = LocalHub(make_archive(tmp_path / "flat.tar.gz", data_dir, top=None))
    root = fetch_processed_data(downloader=hub, revision="v1.0")
    assert root == tmp_path / "env-cache" / "usb" / "v1.0" / "extracted"
    assert fetch_processed_data(downloader=hub, revision="v1.0") == root
    assert len(hub.calls) == 1 and hub.calls[0]["revision"] == "v1.0"
    fetch_processed_data(downloader=hub, revision="v1.0", force=True)
    assert len(hub.calls) == 2


def test_main_is_cached_until_refreshed_and_a_new_archive_is_extracted_again(data_dir,
                                                                               tmp_path):
    old = make_archive(tmp_path / "old.tar.gz", data_dir)
    new = make_archive(tmp_path / "new.tar.gz", data_dir, variants=("all",))
    old_sha, new_sha = file_sha256(old), file_sha256(new)
    assert old_sha != new_sha
    cache, hub_old, hub_new = tmp_path / "cache", LocalHub(old), LocalHub(new)
    first = fetch_archive(cache_dir=cache, downloader=hub_old)
    assert (first.status, first.sha256, first.previous_sha256) == ("downloaded", old_sha, None)
    assert (first.data_dir / "companies").is_dir()

    cached = fetch_archive(cache_dir=cache, downloader=hub_new)  # "main" is never looked up
    assert (cached.status, cached.sha256, hub_new.calls) == ("cached", old_sha, [])
    assert "--refresh" in cached.message()

    updated = fetch_archive(cache_dir=cache, downloader=hub_new, refresh=True)
    assert (updated.status, updated.sha256, updated.previous_sha256) == (
        "updated", new_sha, old_sha)
    assert updated.message() == (f"the archive changed (sha256 {old_sha} -> {new_sha}); "
                                 f"extracted it again")
    assert updated.data_dir == first.data_dir and not (updated.data_dir / "companies").exists()
    assert json.loads((cache / "main" / ARCHIVE_INFO_FILE).read_text())["sha256"] == new_sha

    stamp = (cache / "main" / "extracted").stat().st_ino
    same = fetch_archive(cache_dir=cache, downloader=hub_new, refresh=True)
    assert (same.status, same.sha256) == ("unchanged", new_sha) and len(hub_new.calls) == 2
    assert (cache / "main" / "extracted").stat().st_ino == stamp  # not extracted again

    shutil.rmtree(cache / "main" / "extracted" / "processed_data" / "all")
    repaired = fetch_archive(cache_dir=cache, downloader=hub_new, refresh=True)
    assert repaired.status == "repaired" and (repaired.data_dir / "all").is_dir()
    assert fetch_processed_data(cache_dir=cache, downloader=hub_old, force=True) == \
        first.data_dir
    assert (first.data_dir / "companies").is_dir()


def test_a_bad_refreshed_archive_keeps_the_cached_data(data_dir, tmp_path):
    cache = tmp_path / "cache"
    fetch_archive(cache_dir=cache, downloader=LocalHub(make_archive(tmp_path / "a.tar.gz",
                                                                    data_dir)))
    info = (cache / "main" / ARCHIVE_INFO_FILE).read_text()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.txt").write_text("nothing here")
    with tarfile.open(tmp_path / "junk.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "junk", arcname="junk")
    with pytest.raises(DataError, match="no <variant>/<task>/<split>.jsonl layout"):
        fetch_archive(cache_dir=cache, downloader=LocalHub(tmp_path / "junk.tar.gz"),
                      refresh=True)
    assert (cache / "main" / ARCHIVE_INFO_FILE).read_text() == info
    assert read_task_records("fixing_factuality", "test", cache_dir=cache,
                             downloader=LocalHub(tmp_path / "junk.tar.gz")) == \
        fixture_records(data_dir, "all", "fixing_factuality", "test")


def _member(name: str, kind=tarfile.REGTYPE, target: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    data = b"{}\n" if kind == tarfile.REGTYPE else None
    info.size = len(data) if data else 0
    return info, data


@pytest.mark.parametrize("member", [_member("../evil.jsonl"),
                                    _member("processed_data/../../evil.jsonl"),
                                    _member("/tmp/sumbench-evil.jsonl"),
                                    _member("processed_data/link", tarfile.SYMTYPE, "/etc")],
                         ids=["parent", "nested-parent", "absolute", "symlink"])
def test_unsafe_archive_members_are_rejected_and_nothing_is_cached(member, data_dir, tmp_path):
    hub = LocalHub(make_archive(tmp_path / "bad.tar.gz", data_dir, extra=[member]))
    with pytest.raises(DataError, match="refusing to extract") as caught:
        fetch_processed_data(downloader=hub, cache_dir=tmp_path / "cache")
    assert caught.value.path == str(tmp_path / "bad.tar.gz")
    assert not (tmp_path / "evil.jsonl").exists() and not (tmp_path / "cache" / "main").exists()
    assert not Path("/tmp/sumbench-evil.jsonl").exists()


def test_archive_without_the_layout_is_not_cached(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.txt").write_text("nothing here")
    with tarfile.open(tmp_path / "junk.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "junk", arcname="junk")
    with pytest.raises(DataError, match="no <variant>/<task>/<split>.jsonl layout"):
        fetch_processed_data(downloader=LocalHub(tmp_path / "junk.tar.gz"),
                             cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "main").exists()


def test_no_data_and_no_network_is_a_clear_error(tmp_path):
    def offline(**request):
        raise OSError("Network is unreachable")
    with pytest.raises(DataError) as caught:
        read_task_records("abstractive_summarization", "test", downloader=offline)
    message = str(caught.value)
    assert "OSError: Network is unreachable" in message and "--data DIR" in message
    assert "sumbench data build --raw RAW --out DIR" in message
    assert str(tmp_path / "env-cache" / "usb") in message


def test_the_real_hub_client_offline_gives_the_same_clear_error(tmp_path):
    constants = pytest.importorskip("huggingface_hub.constants")
    if not constants.HF_HUB_OFFLINE:
        pytest.skip("HF_HUB_OFFLINE is not set; this test must not touch the network")
    with pytest.raises(DataError, match="USB task data is not available.*--data DIR"):
        load_task_split("abstractive_summarization", "test", cache_dir=tmp_path / "cache")
