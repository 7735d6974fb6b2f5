"""The SCU-approximation study's sentence units (SSUs) and n-gram baseline: the pool and its
5% sample, the sentences a reference is cut into, `sumbench units sentences|ngrams` and their
files flowing into `pyramid --units file`."""
from __future__ import annotations

import json
import random

import pytest

from tasks.units.approx_units import ngram_pool, sample_ngrams, tagged_sentences

from helpers import sumbench
from lb_helpers import write_pyramid_folder


def test_the_pool_holds_every_3_to_5_gram_within_sentences():
    pool = ngram_pool(["a b c d e", "f g h"])
    assert pool == ["a b c", "b c d", "c d e", "a b c d", "b c d e", "a b c d e", "f g h"]
    sentences = [" ".join(f"s{i}t{j}" for j in range(13)) for i in range(4)]
    total = len(ngram_pool(sentences))  # (11 + 10 + 9) per sentence
    drawn = sample_ngrams(sentences, random.Random("0:1"))
    assert total == 120 and len(drawn) == 6 and set(drawn) <= set(ngram_pool(sentences))
    assert len(set(drawn)) == 6  # without replacement
    assert drawn == sample_ngrams(sentences, random.Random("0:1"))  # seeded
    assert drawn != sample_ngrams(sentences, random.Random("1:1"))
    assert sample_ngrams(["a b c"], random.Random(0)) == []  # floor(0.05 x 1) = 0


def test_tagged_sentences():
    assert tagged_sentences("<t> One . </t> <t>  Two  words </t>") == ["One .", "Two words"]
    assert tagged_sentences("No marks here.") is None


@pytest.fixture(scope="module")
def sentencizer(tmp_path_factory):
    import spacy

    folder = tmp_path_factory.mktemp("spacy") / "sentencizer"
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(folder)
    return folder


def test_sentences_from_marks_or_spacy_and_coreference(tmp_path, capsys, sentencizer):
    references = tmp_path / "references.txt"
    references.write_text("<t> Ada met Bob . </t> <t> She left . </t>\n"
                          "Cal sings. He dances.\n")
    coref = tmp_path / "coref.jsonl"
    # keyed as `stus --coref` keys it: the reference with its marks made spaces, stripped
    records = [{"text": "Ada met Bob .     She left .", "document": "Ada met Bob . She left ."
                .split(), "clusters": [[[0, 0], [4, 4]]]},
               {"text": "Cal sings. He dances.", "document": ["Cal", "sings", ".", "He",
                                                            "dances", "."],
                "clusters": [[[0, 0], [3, 3]]]}]
    coref.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, as_json = tmp_path / "ssus.txt", tmp_path / "ssus.json"
    code, _, err = sumbench(capsys, "units", "sentences", "--references", str(references),
                            "--spacy-pipeline", str(sentencizer), "--out", str(out),
                            "--json-out", str(as_json))
    assert code == 0, err
    assert out.read_text().splitlines() == ["Ada met Bob .\tShe left .",
                                            "Cal sings.\tHe dances."]
    assert json.loads(as_json.read_text())[1] == {
        "instance_id": "1", "summary": "Cal sings. He dances.",
        "sentences": ["Cal sings.", "He dances."]}
    code, _, err = sumbench(capsys, "units", "sentences", "--references", str(references),
                            "--coref", str(coref), "--spacy-pipeline", str(sentencizer),
                            "--out", str(out))
    assert code == 0, err
    assert out.read_text().splitlines() == ["Ada met Bob .\tAda left .",
                                            "Cal sings .\tCal dances ."]


def test_unit_files_flow_into_pyramid(tmp_path, capsys, sentencizer):
    root = write_pyramid_folder(tmp_path / "tiny", n_examples=4)
    for kind in ("sentences", "ngrams"):
        out = tmp_path / f"{kind}.txt"
        code, _, err = sumbench(capsys, "units", kind, "--references",
                                str(root / "references.txt"), "--spacy-pipeline",
                                str(sentencizer), "--out", str(out), "--seed", "1") \
            if kind == "ngrams" else sumbench(
                capsys, "units", kind, "--references", str(root / "references.txt"),
                "--spacy-pipeline", str(sentencizer), "--out", str(out))
        assert code == 0, err
        assert len(out.read_text().splitlines()) == 4
    code, printed, err = sumbench(capsys, "pyramid", "--pyramid", str(root), "--units", "file",
                                  "--units-file", str(tmp_path / "sentences.txt"),
                                  "--presence", "lexical")
    assert code == 0, err
    assert "alpha" in printed


def test_a_reference_without_sentences_is_one_line_naming_it(tmp_path, capsys, sentencizer):
    references = tmp_path / "references.txt"
    references.write_text("<t> A b . </t>\n<t> </t>\n")
    code, _, err = sumbench(capsys, "units", "sentences", "--references", str(references),
                            "--out", str(tmp_path / "out.txt"))
    assert code == 2 and "references.txt:2" in err and "no sentences" in err, err
    assert not (tmp_path / "out.txt").exists()
