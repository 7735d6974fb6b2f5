"""The synthetic USB-schema corpus: determinism, split layout, and that the official derivation
gives every task records in every split of `all`."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmark.synthetic import (
    EDIT_KINDS,
    SPEC_FILE,
    SyntheticSpec,
    generate_corpus,
    read_corpus_info,
)
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import read_jsonl
from tasks.usb.derive import annotate_deleted_spans, build_task_datasets
from tasks.usb.loaders import TASK_FOLDERS
from tasks.usb.raw import validate_annotation

from helpers import files_under


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    """(raw folder, derived task datasets) of a 9-document corpus."""
    root = tmp_path_factory.mktemp("synthetic")
    generate_corpus(root / "raw", SyntheticSpec(seed=3, docs=9))
    build_task_datasets(root / "raw", root / "data", progress=False)
    return root / "raw", root / "data"


def test_same_seed_gives_identical_files_and_other_seeds_differ(tmp_path):
    spec = SyntheticSpec(seed=11, docs=7)
    generate_corpus(tmp_path / "a", spec)
    generate_corpus(tmp_path / "b", spec)
    generate_corpus(tmp_path / "c", SyntheticSpec(seed=12, docs=7))
    first, second, other = (files_under(tmp_path / name) for name in "abc")
    assert first == second
    assert set(first) == set(other)
    assert first != other
    # 7 documents, one split file per split for all + 3 domains, and the spec file
    assert sum(path.startswith("annotations/") for path in first) == 7
    assert sum(path.startswith("splits/") for path in first) == 4 * 3
    assert SPEC_FILE in first


def test_split_layout_interleaves_domains(tmp_path):
    info = generate_corpus(tmp_path / "raw", SyntheticSpec(seed=0, docs=6))
    assert info["documents"]["all"] == {"train": 4, "validation": 1, "test": 1}
    splits = tmp_path / "raw" / "splits"
    lines = {name: (splits / "all" / f"{name}.txt").read_text().split()
             for name in ("train", "validation", "test")}
    assert lines == {"train": ["biographies/syn000.json", "disasters/syn000.json",
                               "companies/syn001.json", "disasters/syn001.json"],
                     "validation": ["biographies/syn001.json"],
                     "test": ["companies/syn000.json"]}
    # each domain's splits are the `all` entries of that domain, in order
    for domain in ("biographies", "companies", "disasters"):
        for name, ids in lines.items():
            own = (splits / domain / f"{name}.txt").read_text().split()
            assert own == [doc for doc in ids if doc.startswith(domain + "/")]
    assert read_corpus_info(tmp_path / "raw")["spec"]["seed"] == 0
    assert read_corpus_info(tmp_path) is None


def test_six_domains_with_test_only_ones(tmp_path):
    spec = SyntheticSpec(seed=1, docs=8,
                         domains=("biographies", "companies", "disasters", "schools"),
                         test_only_domains=("landmarks", "newspapers"), test_only_docs=2)
    info = generate_corpus(tmp_path / "raw", spec)
    assert info["documents"]["all"] == {"train": 5, "validation": 1, "test": 2 + 4}
    assert info["documents"]["landmarks"] == {"train": 0, "validation": 0, "test": 2}
    assert info["documents"]["schools"] == {"train": 1, "validation": 1, "test": 0}
    splits = tmp_path / "raw" / "splits"
    assert (splits / "newspapers" / "train.txt").read_text() == ""
    assert (splits / "all" / "test.txt").read_text().split()[-4:] == [
        "landmarks/syn000.json", "landmarks/syn001.json",
        "newspapers/syn000.json", "newspapers/syn001.json"]
    # the training domains' documents are those of the same seed without test-only domains
    plain = generate_corpus(tmp_path / "plain", dataclasses.replace(spec, test_only_domains=()))
    assert plain["documents"]["all"]["train"] == 5
    for doc in (tmp_path / "plain" / "annotations").rglob("*.json"):
        twin = tmp_path / "raw" / "annotations" / doc.relative_to(
            tmp_path / "plain" / "annotations")
        assert twin.read_bytes() == doc.read_bytes()
    build_task_datasets(tmp_path / "raw", tmp_path / "data", progress=False)
    landmarks = tmp_path / "data" / "landmarks" / "abstractive_summarization"
    assert read_jsonl(landmarks / "test.jsonl") and not read_jsonl(landmarks / "train.jsonl")


def test_every_task_has_records_in_every_split_of_all(corpus):
    _, data = corpus
    for task in TASK_FOLDERS:
        for split in ("train", "validation", "test"):
            records = read_jsonl(data / "all" / task / f"{split}.jsonl")
            assert records, f"{task}/{split} is empty"
    for split in ("train", "validation", "test"):
        fac = read_jsonl(data / "all" / "factuality_classification" / f"{split}.jsonl")
        assert {record["label"] for record in fac} == {0, 1}
        unsup = read_jsonl(data / "all" / "unsupported_span_prediction" / f"{split}.jsonl")
        spans = [r for r in unsup if "[]" in r["annotated_summary"]]
        assert spans and len(spans) < len(unsup)  # spans, and sentences without any
        ext = read_jsonl(data / "all" / "extractive_summarization" / f"{split}.jsonl")
        assert all(0 in r["labels"] and 1 in r["labels"] for r in ext)


def test_documents_have_headers_sections_and_every_edit_kind(corpus):
    raw, _ = corpus
    for path in sorted((raw / "annotations").rglob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        validate_annotation(document, str(path))
        body = document["annotations"]
        source = body["source"]
        assert source[0]["is_header"] and source[0]["section_index"] == 0
        assert len({line["section_index"] for line in source}) >= 3
        before = [s["txt"] for s in body["orig_summary"]]
        after = body["annotations"]["summary_sents"]
        kinds = set()
        for b, a, refs in zip(before, after, body["annotations"]["refs"]):
            assert all(not source[r]["is_header"] for r in refs)
            if not a:
                kinds.add("deleted")
            elif a == b:
                kinds.add("unchanged")
            elif annotate_deleted_spans(b, a) is None:
                kinds.add("corrected")
            else:
                kinds.add("trimmed")
        assert kinds == set(EDIT_KINDS), path


def test_invalid_specs_are_refused_for_domains():
    with pytest.raises(SumbenchError, match="listed twice"):
        SyntheticSpec(domains=("schools",), test_only_domains=("schools",))
    with pytest.raises(SumbenchError, match="unknown synthetic domain"):
        SyntheticSpec(test_only_domains=("moon",))
    with pytest.raises(SumbenchError, match="test_only_docs"):
        SyntheticSpec(test_only_domains=("landmarks",), test_only_docs=0)


def test_invalid_specs_are_refused():
    with pytest.raises(SumbenchError, match="at least 4 documents"):
        SyntheticSpec(docs=3)
    with pytest.raises(SumbenchError, match="unknown synthetic domain"):
        SyntheticSpec(domains=("biographies", "planets"))


def test_each_fact_line_has_its_own_place_and_mostly_its_own_verb(tmp_path):
    """A claim's evidence line is the only line stating its place, and (up to the domain's 8
    facts) the only one stating its verb and object: lexical overlap names the evidence."""
    from benchmark.synthetic import DOMAINS, PLACES

    generate_corpus(tmp_path, SyntheticSpec(seed=5, docs=30))
    for path in sorted((tmp_path / "annotations").rglob("*.json")):
        source = json.loads(path.read_text(encoding="utf-8"))["annotations"]["source"]
        facts = [line["txt"].removeprefix("Notably, ") for line in source
                 if not line["is_header"]]
        places = [place for text in facts for place in PLACES if text.endswith(f" {place}.")]
        assert len(places) == len(set(places)) == len(facts), path
        kinds = [(verb, thing) for text in facts
                 for verb, thing in DOMAINS[path.parent.name]["facts"]
                 if f" {verb} {thing} in " in text]
        assert len(kinds) == len(facts)
        assert len(set(kinds)) == min(len(kinds), len(DOMAINS[path.parent.name]["facts"])), path
