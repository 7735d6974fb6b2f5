"""QuestEval v0.1.1 and the paper's protocol end to end on recorded model outputs: models that
answer from a table (what the official code's models would have said), so every model input
the pipeline builds is checked against the official code's format, and every score against
values worked out by hand from it. `M:` cites questeval_metric.py at the v0.1.1 tag
(ThomasScialom/QuestEval 7c82780), shared/docs/questeval.md §6."""
from __future__ import annotations

import json

import pytest

from leaderboard.evaluators.questeval.answers import RecordedAnswers
from leaderboard.evaluators.questeval.models import Generated
from leaderboard.evaluators.questeval.scoring import Models, Settings, Summary, questeval

SUMMARY = "Ada met Bob."
SOURCE = "Ada met Bob in Rome. Cal left."


class Recorded:
    """A model answering each input from a table; it keeps the inputs it was asked."""

    def __init__(self, table: dict[str, tuple[str, float, float]]):
        self.table, self.asked = table, []

    def predict(self, inputs, progress=None):
        self.asked.extend(inputs)
        return [Generated(*self.table[text]) for text in inputs]


#: QG (M:416-419 (v0.1.1)): `sv1 </s> {answer} </s> {the answer's sentence}`
QUESTIONS = {
    "sv1 </s> Ada </s> Ada met Bob.": ("Who met Bob?", 0.0, 0.9),
    "sv1 </s> Bob </s> Ada met Bob.": ("Whom did Ada meet?", 0.0, 0.9),
    "sv1 </s> Ada </s> Ada met Bob in Rome.": ("Who met Bob in Rome?", 0.0, 0.9),
    "sv1 </s> Rome </s> Ada met Bob in Rome.": ("Where did they meet?", 0.0, 0.9),
    "sv1 </s> Cal </s> Cal left.": ("Who left?", 0.0, 0.9),
}
#: QA (`{question} </s> {text}`): (answer, p("unanswerable" first piece), top)
ANSWERS = {
    f"Who met Bob? </s> {SOURCE}": ("Ada", 0.1, 0.9),             # F1 1, answerability .9
    f"Whom did Ada meet? </s> {SOURCE}": ("Bob in Rome", 0.3, 0.7),  # F1 .5, .7
    f"Who met Bob in Rome? </s> {SUMMARY}": ("Ada", 0.2, 0.8),    # F1 1, .8
    f"Where did they meet? </s> {SUMMARY}": ("unanswerable", 0.9, 0.9),  # F1 0, .1
    f"Who left? </s> {SUMMARY}": ("Bob", 0.6, 0.6),               # F1 0, .4
}
#: the v0.1.1 weighter (M:278 (v0.1.1)): `{sentence index} </s> {answer} </s> {question} </s>
#: {source}`; w = p_max when it says "true", else 1 - p_max (M:285-286 (v0.1.1))
WEIGHTS = {
    f"0 </s> Ada </s> Who met Bob in Rome? </s> {SOURCE}": ("true", 0.0, 0.8),     # w .8
    f"0 </s> Rome </s> Where did they meet? </s> {SOURCE}": ("false", 0.0, 0.75),  # w .25
    f"1 </s> Cal </s> Who left? </s> {SOURCE}": ("true", 0.0, 0.5),                # w .5
}


@pytest.fixture()
def setup(tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(record) + "\n" for record in (
        {"text": SUMMARY, "answers": ["Ada", "Bob"], "sentence_answers": [["Ada", "Bob"]]},
        {"text": SOURCE, "answers": ["Ada", "Rome", "Cal"],
         "sentence_answers": [["Ada", "Rome"], ["Cal"]]})))
    models = Models(Recorded(QUESTIONS), Recorded(ANSWERS), Recorded(WEIGHTS))
    return models, RecordedAnswers(answers)


def test_v011_builds_the_official_inputs_and_scores_as_worked_out_by_hand(setup):
    models, answers = setup
    result = questeval([Summary("x", SUMMARY, SOURCE)], models, answers,
                       Settings("v0.1.1", weighter=True), details=True)
    assert sorted(models.generator.asked) == sorted(QUESTIONS)
    assert sorted(models.answerer.asked) == sorted(ANSWERS)
    assert sorted(models.weighter.asked) == sorted(WEIGHTS)
    row = result["summaries"][0]
    # recall: the source's questions on the summary, each of F1 and answerability times its
    # weight, divided by their count (M:321-362 (v0.1.1)): (.8*1 + .25*0 + .5*0 + .8*.8 +
    # .25*.1 + .5*.4) / 6
    recall = (0.8 * 1 + 0.25 * 0 + 0.5 * 0 + 0.8 * 0.8 + 0.25 * 0.1 + 0.5 * 0.4) / 6
    # precision: the summary's questions on the source, unweighted: (1 + .5 + .9 + .7) / 4
    precision = (1 + 0.5 + 0.9 + 0.7) / 4
    assert row["recall"] == pytest.approx(recall) and row["precision"] == pytest.approx(
        precision)
    assert row["score"] == pytest.approx((recall + precision) / 2)  # M:385-387 (v0.1.1)
    assert row["questions"] == {"summary": 2, "compared": [3]}
    weights = [item["weight"] for item in row["details"][0]["recall"]]
    assert weights == pytest.approx([0.8, 0.25, 0.5])


def test_the_paper_protocol_on_the_same_outputs(setup):
    models, answers = setup
    row = questeval([Summary("x", SUMMARY, SOURCE)], models, answers,
                    Settings("paper"))["summaries"][0]
    # eq. 1: the mean F1 of the summary's questions on the source; eq. 2: the weighted
    # answerability of the source's, normalised by the weights; F = 2PR / (P + R)
    precision = (1 + 0.5) / 2
    recall = (0.8 * 0.8 + 0.25 * 0.1 + 0.5 * 0.4) / (0.8 + 0.25 + 0.5)
    assert (row["precision"], row["recall"]) == pytest.approx((precision, recall))
    assert row["score"] == pytest.approx(2 * precision * recall / (precision + recall))
    without = questeval([Summary("x", SUMMARY, SOURCE)], models, answers,
                        Settings("paper", weighter=False))["summaries"][0]
    assert without["recall"] == pytest.approx((0.8 + 0.1 + 0.4) / 3)


class ModelAnswers:
    """Answers as a spaCy pipeline gives them (its description names its settings), counted."""

    SENTENCES = {SUMMARY: [("Ada met Bob.", ["Ada", "Bob"])],
                 SOURCE: [("Ada met Bob in Rome.", ["Ada", "Rome"]), ("Cal left.", ["Cal"])]}

    def __init__(self, version: str):
        self.description = {"answers": "spacy", "pipeline": "en_core_web_sm",
                            "model": version, "limit_sentences": 5}
        self.calls = 0

    def answers(self, text):
        self.calls += 1
        return [answer for _, found in self.SENTENCES[text] for answer in found]

    def sentence_answers(self, text):
        self.calls += 1
        return self.SENTENCES[text]


def test_a_model_s_answers_are_cached_by_their_settings(setup, tmp_path):
    from trainers.models.disk_cache import DiskCache

    models, _ = setup
    summaries, settings = [Summary("x", SUMMARY, SOURCE)], Settings("v0.1.1", weighter=True)
    with DiskCache(tmp_path / "cache.sqlite") as cache:
        cold_answers = ModelAnswers("3.8.0")
        cold = questeval(summaries, models, cold_answers, settings, cache)
        warm_answers = ModelAnswers("3.8.0")
        warm = questeval(summaries, models, warm_answers, settings, cache)
        other_answers = ModelAnswers("3.7.1")  # another pipeline version: answered anew
        other = questeval(summaries, models, other_answers, settings, cache)
    assert (cold_answers.calls, cold["computed"]["answers"]) == (2, 2)
    assert warm_answers.calls == 0 and not any(warm["computed"].values())
    assert warm["summaries"] == cold["summaries"]
    assert other_answers.calls == 2 and other["computed"]["answers"] == 2


def test_texts_without_answers_score_0_and_are_counted(tmp_path):
    answers = tmp_path / "none.jsonl"
    texts = ("it rained.", "the rain fell all day.", "")
    answers.write_text("".join(json.dumps({"text": text, "answers": [], "sentence_answers": [
        [] for _ in text.split(".")[:-1]]}) + "\n" for text in texts))
    models = Models(Recorded({}), Recorded({}))
    for protocol in ("v0.2.4", "v0.1.1", "paper"):
        result = questeval([Summary("a", texts[0], texts[1]), Summary("b", texts[2], texts[1])],
                           models, RecordedAnswers(answers), Settings(protocol, ("f1",)))
        assert [row["score"] for row in result["summaries"]] == [0.0, 0.0]
        assert result["without_answers"] == {"summaries": 1, "sources": 1, "references": 0}
    assert models.generator.asked == models.answerer.asked == []
