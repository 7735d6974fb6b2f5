"""Lite³Pyramid's STU rules (ZhangShiyue/Lite2-3Pyramid, metric/extract_stus.py:
`_get_srl_list` for frames, `_get_and_replace_coref` for coreference) on recorded frames,
each expected value worked by those rules; and `sumbench stus` end to end."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from tasks.units.stus import (
    RecordedFrames,
    reference_units,
    replace_coreferences,
    sentence_units,
    verb_units,
)

from helpers import SRL_FRAMES

WORDS = ["The", "mayor", "was", "elected", "in", "May", "."]


@pytest.mark.parametrize("words, tags, expected", [
    # subject = tagged words before V; after V, each new label opens an argument
    (["John", "gave", "Mary", "a", "book", "."],
     ["B-ARG0", "B-V", "B-ARG2", "B-ARG1", "I-ARG1", "O"],
     ["John gave Mary", "John gave a book"]),
    # a form of "be" before the verb joins it (the word before the V word)
    (WORDS, ["B-ARG1", "I-ARG1", "O", "B-V", "B-ARGM-TMP", "I-ARGM-TMP", "O"],
     ["The mayor was elected in May"]),
    # a verb after "to" gives nothing
    (["He", "wants", "to", "leave", "now"], ["B-ARG0", "O", "O", "B-V", "B-ARGM-TMP"], []),
    # no subject words: nothing
    (["Leave", "now"], ["B-V", "B-ARGM-TMP"], []),
    # a modal verb gives nothing
    (["She", "can", "swim"], ["B-ARG0", "B-V", "B-ARG1"], []),
    # every tagged word before the verb joins the subject, whatever its label
    (["He", "did", "not", "win", "the", "race"],
     ["B-ARG0", "O", "B-ARGM-NEG", "B-V", "B-ARG1", "I-ARG1"], ["He not win the race"]),
    # after the verb, a first argument ARGM-NEG joins the verb
    (["He", "won", "not", "the", "race"],
     ["B-ARG0", "B-V", "B-ARGM-NEG", "B-ARG1", "I-ARG1"], ["He won not the race"]),
    # an argument's words are grouped by label, not by B-/I- (`tag_dict[-1][0] != tag`):
    # two ARG1 spans in a row are one argument; a stray I- of a new label opens one
    (["John", "gave", "books", "and", "pens", "today"],
     ["B-ARG0", "B-V", "B-ARG1", "O", "B-ARG1", "I-ARGM-TMP"],
     ["John gave books pens", "John gave today"]),
    # a verb without arguments gives nothing; O words never join
    (["It", "rained", "."], ["B-ARG0", "B-V", "O"], []),
])
def test_verb_frames(words, tags, expected):
    assert verb_units(words, tags) == expected


def test_a_sentence_keeps_each_unit_once_and_falls_back_to_its_words():
    frame = {"words": ["A", "saw", "B", "."], "verbs": [
        {"tags": ["B-ARG0", "B-V", "B-ARG1", "O"]}, {"tags": ["B-ARG0", "B-V", "B-ARG1", "O"]}]}
    assert sentence_units(frame) == ["A saw B"]
    assert sentence_units({"words": ["Wow", "!"], "verbs": []}) == ["Wow !"]


def test_coreference_replaces_later_mentions_and_adds_is_units():
    words = ["Barack", "Obama", "met", "the", "president", ".", "He", "said", "the",
             "former", "senator", "agreed", "."]
    clusters = [[[0, 1], [3, 4], [6, 6], [8, 10]]]
    text, units = replace_coreferences(words, clusters)
    assert text == ("Barack Obama met Barack Obama . Barack Obama said Barack Obama agreed .")
    assert units == ["Barack Obama is the president", "Barack Obama is the former senator"]
    # a later name sharing half its words with the first, or containing it, adds no unit
    words = ["Joe", "Smith", "and", "Smith", "Joe", "left", "with", "Mr", "Joe", "Smith"]
    text, units = replace_coreferences(words, [[[0, 1], [3, 4], [7, 9]]])
    assert units == [] and text == "Joe Smith and Joe Smith left with Joe Smith"
    # a cluster of pronouns only changes nothing
    assert replace_coreferences(["he", "and", "she"], [[[0, 0], [2, 2]]]) == (
        "he and she", [])


def _frames_file(tmp_path, frames: dict) -> str:
    path = tmp_path / "frames.jsonl"
    path.write_text("".join(json.dumps({"sentence": sentence, **frame}) + "\n"
                            for sentence, frame in frames.items()))
    return str(path)


FRAMES = {sentence: SRL_FRAMES[sentence] for sentence in ("Mr. Lee founded Acme in 1990.",
                                                        "It grew fast.")}


def test_references_split_into_nltk_sentences_then_frames(tmp_path):
    frames = RecordedFrames(_frames_file(tmp_path, FRAMES))
    assert reference_units("Mr. Lee founded Acme in 1990. It grew fast.", frames) == [
        "Mr. Lee founded Acme", "Mr. Lee founded in 1990", "It grew fast"]


@pytest.mark.parametrize("command", [["units", "stus"], ["stus"]])
def test_sumbench_units_stus_writes_the_units_file(tmp_path, capsys, command):
    """`sumbench units stus`, beside the other unit kinds; `sumbench stus` is the same."""
    references = tmp_path / "references.txt"
    references.write_text("Mr. Lee founded Acme in 1990. It grew fast.\nIt grew fast.\n")
    out = tmp_path / "STUs.txt"
    assert main([*command, "--references", str(references), "--frames",
                 _frames_file(tmp_path, FRAMES), "--out", str(out)]) == 0
    assert out.read_text().split("\n") == [
        "Mr. Lee founded Acme\tMr. Lee founded in 1990\tIt grew fast", "It grew fast"]
    assert "2 references, 4 STUs" in capsys.readouterr().err
    references.write_text("A sentence nobody parsed.\n")
    assert main([*command, "--references", str(references), "--frames",
                 _frames_file(tmp_path, FRAMES), "--out", str(tmp_path / "other.txt")]) == 2
    assert "has no frames for the sentence 'A sentence nobody parsed.'" in \
        capsys.readouterr().err
    assert not (tmp_path / "other.txt").exists()


def test_coreference_comes_first_and_its_units_last(tmp_path):
    from tasks.units.stus import RecordedCoref

    reference = "<t> Ann Lee won . </t> <t> She thanked the champion . </t>"
    coref = tmp_path / "coref.jsonl"
    coref.write_text(json.dumps({
        "text": "Ann Lee won .     She thanked the champion .",
        "document": ["Ann", "Lee", "won", ".", "She", "thanked", "the", "champion", "."],
        "clusters": [[[0, 1], [4, 4], [6, 7]]]}) + "\n")
    frames = {"Ann Lee won .": {"words": ["Ann", "Lee", "won", "."],
                                "verbs": [{"tags": ["B-ARG0", "I-ARG0", "B-V", "O"]}]},
              "Ann Lee thanked Ann Lee .": {
                  "words": ["Ann", "Lee", "thanked", "Ann", "Lee", "."],
                  "verbs": [{"tags": ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "I-ARG1", "O"]}]}}
    units = reference_units(reference, RecordedFrames(_frames_file(tmp_path, frames)),
                            RecordedCoref(coref))
    assert units == ["Ann Lee won .", "Ann Lee thanked Ann Lee", "Ann Lee is the champion"]
