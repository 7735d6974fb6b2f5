"""Lite²·⁵Pyramid's official mix (ZhangShiyue/Lite2-3Pyramid, metric/extract_stus.py
`mix_scus_stus`, lines 228-353; line numbers in the comments), each expected value worked by
those rules on recorded frames; and `sumbench stus --scus` end to end."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from leaderboard.evaluators.pyramid.lite25 import (
    TREE_LABELS,
    RecordedTrees,
    align_scus,
    align_stus,
    best_sentence,
    easiness_threshold,
    mix_units,
    regressor_easiness,
    sentence_features,
)
from tasks.plumbing.errors import SumbenchError
from tasks.units.stus import (
    RecordedFrames,
    ReferenceSentences,
    reference_sentences,
)

from helpers import SRL_FRAMES

FRAMES = SRL_FRAMES
REFERENCES = ["Mr. Lee founded Acme in 1990. It grew fast. Sales rose.", "It grew fast."]
# "Acme grew quickly" shares one word with sentence 0 (acme) and one with sentence 1 (grew):
# the tie goes to sentence 0 (`overlap > max_overlap`, 281), so sentence 1 has no SCU
SCUS = [["Lee founded Acme.", "Acme was founded in 1990", "Acme grew quickly", "Sales went up"],
        ["The firm grew"]]
EASINESS = [[0.9, 0.8, 0.2], [0.5]]


def _jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


@pytest.fixture
def references(tmp_path):
    frames = RecordedFrames(_jsonl(tmp_path / "frames.jsonl",
                                   [{"sentence": s, **f} for s, f in FRAMES.items()]))
    return [reference_sentences(reference, frames) for reference in REFERENCES]


def test_an_scu_goes_to_the_sentence_sharing_most_words(references):
    words = references[0].sentence_words
    assert best_sentence(["acme", "grew"], words) == 0      # a tie: the earlier sentence
    assert best_sentence(["grew", "fast"], words) == 1
    assert best_sentence(["nothing", "shared"], words) == 0  # no word shared: the first
    # lower-cased, "," and "." made spaces before word_tokenize (278): "Sales." -> sales
    assert align_scus(["Sales, they said.", "Lee founded Acme."], words) == {
        2: ["Sales, they said."], 0: ["Lee founded Acme."]}


def test_coreference_stus_align_by_the_text_after_the_first_is():
    frames = [{"words": ["Ann", "won", "."], "verbs": []},
              {"words": ["Ann", "thanked", "the", "champion", "."],
               "verbs": [{"tags": ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "O"]}]}]
    # "ann is the champion".split("is")[1] = " the champion" -> sentence 1; in "chris is
    # the mayor" the first "is" is inside "chris": split("is")[1] = " " shares nothing -> 0
    reference = ReferenceSentences(frames, ["Ann is the champion", "Chris is the mayor"])
    assert align_stus(reference) == [
        ["Chris is the mayor", "Ann won ."],
        ["Ann is the champion", "Ann thanked the champion"]]


@pytest.mark.parametrize("scores, percentage, threshold", [
    ([0.9, 0.8, 0.2, 0.5], 50, 0.8),    # k = int(4 * 50 / 100) = 2: the 2nd highest
    ([0.9, 0.8, 0.2, 0.5], 100, 0.2),   # k = 4: the lowest, which is not above itself
    ([0.9, 0.8, 0.2, 0.5], 30, 0.9),    # k = int(1.2) = 1
    ([3.0, 1.0, 2.0], 67, 2.0),         # k = int(2.01) = 2
])
def test_the_threshold_is_the_kth_highest_score(scores, percentage, threshold):
    assert easiness_threshold(scores, percentage) == threshold


@pytest.mark.parametrize("scores, percentage, message", [
    ([0.9, 0.8, 0.2, 0.5], 10, "10% of 4 sentences is none"),   # official: IndexError
    ([0.9], 0, "--percentage must be in 1..100, got 0"),
    ([0.9], 101, "--percentage must be in 1..100, got 101"),
])
def test_thresholds_that_select_nothing_are_refused(scores, percentage, message):
    with pytest.raises(SumbenchError, match=message):
        easiness_threshold(scores, percentage)


def test_sentences_above_the_threshold_take_their_stus(references):
    # threshold 0.8 (the 2nd of 0.9, 0.8, 0.5, 0.2): only sentence 0 of reference 1 is
    # above it (342); sentence 1 has no SCU and is left out (339); the rest keep SCUs
    units, counts = mix_units(references, SCUS, EASINESS, 50)
    assert units == [["Mr. Lee founded Acme", "Mr. Lee founded in 1990", "Sales went up"],
                     ["The firm grew"]]
    assert counts == {"sentences": 4, "stus": 1, "scus": 2, "dropped": 1,
                      "threshold": 0.8, "percentage": 50}
    units, counts = mix_units(references, SCUS, EASINESS, 100)   # threshold 0.2
    assert units == [["Mr. Lee founded Acme", "Mr. Lee founded in 1990", "Sales went up"],
                     ["It grew fast"]]
    assert (counts["stus"], counts["scus"]) == (2, 1)


def test_features_of_a_constituency_tree():
    # 4 tokens; the tree string's 57 characters; brackets 4 deep (S > VP > NP > NNP);
    # 4 / 4 tokens per depth level; then each label opening a bracket, counted
    tree = "(S (NP (NNP John)) (VP (VBD gave) (NP (NNP Mary))) (. .))"
    features = sentence_features(["John", "gave", "Mary", "."], tree)
    assert features[:4] == [4, 57, 4, 1.0] and len(features) == 4 + 65
    counts = {TREE_LABELS[i]: n for i, n in enumerate(features[4:]) if n}
    assert counts == {"S": 1, "NP": 2, "NNP": 2, "VP": 1, "VBD": 1, ".": 1}
    with pytest.raises(SumbenchError, match="has no brackets"):
        sentence_features(["word"], "word")


def _trees(tmp_path, references) -> RecordedTrees:
    rows = [{"sentence": text, "tokens": text.split(), "trees":
             "(S " + " ".join(f"(NN {word})" for word in text.split()) + ")"}
            for reference in references for text in reference.texts]
    return RecordedTrees(_jsonl(tmp_path / "trees.jsonl", rows))


def test_a_regressor_scores_every_sentence_in_one_matrix(tmp_path, references):
    np = pytest.importorskip("numpy")
    xgboost = pytest.importorskip("xgboost", reason="sumbench[lite25] is not installed")
    trees = _trees(tmp_path, references)
    rows = [sentence_features(*trees(text)) for r in references for text in r.texts]
    booster = xgboost.train({"max_depth": 2, "seed": 0}, xgboost.DMatrix(
        np.array(rows), label=np.array([0.9, 0.1, 0.5, 0.3])), num_boost_round=3)
    booster.save_model(str(tmp_path / "model.json"))
    expected = booster.predict(xgboost.DMatrix(np.array(rows))).tolist()
    scores = regressor_easiness(tmp_path / "model.json", trees, references)
    assert scores == [expected[:3], expected[3:]]
    (tmp_path / "bad.json").write_text("not a model")
    with pytest.raises(SumbenchError, match="bad.json: not an XGBoost model"):
        regressor_easiness(tmp_path / "bad.json", trees, references)


def _stus_args(tmp_path, *extra) -> list[str]:
    (tmp_path / "references.txt").write_text("\n".join(REFERENCES) + "\n")
    (tmp_path / "SCUs.txt").write_text("\n".join("\t".join(row) for row in SCUS) + "\n")
    frames = _jsonl(tmp_path / "frames.jsonl", [{"sentence": s, **f} for s, f in FRAMES.items()])
    return ["stus", "--references", str(tmp_path / "references.txt"), "--frames", frames,
            *extra, "--out", str(tmp_path / "mixed.txt")]


def test_sumbench_stus_writes_the_lite25_mix(tmp_path, capsys):
    (tmp_path / "easiness.txt").write_text("0.9\t0.8\t0.2\n0.5\n")
    assert main(_stus_args(tmp_path, "--scus", str(tmp_path / "SCUs.txt"), "--percentage",
                           "50", "--easiness", str(tmp_path / "easiness.txt"))) == 0
    assert (tmp_path / "mixed.txt").read_text().split("\n") == [
        "Mr. Lee founded Acme\tMr. Lee founded in 1990\tSales went up", "The firm grew"]
    assert ("2 references, 4 sentences: 1 with STUs, 2 with SCUs, 1 without SCUs left out "
            "(threshold 0.8 at 50%)") in capsys.readouterr().err


@pytest.mark.parametrize("extra, easiness, message", [
    (["--percentage", "50"], None, "--percentage is for the Lite²·⁵ mix: add --scus FILE"),
    (["--scus", "SCUS"], None, "--scus needs --percentage P"),
    (["--scus", "SCUS", "--percentage", "50"], None, "--scus needs one easiness source"),
    (["--scus", "SCUS", "--percentage", "50", "--regressor", "m.json"], None,
     "--regressor and --trees go together"),
    (["--scus", "SCUS", "--percentage", "50", "--regressor", "m.json", "--trees", "t",
      "--folds", "f1"], None, "--folds and --ids go together"),
    (["--scus", "SCUS", "--percentage", "50", "--regressor", "m.json", "--regressor", "n.json",
      "--trees", "t"], None, "several --regressor models need --folds"),
    (["--scus", "SCUS", "--percentage", "50", "--easiness", "EASY"], "0.9\t0.8\n0.5\n",
     "easiness.txt:1: 2 scores for the reference's 3 sentences"),
    (["--scus", "SCUS", "--percentage", "50", "--easiness", "EASY"], "0.9\t0.8\tx\n0.5\n",
     "easiness.txt:1: expected TAB-separated numbers"),
    (["--scus", "SCUS", "--percentage", "50", "--easiness", "EASY"], "0.9\t0.8\t0.2\n",
     "easiness.txt: 1 lines for 2 references"),
])
def test_bad_mix_inputs_are_one_line_errors(tmp_path, capsys, extra, easiness, message):
    if easiness is not None:
        (tmp_path / "easiness.txt").write_text(easiness)
    names = {"SCUS": str(tmp_path / "SCUs.txt"), "EASY": str(tmp_path / "easiness.txt")}
    assert main(_stus_args(tmp_path, *[names.get(item, item) for item in extra])) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "mixed.txt").exists()


def test_folds_score_each_document_with_its_folds_regressor_and_pool_the_threshold(
        tmp_path, references, capsys):
    """REALSumm's reproduction (`mix_scus_stus_by_folds`): fold k's documents (the ids of
    its file) are scored by regressor k, and one threshold is taken over every sentence of
    every fold: worked here by those rules, with the folds listing the references out of
    order so a wrong mapping shows."""
    np = pytest.importorskip("numpy")
    xgboost = pytest.importorskip("xgboost", reason="sumbench[lite25] is not installed")
    from leaderboard.evaluators.pyramid.lite25 import fold_easiness

    trees = _trees(tmp_path, references)
    rows = [sentence_features(*trees(text)) for r in references for text in r.texts]
    models = []
    for fold, labels in enumerate(([0.9, 0.1, 0.5, 0.3], [0.2, 0.7, 0.4, 0.8])):
        booster = xgboost.train({"max_depth": 2, "seed": 0}, xgboost.DMatrix(
            np.array(rows), label=np.array(labels)), num_boost_round=3)
        booster.save_model(str(tmp_path / f"fold{fold}_xgb.json"))
        models.append(booster)
    (tmp_path / "fold1.id").write_text("doc-b\n")   # fold 0: the second reference
    (tmp_path / "fold2.id").write_text("doc-a\n")   # fold 1: the first
    (tmp_path / "ids.txt").write_text("doc-a\ndoc-b\n")
    official = [models[1].predict(xgboost.DMatrix(np.array(rows[:3]))).tolist(),
                models[0].predict(xgboost.DMatrix(np.array(rows[3:]))).tolist()]
    folds = [tmp_path / "fold1.id", tmp_path / "fold2.id"]
    found = fold_easiness([tmp_path / "fold0_xgb.json", tmp_path / "fold1_xgb.json"], folds,
                          ["doc-a", "doc-b"], trees, references)
    assert found == official
    pooled = sorted([s for scores in official for s in scores], reverse=True)
    threshold = pooled[:int(len(pooled) * 50 / 100)][-1]    # the official expression
    expected_units, counts = mix_units(references, SCUS, official, 50)
    assert counts["threshold"] == threshold
    trees_file = str(tmp_path / "trees.jsonl")
    assert main(_stus_args(tmp_path, "--scus", str(tmp_path / "SCUs.txt"), "--percentage",
                           "50", "--regressor", str(tmp_path / "fold0_xgb.json"), "--folds",
                           str(folds[0]), "--regressor", str(tmp_path / "fold1_xgb.json"),
                           "--folds", str(folds[1]), "--ids", str(tmp_path / "ids.txt"),
                           "--trees", trees_file)) == 0, capsys.readouterr().err
    assert (tmp_path / "mixed.txt").read_text().split("\n") == [
        "\t".join(row) for row in expected_units]
    (tmp_path / "fold2.id").write_text("doc-a\ndoc-b\n")
    with pytest.raises(Exception, match="fold2.id:2.*'doc-b' is in fold 1 too"):
        fold_easiness([tmp_path / "fold0_xgb.json", tmp_path / "fold1_xgb.json"], folds,
                      ["doc-a", "doc-b"], trees, references)
