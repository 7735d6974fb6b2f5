"""The REALSumm/PyrXSum folder loader: real data and every validation error."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.plumbing.errors import DataError, UnknownNameError
from tasks.qapyramid.pyramid_data import clean_reference, load_pyramid_dataset, sentence_units

TINY = {
    "ids.txt": "ex1\nex2\n",
    "documents.txt": "Doc one. It rains.\nDoc two.\n",
    "references.txt": "<t> It rains . </t> <t> Roads are wet . </t>\nThe cat sat.\n",
    "SCUs.txt": "It rains\tRoads are wet\nThe cat sat\n",
    "STUs.txt": "It rains\nThe cat sat\n",
    "summaries/sysA.summary": "It rains a lot.\nA cat sat.\n",
    "summaries/sysB.summary": "Nothing.\nThe cat sat down.\n",
    "labels/sysA.label": "1\t0\n1\n",
    "labels/sysB.label": "0\t0\n1\n",
}


def make_folder(root: Path, **changes: str | None) -> Path:
    """Write the tiny folder; `changes` maps file names to new text (None: leave out);
    `labels__X` / `summaries__X` stand for labels/X.label / summaries/X.summary."""
    suffixes = {"labels": ".label", "summaries": ".summary"}
    files = dict(TINY)
    for key, text in changes.items():
        folder, _, name = key.partition("__")
        files[f"{folder}/{name}{suffixes[folder]}" if name else key] = text
    for name, text in files.items():
        if text is not None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
    return root


def test_realsumm_shape(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "realsumm", unit_kinds=("scus", "stus"))
    assert data.name == "realsumm" and len(data) == 100 and len(data.systems) == 25
    assert data.ids[:2] == ("cnndm1017", "cnndm10586")
    assert data.units["scus"][0][0] == "Anuradha Koirala has been sleeping outdoors."
    assert len(data.units["scus"][0]) == 10
    assert all(len(row) == len(units) for s in data.systems
               for row, units in zip(data.labels[s], data.units["scus"]))
    assert not any("<t>" in r or "</t>" in r for r in data.references)
    assert data.references[0].startswith("Anuradha Koirala and 425 young women")


def test_pyrxsum_shape(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "pyrxsum", systems=["t5-large", "ptgen"])
    assert data.systems == ("ptgen", "t5-large") and len(data) == 100
    assert set(data.labels) == {"t5-large", "ptgen"}
    assert data.references[0] == ("Netherlands midfielder Wesley Sneijder has joined French "
                                  "Ligue 1 side Nice on a free transfer.")


def test_sentence_units_of_a_realsumm_reference(pyramid_data_dir):
    data = load_pyramid_dataset(pyramid_data_dir / "realsumm", systems=["abs_bart_out"],
                                unit_kinds=("sentences",), labels=False)
    assert data.units["sentences"][0] == (
        "Anuradha Koirala and 425 young women and girls have been sleeping outdoors because "
        "of aftershocks .",
        "Pushpa Basnet and 45 children she cares for were forced to evacuate their "
        "residence .",
        "Seven other CNN Heroes and their organizations now assisting in relief efforts .")
    assert data.labels == {} and set(data.units) == {"sentences"}


def test_clean_reference_and_sentences():
    assert clean_reference("<t> a  b . </t>\t<t> c . </t>") == "a b . c ."
    assert sentence_units(["It rains. Roads are wet."]) == (("It rains.", "Roads are wet."),)


def test_tiny_folder_loads_with_crlf_and_no_final_newline(tmp_path):
    root = make_folder(tmp_path, **{"ids.txt": "ex1\r\nex2", "labels__sysB": "0\t0\r\n1"})
    data = load_pyramid_dataset(root, unit_kinds=("scus", "stus", "sentences"))
    assert data.ids == ("ex1", "ex2") and data.systems == ("sysA", "sysB")
    assert data.labels["sysB"] == ((0, 0), (1,))
    assert data.units["sentences"][0] == ("It rains .", "Roads are wet .")
    assert data.summaries["sysA"] == ("It rains a lot.", "A cat sat.")


def error_of(root: Path, **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        load_pyramid_dataset(root, **kwargs)
    return info.value


def test_label_count_mismatch_names_file_line_and_counts(tmp_path):
    root = make_folder(tmp_path, labels__sysA="1\t0\n1\t1\n")
    error = error_of(root)
    assert error.path == str(root / "labels" / "sysA.label") and error.line == 2
    assert "2 labels but SCUs.txt line 2 has 1 SCUs" in str(error)


def test_bad_label_value(tmp_path):
    error = error_of(make_folder(tmp_path, labels__sysA="1\tyes\n1\n"))
    assert error.line == 1 and error.field == "label 2" and "'yes'" in str(error)


def test_summary_count_mismatch(tmp_path):
    error = error_of(make_folder(tmp_path, summaries__sysB="only one\n"))
    assert error.path.endswith("sysB.summary")
    assert "1 summary lines, but ids.txt has 2 examples" in str(error)


def test_empty_summary_names_file_and_line(tmp_path):
    error = error_of(make_folder(tmp_path, summaries__sysA="It rains.\n  \n"))
    assert error.path.endswith("sysA.summary") and error.line == 2
    assert "empty summary" in str(error)


def test_empty_unit_and_unit_count(tmp_path):
    error = error_of(make_folder(tmp_path, **{"SCUs.txt": "It rains\t\tRoads\nThe cat sat\n"}))
    assert error.path.endswith("SCUs.txt") and error.line == 1 and error.field == "unit 2"
    error = error_of(make_folder(tmp_path, **{"SCUs.txt": "It rains\n"}))
    assert "1 scus lines, but ids.txt has 2" in str(error)


def test_unknown_system_suggests(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown system 'sysC'.*did you mean"):
        load_pyramid_dataset(make_folder(tmp_path), systems=["sysA", "sysC"])


def test_missing_pieces(tmp_path):
    assert "Pyramid data folder not found" in str(error_of(tmp_path / "nope"))
    error = error_of(make_folder(tmp_path / "a", **{"references.txt": None}))
    assert error.path.endswith("references.txt") and "file not found" in str(error)
    root = make_folder(tmp_path / "b", summaries__sysA=None, summaries__sysB=None,
                       labels__sysA=None, labels__sysB=None)
    assert "no summaries/ folder" in str(error_of(root))
    (root / "summaries").mkdir()
    assert "no *.summary files" in str(error_of(root))
    root = make_folder(tmp_path / "c", labels__sysB=None)
    assert load_pyramid_dataset(root).labels.keys() == {"sysA"}
    error = error_of(root, require_labels=True)
    assert error.path.endswith("labels/sysB.label") and "no human labels" in str(error)
    (root / "labels" / "sysB.label").mkdir()  # present, but not a file: never skipped
    for require in (False, True):
        error = error_of(root, require_labels=require)
        assert error.path.endswith("labels/sysB.label")
        assert error.reason == "expected a labels file, got a folder"


def test_stray_label_and_duplicate_id_and_bad_utf8(tmp_path):
    error = error_of(make_folder(tmp_path / "a", labels__sysZ="1\t0\n1\n"))
    assert "without a matching summaries/sysZ.summary" in str(error)
    error = error_of(make_folder(tmp_path / "b", **{"ids.txt": "ex1\nex1\n"}))
    assert error.line == 2 and "duplicate id 'ex1'" in str(error)
    root = make_folder(tmp_path / "c")
    (root / "summaries" / "sysA.summary").write_bytes(b"fine\n\xff bad\n")
    error = error_of(root)
    assert error.line == 2 and "UTF-8" in str(error)


def test_unknown_unit_kind(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown unit kind 'acus'"):
        load_pyramid_dataset(make_folder(tmp_path), unit_kinds=("acus",))
