"""Frames from models run here (leaderboard.evaluators.qapyramid.srl_frames), in the convention of
AllenNLP's SRL BERT (allennlp-models srl_bert.py: `get_viterbi_pairwise_potentials`,
`get_start_transitions`, `make_output_human_readable`; the SRL reader's word pieces and verb
indicator): BIO-constrained Viterbi, verb indicator as token types, a word's tag from its
first piece; an AllenNLP archive converted; and `sumbench stus --srl-model` end to end."""
from __future__ import annotations

import json
import tarfile

import pytest

from benchmark.cli import main
from leaderboard.evaluators.qapyramid.srl_frames import ModelFrames, bio_constraints, viterbi
from tasks.plumbing.errors import SumbenchError

LABELS = ("O", "B-ARG0", "I-ARG0", "B-V", "I-V")
NEG = float("-inf")


def test_i_tags_follow_only_their_own_b_or_i():
    transitions, start = bio_constraints(LABELS)
    allowed = {(LABELS[i], LABELS[j]) for i in range(5) for j in range(5)
               if transitions[i][j] == 0.0}
    assert {pair for pair in allowed if pair[1].startswith("I-")} == {
        ("B-ARG0", "I-ARG0"), ("I-ARG0", "I-ARG0"), ("B-V", "I-V"), ("I-V", "I-V")}
    assert len(allowed) == 5 * 3 + 4  # O and B- follow anything
    assert start == [0.0, 0.0, NEG, 0.0, NEG]


def test_viterbi_sums_the_probabilities_under_the_constraints():
    # argmax per step would say O then I-ARG0 (not allowed): B-ARG0, I-ARG0 sums 1.2
    potentials = [[0.6, 0.4, 0.0, 0.0, 0.0], [0.1, 0.1, 0.8, 0.0, 0.0]]
    assert viterbi(potentials, *bio_constraints(LABELS)) == [1, 2]
    # a tie goes to the lower label index
    assert viterbi([[0.5, 0.5, 0.0, 0.0, 0.0]], *bio_constraints(LABELS)) == [0]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A WordPiece BERT tokenizer; an SRL tagger wired so that the verb's pieces (token type
    1) say B-V, pieces of "fox" B-ARG0 and the rest O (no layer adds anything; the classifier
    reads dimensions that the token-type and "fox" embeddings set); a detector for which every
    word is a predicate."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertForTokenClassification, PreTrainedTokenizerFast

    from trainers.models.tiny import _tiny_bert_config, build_tiny_token_classifier

    root = tmp_path_factory.mktemp("srl")
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(["the fox jumped over the fence ."] * 20, vocab_size=60,
                                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=wordpiece._tokenizer, cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", unk_token="[UNK]", mask_token="[MASK]")
    tagger = BertForTokenClassification(_tiny_bert_config(tokenizer, LABELS, 64)).eval()
    fox = tokenizer.convert_tokens_to_ids("fox")
    with torch.no_grad():
        for layer in tagger.bert.encoder.layer:
            for dense in (layer.attention.output.dense, layer.output.dense):
                dense.weight.zero_()
                dense.bias.zero_()
        embeddings = tagger.bert.embeddings
        for table in (embeddings.word_embeddings, embeddings.position_embeddings,
                      embeddings.token_type_embeddings):
            table.weight.zero_()
        embeddings.token_type_embeddings.weight[0, :2] = torch.tensor([1.0, -1.0])
        embeddings.token_type_embeddings.weight[1, 2:4] = torch.tensor([1.0, -1.0])
        embeddings.word_embeddings.weight[fox, 4:6] = torch.tensor([2.0, -2.0])
        tagger.classifier.weight.zero_()
        tagger.classifier.bias.zero_()
        tagger.classifier.weight[0, 0] = tagger.classifier.weight[3, 2] = 1.0
        tagger.classifier.weight[1, 4] = 2.0
    tagger.save_pretrained(root / "srl")
    tokenizer.save_pretrained(root / "srl")
    build_tiny_token_classifier(tokenizer, save_dir=root / "detector", favour=1)
    return {"root": root, "tagger": tagger, "tokenizer": tokenizer}


FRAMES = {"sentence": "The fox jumped.", "words": ["The", "fox", "jumped", "."], "verbs": [
    {"verb": "The", "tags": ["B-V", "B-ARG0", "O", "O"]},
    {"verb": "fox", "tags": ["O", "B-ARG0", "O", "O"]},
    {"verb": "jumped", "tags": ["O", "B-ARG0", "B-V", "O"]}]}


@pytest.mark.slow
def test_frames_of_a_sentence(models):
    frames = ModelFrames(str(models["root"] / "srl"), str(models["root"] / "detector"))
    # "." is no predicate (the detector's words need a letter or digit)
    assert frames("The fox jumped.") == FRAMES
    ids, starts = frames.pieces(["The", "foxed"])   # lower-cased, cut by WordPiece alone
    assert models["tokenizer"].convert_ids_to_tokens(ids) == [
        "[CLS]", "the", "fox", "##ed", "[SEP]"] and starts == [1, 2]
    # a word's tag is its first piece's: "fox" says B-ARG0, "##ed" O
    jumped = frames("The foxed jumped.")["verbs"][-1]
    assert jumped == {"verb": "jumped", "tags": ["O", "B-ARG0", "B-V", "O"]}


def test_an_allennlp_archive_converts_to_the_same_tagger(models, tmp_path, capsys):
    import torch

    archive = tmp_path / "unpacked"
    (archive / "vocabulary").mkdir(parents=True)
    (archive / "vocabulary" / "labels.txt").write_text("\n".join(LABELS) + "\n")
    weights = {key.replace("bert.", "bert_model.", 1).replace("classifier.",
                                                              "tag_projection_layer.", 1): value
               for key, value in models["tagger"].state_dict().items()}
    weights["bert_model.pooler.dense.weight"] = torch.zeros(64, 64)  # BertModel's pooler
    weights["bert_model.pooler.dense.bias"] = torch.zeros(64)
    # saved by an older transformers: the position ids buffer too
    weights["bert_model.embeddings.position_ids"] = torch.arange(1024)[None]
    torch.save(weights, archive / "weights.th")
    with tarfile.open(tmp_path / "srl-bert.tar.gz", "w:gz") as tar:
        for name in ("weights.th", "vocabulary"):
            tar.add(archive / name, arcname=name)
    assert main(["srl-convert", "--archive", str(tmp_path / "srl-bert.tar.gz"), "--bert",
                 str(models["root"] / "srl"), "--out", str(tmp_path / "converted")]) == 0
    frames = ModelFrames(str(tmp_path / "converted"), str(models["root"] / "detector"))
    assert frames("The fox jumped.") == FRAMES
    with pytest.MonkeyPatch.context() as before_3_11_4:  # no extraction filters yet
        plain_extractall = tarfile.TarFile.extractall

        def extractall(self, path=".", members=None, *, numeric_owner=False, **filter):
            if filter:
                raise TypeError("extractall() got an unexpected keyword argument 'filter'")
            return plain_extractall(self, path, members, numeric_owner=numeric_owner)

        before_3_11_4.delattr(tarfile, "data_filter")
        before_3_11_4.setattr(tarfile.TarFile, "extractall", extractall)
        assert main(["srl-convert", "--archive", str(tmp_path / "srl-bert.tar.gz"), "--bert",
                     str(models["root"] / "srl"), "--out", str(tmp_path / "converted-old")]) == 0
    assert ModelFrames(str(tmp_path / "converted-old"),
                       str(models["root"] / "detector"))("The fox jumped.") == FRAMES
    (tmp_path / "not-a-tar.tar.gz").write_bytes(b"plain bytes")
    (tmp_path / "bigger").mkdir()
    (tmp_path / "bigger" / "config.json").write_text(json.dumps(
        {"model_type": "bert", "hidden_size": 128, "num_attention_heads": 4,
         "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 60}))
    for source, bert, message in (
            (tmp_path / "not-a-tar.tar.gz", models["root"] / "srl", "not a readable tar archive"),
            (archive, tmp_path / "bigger", "weights do not fit the BERT of"),
            (tmp_path, models["root"] / "srl", "not an AllenNLP archive (no weights.th)")):
        assert main(["srl-convert", "--archive", str(source), "--bert", str(bert), "--out",
                     str(tmp_path / "other")]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(errors) == 1 and message in errors[0], errors
    assert not (tmp_path / "other").exists()


def test_sumbench_stus_with_models(models, tmp_path, capsys):
    references = tmp_path / "references.txt"
    references.write_text("The fox jumped.\n")
    out = tmp_path / "STUs.txt"
    root = models["root"]
    assert main(["stus", "--references", str(references), "--srl-model", str(root / "srl"),
                 "--predicate-model", str(root / "detector"), "--out", str(out)]) == 0
    # per frame: subject = tagged words before V, one unit per argument after it; the verb
    # "The" has no subject, "fox" no V tag, "jumped": subject "fox" and no argument after
    assert out.read_text() == "The fox jumped ."   # no frame gives a unit: the words
    for extra, message in (
            ([], "semantic-role frames are needed: --frames FILE (recorded) or --srl-model"),
            (["--srl-model", str(root / "srl")], "no spaCy pipeline with a tagger is installed "
                                                  "(en_core_web_sm): give a predicate detector "
                                                  "(--predicate-model DIR) or a pipeline")):
        assert main(["stus", "--references", str(references), *extra, "--out",
                     str(tmp_path / "x.txt")]) == 2
        assert message in capsys.readouterr().err
    frames_file = tmp_path / "frames.jsonl"
    frames_file.write_text(json.dumps(FRAMES) + "\n")
    assert main(["stus", "--references", str(references), "--frames", str(frames_file),
                 "--predicate-model", str(root / "detector"), "--out",
                 str(tmp_path / "x.txt")]) == 2
    assert "--predicate-model and --spacy-pipeline go with --srl-model" in \
        capsys.readouterr().err


def _verb_tagging_pipeline(folder):
    """A spaCy pipeline that tags parts of speech (an attribute ruler: 'jumped' VERB, 'has'
    AUX), saved where `spacy.load` reads it: a tagger, as en_core_web_sm holds one."""
    import spacy

    pipeline = spacy.blank("en")
    ruler = pipeline.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "jumped"}]], {"POS": "VERB"})
    ruler.add([[{"LOWER": "has"}]], {"POS": "AUX"})
    pipeline.to_disk(folder)
    return str(folder)


@pytest.mark.slow
def test_a_spacy_pipeline_with_a_tagger_gives_the_verbs_verb_and_aux(models, tmp_path):
    """As the official predictor: spaCy's words, and its VERB and AUX words as the verbs; the
    detector is not needed (and not asked) then."""
    pipeline = _verb_tagging_pipeline(tmp_path / "pipeline")
    frames = ModelFrames(str(models["root"] / "srl"), spacy_pipeline=pipeline)
    found = frames("The 43-year-old fox has jumped.")
    assert found["words"] == ["The", "43", "-", "year", "-", "old", "fox", "has", "jumped", "."]
    assert [verb["verb"] for verb in found["verbs"]] == ["has", "jumped"]
    with pytest.raises(SumbenchError, match="'missing-pipeline' is not installed"):
        ModelFrames(str(models["root"] / "srl"), spacy_pipeline="missing-pipeline")


def test_spacys_words_are_the_released_realsumm_stus_words(pyramid_data_dir):
    """The released REALSumm STUs were made on the official SRL predictor's words, spaCy's:
    every STU whose words all occur in some tokenization of its reference is checked; spaCy's
    rule-based tokenizer holds all of each one's words, NLTK's word_tokenize not ("43 -
    year", "n’t")."""
    import re

    from leaderboard.evaluators.qapyramid.srl_frames import spacy_words
    from tasks.plumbing.treebank import word_tokenize

    root = pyramid_data_dir / "realsumm"
    references = (root / "references.txt").read_text(encoding="utf-8").splitlines()
    stus = (root / "STUs.txt").read_text(encoding="utf-8").splitlines()
    checked = spacy_agree = nltk_agree = 0
    for reference, line in zip(references, stus):
        text = " ".join(re.sub(r"</?t>", " ", reference).split())
        spacy_set, nltk_set = set(spacy_words(text)), set(word_tokenize(text))
        for unit in line.split("\t"):
            words = unit.split()
            if not all(word in spacy_set or word in nltk_set for word in words):
                continue  # a word neither tokenization has: nothing to tell them apart
            checked += 1
            spacy_agree += all(word in spacy_set for word in words)
            nltk_agree += all(word in nltk_set for word in words)
    print(f"REALSumm STUs checked: {checked}; spaCy's words agree on {spacy_agree}, "
          f"NLTK's on {nltk_agree}")
    assert checked >= 900 and spacy_agree == checked and nltk_agree < checked
