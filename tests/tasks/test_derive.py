"""The USB derivation against the official outputs in shared/fixtures/usb, and its failures."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tasks.plumbing.errors import DataError
from tasks.usb.derive import (
    BUILD_INFO_FILE,
    annotate_deleted_spans,
    build_task_datasets,
    derive_all,
    derive_documents,
    derive_factuality,
    derive_fixing,
    derive_split,
    derive_topic,
    derive_unsupported,
)
from tasks.usb.loaders import TASK_FOLDERS

from helpers import files_under


def edit_annotation(raw: Path, relative: str, change) -> None:
    path = raw / "annotations" / relative
    document = json.loads(path.read_text())
    change(document["annotations"])
    path.write_text(json.dumps(document))


def article(source, before, after, refs) -> dict:
    """A raw annotation document; source items are (txt, is_header, section_index, name)."""
    return {"annotations": {
        "source": [{"txt": t, "is_header": h, "section_index": i, "section_name": n}
                   for t, h, i, n in source],
        "orig_summary": [{"txt": s} for s in before],
        "annotations": {"summary_sents": after, "refs": refs}}}


# ---------------------------------------------------------------- the official outputs

def test_build_reproduces_every_fixture_file_byte_for_byte(tmp_path, usb_fixture_dir):
    out = tmp_path / "out"
    counts = build_task_datasets(usb_fixture_dir / "raw", out, progress=False)
    expected = files_under(usb_fixture_dir / "task_datasets")
    produced = files_under(out)
    info = json.loads(produced.pop(BUILD_INFO_FILE))
    assert sorted(produced) == sorted(expected)
    assert len(expected) == 4 * 8 * 3
    for name, data in expected.items():
        assert produced[name] == data, name
    assert expected["companies/topicbased_summarization/test.jsonl"] == b""  # empty, not absent
    assert counts["all"]["factuality_classification"]["test"] == 14
    assert info["records"] == counts
    assert info["sha256"]["all/evidence_extraction/test.jsonl"] == hashlib.sha256(
        expected["all/evidence_extraction/test.jsonl"]).hexdigest()


def test_byte_order_marks_on_split_and_annotation_files_change_nothing(raw_copy, tmp_path,
                                                                       usb_fixture_dir):
    """Files saved by editors that write a UTF-8 byte order mark derive the same bytes (the
    mark used to become part of the first listed path: "annotation file not found")."""
    marked = [path for path in sorted(raw_copy.rglob("*")) if path.suffix in (".txt", ".json")]
    assert any(path.suffix == ".txt" for path in marked)
    for path in marked:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    build_task_datasets(raw_copy, tmp_path / "out", progress=False)
    produced = files_under(tmp_path / "out")
    produced.pop(BUILD_INFO_FILE)
    assert produced == files_under(usb_fixture_dir / "task_datasets")


def test_derive_split_and_derive_all_return_the_fixture_records(usb_fixture_dir):
    fixture = usb_fixture_dir / "task_datasets"
    split = derive_split(usb_fixture_dir / "raw", "disasters", "validation")
    assert list(split) == list(TASK_FOLDERS)
    for task, records in split.items():
        lines = (fixture / "disasters" / task / "validation.jsonl").read_text().splitlines()
        assert records == [json.loads(line) for line in lines]
    everything = derive_all(usb_fixture_dir / "raw", ["companies"], progress=False)
    assert list(everything) == ["companies"]
    assert len(everything["companies"]["multisentence_compression"]["validation"]) == 5


def test_unsupported_span_records_keep_the_official_key_order(usb_fixture_dir):
    records = derive_split(usb_fixture_dir / "raw", "companies", "test")
    unsupported = records["unsupported_span_prediction"]
    assert [list(r)[:2] for r in unsupported] == [
        ["summ_idx", "id"], ["id", "summ_idx"], ["summ_idx", "id"]]  # edited one starts with id
    assert unsupported[1]["summ_idx"] == 2  # position in orig_summary, not a running count
    assert list(records["topicbased_summarization"]) == []  # the fixture's empty split


# ---------------------------------------------------------------- unsupported spans

def test_deleted_tokens_are_wrapped_and_spacing_follows_the_tokens():
    before = ("Ridgeview Academy was renamed in Tucson during 1991 after a long review of its "
              "finances.")
    after = "Ridgeview Academy was renamed in Tucson during 1991 after a long review."
    assert annotate_deleted_spans(before, after) == (
        "Ridgeview Academy was renamed in Tucson during 1991 after a long review"
        "[] of its finances[/] .")


def test_two_deleted_runs_and_a_leading_one():
    before = ("Known locally as the grand site, Hollow Creek Bridge was renamed in Ohio by a trust "
              "during 1931 after a long review and a vote.")
    after = "Hollow Creek Bridge was renamed in Ohio by a trust during 1931 after a long review."
    assert annotate_deleted_spans(before, after) == (
        "[] Known locally as the grand site ,[/] Hollow Creek Bridge was renamed in Ohio by a "
        "trust during 1931 after a long review[] and a vote[/] .")


def test_an_edit_that_adds_a_token_is_skipped():
    assert annotate_deleted_spans("It was closed by the council.",
                                  "It was closed with the council.") is None
    doc = article([("Title", True, 0, "Title"), ("x", False, 1, "A")],
                  ["It was closed by the council.", "Same.", "Gone."],
                  ["It was closed with the council.", "Same.", ""], [[1], [1], [1]])
    assert derive_unsupported("d.json", doc) == [
        {"summ_idx": 1, "id": "d.json", "input_lines": ["x"], "summary": "Same.",
         "annotated_summary": "Same."}]


# ---------------------------------------------------------------- other rules on made-up articles

def test_factuality_and_fixing_count_only_edited_kept_sentences():
    doc = article([("T", True, 0, "T"), ("a", False, 1, "S"), ("b", False, 1, "S")],
                  ["one.", "two x.", "three.", "four x."],
                  ["one.", "two.", "", "four."], [[1], [2, 1], [2], [2]])
    fac = derive_factuality("d", doc)
    assert [(r["summ_idx"], r["summary_sent"], r["label"]) for r in fac] == [
        (0, "two.", 0), (0, "two x.", 1), (1, "four.", 0), (1, "four x.", 1)]
    assert fac[0]["input_lines"] == ["b", "a"]  # evidence in the annotated order
    assert [(r["summ_idx"], r["initial_summary"], r["fixed_summary"])
            for r in derive_fixing("d", doc)] == [(0, "two x.", "two."), (1, "four x.", "four.")]


def test_topic_sections_follow_the_official_rules():
    doc = article([("Title", True, 0, "Title"), ("Career.", True, 1, "Career."),
                   ("c1", False, 1, "Career."), ("Life", True, 2, "Life "),
                   ("l1", False, 2, "Life "), ("Career.", True, 3, "Career."),
                   ("c2", False, 3, "Career.")],
                  ["s0", "s1", "s2", "s3", "s4"],
                  ["s0", "", "s2", "s3", "s4"], [[4], [2], [2, 4], [6, 2], []])
    records = derive_topic("d", doc)
    assert [r["topic_name"] for r in records] == ["Life", "Career"]
    assert records[0]["input_lines"] == ["Title", "c1", "l1", "c2"]  # headers dropped but title
    # deleted s1 counts (as ""); s2 spans two sections; same-named sections merge; no refs: none
    assert records[1]["output_lines"] == ["", "s3"]
    assert [r["summ_idx"] for r in records] == [0, 1] and records[0]["output_lines"] == ["s0"]


def test_derive_documents_keeps_document_order_for_every_task(usb_fixture_dir):
    raw = usb_fixture_dir / "raw" / "annotations"
    docs = [(name, json.loads((raw / name).read_text()))
            for name in ("disasters/doc7_1.json", "biographies/doc7_0.json")]
    result = derive_documents(docs)
    assert [r["id"] for r in result["abstractive_summarization"]] == [
        "disasters/doc7_1.json", "biographies/doc7_0.json"]


def test_non_ascii_text_is_written_as_raw_utf8_like_the_official_writer(tmp_path):
    raw = tmp_path / "raw"
    (raw / "annotations" / "places").mkdir(parents=True)
    (raw / "splits" / "places").mkdir(parents=True)
    doc = article([("Zürich", True, 0, "Zürich"), ("Café “Odéon” opened.", False, 1, "Hist")],
                  ["It opened."], ["It opened."], [[1]])
    (raw / "annotations" / "places" / "z.json").write_text(json.dumps(doc), encoding="utf-8")
    (raw / "splits" / "places" / "train.txt").write_text("places/z.json\n")
    for split in ("validation", "test"):
        (raw / "splits" / "places" / f"{split}.txt").write_text("")
    build_task_datasets(raw, tmp_path / "out", progress=False)
    data = (tmp_path / "out/places/abstractive_summarization/train.jsonl").read_bytes()
    assert data == ('{"id": "places/z.json", "input_lines": ["Zürich", "Café “Odéon” opened."], '
                    '"output_lines": ["It opened."]}\n').encode()
    assert (tmp_path / "out/places/abstractive_summarization/test.jsonl").read_bytes() == b""


# ---------------------------------------------------------------- bad input, no partial output

BROKEN = {
    "missing source": (lambda a: a.pop("source"), "annotations.source"),
    "missing orig_summary": (lambda a: a.pop("orig_summary"), "annotations.orig_summary"),
    "missing summary_sents": (lambda a: a["annotations"].pop("summary_sents"),
                              "annotations.annotations.summary_sents"),
    "missing refs": (lambda a: a["annotations"].pop("refs"), "annotations.annotations.refs"),
    "short summary_sents": (lambda a: a["annotations"]["summary_sents"].pop(),
                            "annotations.annotations.summary_sents"),
    "long refs": (lambda a: a["annotations"]["refs"].append([]),
                  "annotations.annotations.refs"),
    "index out of range": (lambda a: a["annotations"]["refs"][1].__setitem__(0, 13),
                           "annotations.annotations.refs[1][0]"),
    "negative index": (lambda a: a["annotations"]["refs"][2].__setitem__(0, -1),
                       "annotations.annotations.refs[2][0]"),
    "string index": (lambda a: a["annotations"]["refs"][2].__setitem__(0, "7"),
                     "annotations.annotations.refs[2][0]"),
    "boolean index": (lambda a: a["annotations"]["refs"][2].__setitem__(0, True),
                      "annotations.annotations.refs[2][0]"),
    "missing txt": (lambda a: a["source"][3].pop("txt"), "annotations.source[3].txt"),
    "null summary sentence": (lambda a: a["orig_summary"][0].__setitem__("txt", None),
                              "annotations.orig_summary[0].txt"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_schema_errors_name_file_and_field_and_write_nothing(case, raw_copy, tmp_path):
    change, field = BROKEN[case]
    edit_annotation(raw_copy, "companies/doc7_0.json", change)
    with pytest.raises(DataError) as caught:
        build_task_datasets(raw_copy, tmp_path / "out", progress=False)
    assert caught.value.path.endswith("annotations/companies/doc7_0.json")
    assert caught.value.field == field
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["raw"]  # no staging folder left either


def test_out_of_range_message_says_how_many_source_lines(raw_copy, tmp_path):
    edit_annotation(raw_copy, "companies/doc7_0.json", BROKEN["index out of range"][0])
    with pytest.raises(DataError, match="index 13 is out of range: annotations.source has 13"):
        build_task_datasets(raw_copy, tmp_path / "out", progress=False)


def test_malformed_json_names_file_and_line(raw_copy, tmp_path):
    (raw_copy / "annotations/disasters/doc7_2.json").write_text('{\n "annotations": [1,,]}')
    with pytest.raises(DataError, match="malformed JSON") as caught:
        build_task_datasets(raw_copy, tmp_path / "out", progress=False)
    assert caught.value.path.endswith("disasters/doc7_2.json") and caught.value.line == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line, message", [("companies/nope.json", "not found"),
                                           ("../raw/annotations/companies/doc7_1.json",
                                            "stay inside")])
def test_split_file_errors_name_split_file_and_line(raw_copy, tmp_path, line, message):
    split_file = raw_copy / "splits/companies/validation.txt"
    split_file.write_text(split_file.read_text().rstrip("\n") + "\n\n" + line + "\n")
    with pytest.raises(DataError, match=message) as caught:
        build_task_datasets(raw_copy, tmp_path / "out", progress=False)
    assert caught.value.path == str(split_file) and caught.value.line == 3


def test_missing_split_file_and_missing_variant(raw_copy, tmp_path):
    (raw_copy / "splits/disasters/test.txt").unlink()
    with pytest.raises(DataError, match="split file not found") as caught:
        build_task_datasets(raw_copy, tmp_path / "out", progress=False)
    assert caught.value.path.endswith("splits/disasters/test.txt")
    with pytest.raises(DataError, match="available: all, biographies, companies, disasters"):
        derive_all(raw_copy, ["schools"], progress=False)
    assert not (tmp_path / "out").exists()


def test_a_failed_rebuild_leaves_the_previous_output_untouched(raw_copy, tmp_path):
    out = tmp_path / "out"
    build_task_datasets(raw_copy, out, ["companies"], progress=False)
    before = files_under(out)
    edit_annotation(raw_copy, "companies/doc7_2.json", BROKEN["negative index"][0])
    with pytest.raises(DataError):
        build_task_datasets(raw_copy, out, ["companies"], progress=False)
    assert files_under(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "raw"]


def test_refuses_to_replace_a_folder_that_is_not_an_earlier_build(raw_copy, tmp_path):
    keep = tmp_path / "notes"
    keep.mkdir()
    (keep / "thesis.tex").write_text("precious")
    with pytest.raises(DataError, match="refusing to replace"):
        build_task_datasets(raw_copy, keep, progress=False)
    assert (keep / "thesis.tex").read_text() == "precious"
    with pytest.raises(DataError, match="outside the raw folder"):
        build_task_datasets(raw_copy, raw_copy / "out", progress=False)
    with pytest.raises(DataError, match="outside the raw folder"):
        build_task_datasets(raw_copy, tmp_path, progress=False)


@pytest.mark.parametrize("before, after, expected", [
    # the official nltk.word_tokenize splits sentences first, so an inner full stop becomes
    # its own token; without sentence splitting the first edit would wrongly count as an
    # addition ("won." vs "won .") and the record would be dropped
    ("He won. She lost the match.", "He won.", "He won .[] She lost the match .[/]"),
    ("Born in 1950. He was a painter.", "He was a painter.",
     "[] Born in 1950 .[/] He was a painter ."),
    ("The U.S. Army won in Ohio after a long review of its finances.",
     "The U.S. Army won in Ohio after a long review.",
     "The U.S. Army won in Ohio after a long review[] of its finances[/] ."),
])
def test_unsupported_spans_split_sentences_like_the_official_tokenizer(before, after, expected):
    from tasks.usb.derive import annotate_deleted_spans

    assert annotate_deleted_spans(before, after) == expected


def test_word_tokenizer_is_recorded_and_is_nltks_own():
    import nltk

    from tasks.plumbing import text

    assert "punkt_tab English" in text.word_tokenizer_name()
    assert text.treebank_words("A b. C d.") == ["A", "b", ".", "C", "d", "."]
    sentence = "Dr. Smith moved to the U.S. in 1990. He stayed."
    assert text.treebank_words(sentence) == nltk.word_tokenize(sentence)


def test_a_build_is_reused_only_while_its_raw_files_are_unchanged(raw_copy, tmp_path):
    """`sumbench run --raw` and experiments reuse OUT/data only when the split and
    annotation files it was derived from are unchanged (an edited document was reused)."""
    from types import SimpleNamespace

    from benchmark.run import prepare_data
    from tasks.usb.derive import reusable_build

    out = tmp_path / "out"
    build_task_datasets(raw_copy, out, variants=["all", "companies"], progress=False)
    assert reusable_build(out, raw_copy, ["all"]) and reusable_build(out, raw_copy, [])
    assert not reusable_build(out, raw_copy, ["biographies"])  # not built
    assert not reusable_build(out, tmp_path / "elsewhere", ["all"])
    assert not reusable_build(tmp_path / "nothing", raw_copy, ["all"])
    document = next((raw_copy / "annotations").rglob("*.json"))
    original = document.read_bytes()
    document.write_bytes(original.replace(b'"txt": "', b'"txt": "Edited ', 1))
    assert not reusable_build(out, raw_copy, ["all"])
    document.write_bytes(original)
    assert reusable_build(out, raw_copy, ["all"])
    split = raw_copy / "splits" / "companies" / "test.txt"
    split.write_bytes(split.read_bytes() + b"\n")  # the same list, other bytes: derive again
    assert not reusable_build(out, raw_copy, ["all"])

    messages = []
    run_spec = SimpleNamespace(raw_dir=str(raw_copy), variant="all", data_dir=None)
    assert prepare_data(run_spec, tmp_path / "run", messages.append) == str(tmp_path / "run/data")
    assert prepare_data(run_spec, tmp_path / "run", messages.append) == str(tmp_path / "run/data")
    document.write_bytes(original.replace(b'"txt": "', b'"txt": "Edited ', 1))
    prepare_data(run_spec, tmp_path / "run", messages.append)
    assert [message.split(":")[1].split()[0] for message in messages] == [
        "deriving", "reusing", "deriving"]
    derived = tmp_path / "run/data/all/abstractive_summarization"
    assert any(b"Edited " in path.read_bytes() for path in derived.glob("*.jsonl"))
