"""One vocabulary of unit kinds (tasks.units.kinds, issue 64): every place's tuple comes from
the enum and stays what it was, every older spelling reads as its kind, an unknown one is
check_choice's UnknownNameError, and files written with an old spelling still load."""
from __future__ import annotations

import json

import pytest

from tasks.plumbing.errors import SumbenchError, UnknownNameError
from tasks.units.kinds import (
    ALIASES,
    UnitKind,
    check_unit_kind,
    read_unit_kind,
    spellings,
    unit_kind_or_none,
)

from lb_helpers import write_pyramid_folder


@pytest.mark.parametrize("spelled, kind", [
    *((kind.value, kind) for kind in UnitKind),
    ("scu", UnitKind.SCUS), ("stu", UnitKind.STUS), ("qa", UnitKind.QAS),
    ("statement", UnitKind.STATEMENTS), ("ssus", UnitKind.SENTENCES),
    (UnitKind.SGUS, UnitKind.SGUS),
])
def test_every_spelling_reads_as_its_kind(spelled, kind):
    assert read_unit_kind(spelled) is kind and unit_kind_or_none(spelled) is kind


def test_the_alias_table_is_the_older_spellings_and_nothing_else():
    assert ALIASES == {"qa": UnitKind.QAS, "statement": UnitKind.STATEMENTS,
                       "scu": UnitKind.SCUS, "stu": UnitKind.STUS, "ssus": UnitKind.SENTENCES}
    assert [kind.value for kind in UnitKind] == ["scus", "stus", "smus", "sgus", "sentences",
                                                 "ngrams", "qas", "statements"]
    assert f"{UnitKind.SCUS} {UnitKind.QAS!s}" == "scus qas"  # not "UnitKind.SCUS"
    assert json.dumps({UnitKind.SCUS: [UnitKind.SENTENCES]}) == '{"scus": ["sentences"]}'


@pytest.mark.parametrize("spelled, known, what, message", [
    ("acus", None, "unit kind", "unknown unit kind 'acus'; did you mean 'scus'? (known: scus, "
                                "stus, smus, sgus, sentences, ngrams, qas, statements)"),
    ("SCUs", ("scus", "stus", "sentences"), "unit kind",
     "unknown unit kind 'SCUs' (known: scus, stus, sentences)"),
    ("scu", ("qa", "statement"), "QAPyramid unit kind",
     "unknown QAPyramid unit kind 'scu' (known: qa, statement)"),  # a kind, not taken here
    ("scus", ("smus", "sgus", "ssus", "ngrams"), "extra unit kind",
     "unknown extra unit kind 'scus' (known: smus, sgus, ssus, ngrams)"),
    (None, ("scus",), "unit kind", "unknown unit kind None (known: scus)"),
    ("", ("scus",), "unit kind", "unknown unit kind '' (known: scus)"),
])
def test_an_unknown_spelling_is_check_choice_s_error(spelled, known, what, message):
    with pytest.raises(UnknownNameError) as caught:
        read_unit_kind(spelled, known, what)
    assert str(caught.value) == message and isinstance(caught.value, SumbenchError)
    assert isinstance(caught.value, KeyError)


def test_a_place_s_choice_that_is_no_unit_kind_is_not_read_as_one():
    assert check_unit_kind("file", ("scus", "mix-by-example", "file")) == "file"
    with pytest.raises(ValueError, match="^'file' is not a unit kind$"):
        read_unit_kind("file", ("scus", "mix-by-example", "file"))


@pytest.mark.parametrize("spelled, known, expected", [
    ("sentences", ("smus", "sgus", "ssus", "ngrams"), "ssus"),   # the gold's key
    ("ssus", ("smus", "sgus", "ssus", "ngrams"), "ssus"),
    ("ssus", ("scus", "stus", "sentences"), "sentences"),        # a Pyramid folder's
    ("scu", ("scus", "stus", "sentences"), "scus"),
    ("qas", ("qa", "statement"), "qa"),                          # a presence instance's
    ("statements", ("qa", "statement"), "statement"),
    ("ssus", ("scus", "sentences", "ssus"), "ssus"),             # its own spelling first
    ("sentences", ("scus", "sentences", "ssus"), "sentences"),
    (UnitKind.SCUS, ("scus",), "scus"),
])
def test_a_place_gets_its_own_spelling(spelled, known, expected):
    found = check_unit_kind(spelled, known)
    assert found == expected and type(found) is str


def _places():
    from leaderboard.evaluators.pyramid.scoring import MODEL_UNIT_KINDS
    from leaderboard.tracks.pyramid_gold import EXTRA_UNIT_KINDS
    from tasks.qapyramid import pyramid_data, units
    from tasks.units import unit_files

    return {"unit_files.KINDS": unit_files.KINDS,
            "unit_files.SPACELESS_DROPPED": unit_files.SPACELESS_DROPPED,
            "pyramid_data.UNIT_KINDS": pyramid_data.UNIT_KINDS,
            "pyramid_data.UNIT_FILES": tuple(pyramid_data.UNIT_FILES.items()),
            "units.UNIT_KINDS": units.UNIT_KINDS, "units.QA_UNIT_KINDS": units.QA_UNIT_KINDS,
            "pyramid_gold.EXTRA_UNIT_KINDS": EXTRA_UNIT_KINDS,
            "scoring.MODEL_UNIT_KINDS": MODEL_UNIT_KINDS}


@pytest.mark.parametrize("place, before", [
    ("unit_files.KINDS", ("scus", "stus", "smus", "sgus", "ngrams", "sentences")),
    ("unit_files.SPACELESS_DROPPED", ("scus", "stus")),
    ("pyramid_data.UNIT_KINDS", ("scus", "stus", "sentences")),
    ("pyramid_data.UNIT_FILES", (("scus", "SCUs.txt"), ("stus", "STUs.txt"))),
    ("units.UNIT_KINDS", ("qa", "statement", "scu", "stu")),
    ("units.QA_UNIT_KINDS", ("qa", "statement")),
    ("pyramid_gold.EXTRA_UNIT_KINDS", ("smus", "sgus", "ssus", "ngrams")),
    ("scoring.MODEL_UNIT_KINDS", ("scus", "stus", "sentences", "mix-by-example", "file")),
])
def test_each_place_keeps_its_subset_and_spelling(place, before):
    found = _places()[place]
    assert found == before
    assert all(type(value) is str for pair in found for value in (
        pair if isinstance(pair, tuple) else (pair,)))  # plain strings, as JSON stores them
    assert spellings(UnitKind.SENTENCES, spelling={UnitKind.SENTENCES: "ssus"}) == ("ssus",)


@pytest.mark.parametrize("key, kind", [
    ("scus", "scus"), ("sentences", "sentences"), ("ssus", "sentences"), ("scu", "scus"),
    ("stu", "stus"), ("sgus", "sgus"),
])
def test_a_json_unit_file_keyed_by_any_spelling_loads(tmp_path, key, kind):
    from tasks.units.unit_files import paper_units, read_unit_file

    path = tmp_path / "units.json"
    path.write_text(json.dumps([{"instance_id": "a", "summary": "S", key: ["x y", "z"]},
                                {"instance_id": "b", "summary": "T", key: ["w"]}]))
    found = read_unit_file(path)
    assert (found.kind, found.units, found.ids) == (kind, (("x y", "z"), ("w",)), ("a", "b"))
    dropped = kind in ("scus", "stus")  # the paper's rule, whichever spelling names the kind
    assert paper_units(found, key) == ([["x y"], []] if dropped else [["x y", "z"], ["w"]])


def test_a_json_unit_file_with_both_spellings_takes_the_canonical_key(tmp_path):
    from tasks.units.unit_files import read_unit_file

    path = tmp_path / "units.json"
    path.write_text(json.dumps([{"ssus": ["old"], "sentences": ["new"]}]))
    assert read_unit_file(path).units == (("new",),)
    path.write_text(json.dumps([{"qas": ["a question? an answer"]}]))  # no kind a file holds
    with pytest.raises(SumbenchError) as caught:
        read_unit_file(path)
    assert str(caught.value) == (f"{path}, field '[0]': expected an object with a unit list "
                                 f"(scus, stus, smus, sgus, ngrams, sentences)")


@pytest.mark.parametrize("asked, loaded", [
    (("ssus",), {"sentences"}), (("scu", "stus"), {"scus", "stus"}),
    (("sentences", "ssus"), {"sentences"}),
])
def test_a_pyramid_folder_loads_a_kind_in_any_spelling(tmp_path, asked, loaded):
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    root = write_pyramid_folder(tmp_path / "set", n_examples=2)
    data = load_pyramid_dataset(root, unit_kinds=asked, labels=False)
    plain = load_pyramid_dataset(root, unit_kinds=tuple(loaded), labels=False)
    assert set(data.units) == loaded and data.units == plain.units
    with pytest.raises(UnknownNameError, match=r"^unknown unit kind 'smus' \(known: scus, "
                                               r"stus, sentences\)$"):
        load_pyramid_dataset(root, unit_kinds=("smus",), labels=False)


def test_a_gold_keeps_file_given_sentences_under_ssus_whatever_the_spelling(tmp_path):
    from leaderboard.tracks.pyramid_gold import dataset_of, load_pyramid_gold

    root = write_pyramid_folder(tmp_path / "set", n_examples=2)
    ssus = tmp_path / "ssus.txt"
    ssus.write_text("A b.\tC d.\nE f.\n")
    old = load_pyramid_gold(root, {"ssus": str(ssus)})
    new = load_pyramid_gold(root, {"sentences": str(ssus)})
    assert new == old and set(old["unit_files"]) == {"ssus"}  # the same gold, sha256 included
    assert old["units"]["ssus"] == [["A b.", "C d."], ["E f."]]
    stored = json.loads(json.dumps(old))  # a gold stored before: its keys as they were
    assert dataset_of(stored).units["ssus"] == (("A b.", "C d."), ("E f.",))


@pytest.mark.parametrize("asked, stored, unit", [
    ("qa", "qa", "Who escaped? Juan"), ("qas", "qa", "Who escaped? Juan"),
    ("statement", "statement", "Juan escaped."), ("statements", "statement", "Juan escaped."),
])
def test_presence_instances_keep_the_singular_spelling(asked, stored, unit):
    from tasks.qapyramid.dataset import QAPyramidExample
    from tasks.qapyramid.presence_detection import qapyramid_instances
    from tasks.qapyramid.units import unit_text

    example = QAPyramidExample("e1", "Source.", "Juan escaped.", (("Who escaped?", "Juan"),),
                               {"A": (1,)}, {"A": "Juan got away."})
    (row,) = qapyramid_instances([example], unit_kind=asked)
    assert (row["unit_kind"], row["unit"], row["label"]) == (stored, unit, 1)
    assert unit_text(asked, "Who escaped?", "Juan") == unit
    with pytest.raises(ValueError, match="unit kind 'scus' is not built from a QA pair"):
        unit_text("scus", "Who escaped?", "Juan")
