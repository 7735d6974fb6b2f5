"""Human QAPyramid from the raw crowd judgments: published scores, agreement, loader, CLI."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from leaderboard.evaluators.qapyramid.scoring import (
    agreement_units,
    human_qapyramid,
    majority_vote,
    summary_scores,
    system_scores,
)
from tasks.plumbing.errors import DataError
from tasks.qapyramid.judgments import QAJudgment, load_qa_judgments

# Published human QAPyramid (QAPyramid paper; seeds-digest.md) by the JSON's system keys.
PUBLISHED = {"bart": 0.51, "pegasus": 0.46, "brio": 0.56, "brio-ext": 0.55, "matchsum": 0.50,
             "llama-3-8b-instruct": 0.54, "llama-3-70b-instruct": 0.53,
             "mixtral-8x7b-instruct-v0.1": 0.48, "mixtral-8x22b-instruct-v0.1": 0.48,
             "GPT4": 0.55}
# Our exact values (numpy mean over the 50 examples); they round to PUBLISHED.
EXACT = {"bart": 0.5094640604457995, "pegasus": 0.4633963378631735,
         "brio": 0.5638776445183941, "brio-ext": 0.5547984421465632,
         "matchsum": 0.5048908520147871, "mixtral-8x22b-instruct-v0.1": 0.4781913958951858,
         "llama-3-8b-instruct": 0.5448170969168193, "GPT4": 0.5484147166185651,
         "llama-3-70b-instruct": 0.5262522605373465,
         "mixtral-8x7b-instruct-v0.1": 0.4809288021498921}
ALPHA = 0.6484136295048112  # Krippendorff's alpha over the 8,693 QAs with >= 2 votes
# Per-example QAPyramid released with the QAPyramid dataset (shiyue/QAPyramid, example
# 000571afe702684d90c1d222ce70b1e1375c1016, field system_scores.*.QAPyramid).
EXAMPLE = "000571afe702684d90c1d222ce70b1e1375c1016"
EXAMPLE_SCORES = {"bart": 1.0, "pegasus": 8 / 11, "brio": 9 / 11, "brio-ext": 10 / 11,
                  "matchsum": 2 / 11, "mixtral-8x22b-instruct-v0.1": 1.0,
                  "llama-3-8b-instruct": 8 / 11, "GPT4": 10 / 11,
                  "llama-3-70b-instruct": 1.0, "mixtral-8x7b-instruct-v0.1": 1.0}


@pytest.fixture(scope="module")
def judgments(qapyramid_judgments):
    return load_qa_judgments(qapyramid_judgments)


def test_majority_vote():
    assert majority_vote([1, 1, 0]) == 1 and majority_vote([0, 0, 1]) == 0
    assert majority_vote([1]) == 1 and majority_vote([0]) == 0
    assert majority_vote([1, 0]) == 0 and majority_vote([1, 1, 0, 0]) == 0  # ties: absent
    assert majority_vote([1, 1, 1, 0]) == 1
    assert majority_vote([1, 0], ties_present=True) == 1
    assert majority_vote([1, 1, 0, 0], ties_present=True) == 1
    assert majority_vote([1, 0, 0], ties_present=True) == 0


def test_the_tie_rule_moves_gpt4_from_0548_to_0555(judgments):
    """The release has no code for ties (38 of the 8,910 QAs have 2 or 4 votes and can tie):
    counted absent, GPT4 scores 0.548 (the published figure); counted present, 0.555."""
    absent = system_scores(summary_scores(judgments))["GPT4"]
    present = system_scores(summary_scores(judgments, ties_present=True))["GPT4"]
    assert (round(absent, 3), round(present, 3)) == (0.548, 0.555)


def test_loader_counts(judgments):
    assert len(judgments) == 8910
    assert set(judgments.systems) == set(PUBLISHED)
    assert all(len(judgments.examples(s)) == 50 for s in judgments.systems)
    first = judgments.items[0]
    assert first.question.endswith("?") and first.answer and first.qa.startswith(first.question)
    votes = [len(item.votes) for item in judgments]
    assert (votes.count(1), votes.count(2), votes.count(3), votes.count(4)) == (217, 28, 8655,
                                                                                10)


def test_system_scores_match_published(judgments):
    scores = system_scores(summary_scores(judgments))
    assert {s: round(v, 2) for s, v in scores.items()} == PUBLISHED
    assert scores == {s: pytest.approx(v, abs=1e-12) for s, v in EXACT.items()}


def test_per_example_scores_match_released_values(judgments):
    per_summary = summary_scores(judgments)
    assert {s: per_summary[s][EXAMPLE] for s in PUBLISHED} == {
        s: pytest.approx(v, abs=1e-15) for s, v in EXAMPLE_SCORES.items()}


def test_agreement(judgments):
    report = human_qapyramid(judgments)
    assert report["n_units"] == len(agreement_units(judgments)) == 8910 - 217
    assert report["krippendorff_alpha"] == pytest.approx(ALPHA, abs=1e-12)
    assert report["n_qa_items"] == 8910 and report["votes_per_item"]["4"] == 10


def test_scores_by_hand():
    items = [QAJudgment("s", "e1", "p1", "Who? A", (("a", 1), ("b", 1), ("c", 0))),
             QAJudgment("s", "e1", "p2", "What? B", (("a", 1), ("b", 0))),
             QAJudgment("s", "e2", "p1", "Who? C", (("a", 1),)),
             QAJudgment("t", "e1", "p1", "Who? A", (("a", 0), ("b", 0), ("c", 0)))]
    per_summary = summary_scores(items)
    assert per_summary == {"s": {"e1": 0.5, "e2": 1.0}, "t": {"e1": 0.0}}
    assert system_scores(per_summary) == {"s": 0.75, "t": 0.0}
    assert agreement_units(items) == [(1, 1, 0), (1, 0), (0, 0, 0)]


@pytest.mark.parametrize("text,message,field", [
    ('{"s": {"e": {"p": {"Who? A": [["a", 2]]}}}}', "expected [annotator_id, 0|1]",
     '["s"]["e"]["p"]["Who? A"][0]'),
    ('{"s": {"e": {"p": {"Who? A": [["a", 1], ["a", 0]]}}}}', "votes twice",
     '["s"]["e"]["p"]["Who? A"][1]'),
    ('{"s": {"e": {"p": {"Who? A": []}}}}', "non-empty list", '["s"]["e"]["p"]["Who? A"]'),
    ('{"s": {"e": []}}', "expected a JSON object of predicates", '["s"]["e"]'),
    ('{"s": {}}', "no examples", '["s"]'),
    ('{"s": {"e": {"p": {"Who? A": [["a", true]]}}}}', "expected [annotator_id, 0|1]",
     '["s"]["e"]["p"]["Who? A"][0]'),
])
def test_loader_errors_name_the_field(tmp_path, text, message, field):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load_qa_judgments(path)
    assert message in str(info.value) and info.value.field == field
    assert info.value.path == str(path)


def test_loader_malformed_json_names_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n "s": {\n  "e": [\n}')
    with pytest.raises(DataError) as info:
        load_qa_judgments(path)
    assert info.value.line == 4 and "malformed JSON" in str(info.value)
    with pytest.raises(DataError, match="not found"):
        load_qa_judgments(tmp_path / "missing.json")


def test_cli_human(qapyramid_judgments, capsys, tmp_path):
    out = tmp_path / "human.json"
    assert main(["qapyramid", "human", "--judgments", str(qapyramid_judgments),
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["systems"] == {s: pytest.approx(v, abs=1e-12) for s, v in EXACT.items()}
    assert printed["krippendorff_alpha"] == pytest.approx(ALPHA, abs=1e-12)
    assert printed["n_units"] == 8693 and printed["n_qa_items"] == 8910
    assert "per_example" not in printed
    written = json.loads(out.read_text())
    assert written["per_example"]["brio"][EXAMPLE] == pytest.approx(9 / 11)
    assert "provenance" in written


@pytest.mark.slow
def test_systems_scored_on_different_examples_are_warned_about(qapyramid_judgments, capsys,
                                                                tmp_path):
    from leaderboard.evaluators.qapyramid.scoring import uneven_coverage

    assert uneven_coverage({"s": {"e1": 1, "e2": 0}, "t": {"e2": 1, "e1": 0}}) is None
    assert uneven_coverage({"s": {"e1": 1, "e2": 0}, "t": {"e2": 1}, "u": {"e3": 1}}) == (
        "the systems are not scored on the same examples: 3 of 3 lack some of the 3 examples "
        "(first: 's' lacks 1, e.g. 'e3'); their means average different summaries")
    assert main(["qapyramid", "human", "--judgments", str(qapyramid_judgments)]) == 0
    assert "warning" not in capsys.readouterr().err  # the release: 10 systems x 50 examples
    data = json.loads(qapyramid_judgments.read_text())
    del data["bart"][EXAMPLE]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(data))
    assert main(["qapyramid", "human", "--judgments", str(path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["n_examples"]["bart"] == 49
    assert captured.err == (f"warning: {path}: the systems are not scored on the same "
                            f"examples: 1 of 10 lack some of the 50 examples (first: 'bart' "
                            f"lacks 1, e.g. {EXAMPLE!r}); their means average different "
                            f"summaries\n")


def test_cli_human_bad_file(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text("[]")
    assert main(["qapyramid", "human", "--judgments", str(path)]) == 2
    assert "expected a JSON object of systems" in capsys.readouterr().err
