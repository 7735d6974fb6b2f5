"""Pyramid over a units file as a registered evaluator (leaderboard.evaluators.pyramid.evaluator):
the same scores as the Pyramid of a folder's units, its options checked by name, and
`meta-eval --metric pyramid` on a Pyramid folder."""
from __future__ import annotations

import json

import pytest

from leaderboard.evaluators.pyramid.evaluator import PyramidEvaluator
from leaderboard.evaluators.pyramid.presence import LexicalBackend
from leaderboard.evaluators.pyramid.scoring import evaluate_system
from leaderboard.evaluators.registry import evaluator_of
from tasks.metrics.evaluators import score_summaries
from tasks.plumbing.errors import SumbenchError
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

from helpers import sumbench
from lb_helpers import write_pyramid_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_pyramid_folder(tmp_path_factory.mktemp("pyr") / "set", n_examples=5)


def test_pyramid_over_a_units_file_equals_the_folder_s_pyramid(folder):
    data = load_pyramid_dataset(folder, unit_kinds=("stus",), labels=False)
    evaluator = evaluator_of("pyramid", {"units": str(folder / "STUs.txt"),
                                         "threshold": "0.6"})
    for system in data.systems:
        summaries = data.summaries[system]
        expected = evaluate_system(system, summaries, data.units["stus"],
                                   LexicalBackend(0.6)).per_example
        scores = score_summaries(evaluator, summaries, data.references, None, "pyramid")
        assert scores == list(expected)
    # beta copies two of each example's three facts, which are its SCUs
    scus = evaluator.with_options({"units": str(folder / "SCUs.txt")})
    assert score_summaries(scus, data.summaries["beta"], data.references, None) == \
        pytest.approx([2 / 3] * 5)
    assert evaluator.settings["units_sha256"] and evaluator.settings["presence"] == "lexical"


@pytest.mark.parametrize("options, message", [
    ({"units": "u.txt", "colour": "red"}, "unknown pyramid option 'colour'"),
    ({"units": "u.txt", "presence": "human"}, "the human labels cannot score a summary"),
    ({"units": "u.txt", "presence": "nli"}, "--presence nli needs --model"),
    ({"units": "u.txt", "presence": "bogus"}, "unknown presence backend 'bogus'"),
    ({"units": "u.txt", "presence": "lexical", "model": "m"}, "--presence lexical does not "
                                                              "take --model"),
])
def test_bad_options_are_refused_by_name(options, message):
    with pytest.raises(SumbenchError, match=message):
        evaluator_of("pyramid", options)


@pytest.mark.parametrize("options, message", [
    ({}, "pyramid needs units=FILE"),
    ({"units": "/no/such/units.txt"}, "pyramid: no units file /no/such/units.txt"),
    ({"units": "STUS", "threshold": "high"}, "pyramid: threshold 'high' is not a number"),
    ({"units": "STUS"}, "presence=lexical needs threshold=T"),
])
def test_an_evaluator_that_cannot_score_says_why_before_it_scores(folder, options, message):
    options = {key: str(folder / "STUs.txt") if value == "STUS" else value
               for key, value in options.items()}
    evaluator = PyramidEvaluator(options)
    assert message in evaluator.problem()
    with pytest.raises(SumbenchError, match=message.replace("(", r"\(")):
        score_summaries(evaluator, ["a summary"], ["a reference"], None)


def test_a_units_file_of_another_length_names_it(folder):
    evaluator = PyramidEvaluator({"units": str(folder / "STUs.txt"), "threshold": "0.5"})
    with pytest.raises(SumbenchError, match="STUs.txt: 5 examples but the folder has 2"):
        score_summaries(evaluator, ["a", "b"], ["r", "r"], None)


def test_meta_eval_takes_pyramid_over_any_units_file(folder, tmp_path, capsys):
    out = tmp_path / "meta.json"
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", folder, "--metric",
                                  "pyramid", "--metric-option", f"units={folder / 'SCUs.txt'}",
                                  "--metric-option", "threshold=0.5", "--out", out)
    assert code == 0, err
    # lexical presence finds exactly the copied SCUs: the human Pyramid, ranked the same
    assert json.loads(printed)["all"]["system"]["kendall"] == pytest.approx(1.0)
    settings = json.loads(out.read_text())["config"]["metric_settings"]
    assert settings["evaluator"] == "pyramid" and settings["threshold"] == "0.5"
    assert len(settings["units_sha256"]) == 64
