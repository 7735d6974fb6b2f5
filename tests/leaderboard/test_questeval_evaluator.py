"""QuestEval as a named evaluator: its options by name, the evaluator interface's sources,
`meta-eval --metric questeval`, and the summaries track's reference-free column on a board
whose worker finds the models under its model root (tiny real T5 models, recorded answers)."""
from __future__ import annotations

import json

import pytest

from leaderboard.evaluators.questeval.evaluator import QuestEvalEvaluator, parse_options
from leaderboard.tracks.summaries import SummariesEvaluator
from tasks.metrics.evaluators import configured, score_summaries
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

from helpers import sumbench
from lb_helpers import write_pyramid_folder
from qe_helpers import build_questeval_models, write_answers


@pytest.mark.parametrize("options, message", [
    ({"protocl": "paper"}, "unknown QuestEval option 'protocl' .known: protocol, "
                           "question_scores.*did you mean 'protocol'"),
    ({"weighter": "maybe"}, "weighter='maybe': expected true or false"),
    ({"window_stride": "0"}, "window_stride='0': expected a positive integer"),
    ({"protocol": "v2"}, "choices: v0.2.4, v0.1.1, paper"),
    ({"question_scores": "exact"}, "one or more of answerability, f1, bertscore"),
])
def test_a_bad_option_is_one_line_naming_it(options, message):
    with pytest.raises(SumbenchError, match=message):
        parse_options(options)


def test_options_parse_from_text_and_a_column_names_questeval_as_an_evaluator():
    values = parse_options({"question_scores": "answerability+f1", "weighter": "TRUE",
                            "references": "false", "batch_size": "4"})
    assert values["question_scores"] == ("answerability", "f1") and values["weighter"] is True
    assert values["batch_size"] == 4 and values["protocol"] == "v0.2.4"
    evaluator = QuestEvalEvaluator({"protocol": "paper"})
    assert evaluator.settings["protocol"] == "paper" and evaluator.settings["weighter"] is True
    assert evaluator.with_options({"weighter": "false"}).settings["weighter"] is False
    for text in ("qe=source:questeval,protocol=paper", "qe=evaluator:questeval,protocol=paper"):
        column = SummariesEvaluator.parse(text).check()
        assert column.options == (("protocol", "paper"),) and column.of_evaluator
    for text, message in (("qe=scus:questeval", "QuestEval is an evaluator, not a presence"),
                          ("qe=source:nli", "unknown evaluator 'nli'.*known: .*questeval"),
                          ("qe=evaluator:questeval,protocl=paper", "unknown QuestEval option")):
        with pytest.raises(SumbenchError, match=message):
            SummariesEvaluator.parse(text).check()


class _Overlap:
    """A toy evaluator that reads the sources: the share of a summary's words in its source."""
    needs_sources = True
    settings = {"evaluator": "overlap"}

    def __call__(self, summaries, references, sources):
        return [len(set(s.split()) & set(d.split())) / len(set(s.split()))
                for s, d in zip(summaries, sources)]


def test_an_evaluator_that_reads_sources_gets_them_or_an_error_naming_it():
    assert score_summaries(_Overlap(), ["a b", "c d"], ["r", "r"], ["a x", "c d"]) == [0.5, 1.0]
    with pytest.raises(SumbenchError, match="evaluator 'overlap' reads each summary's source"):
        score_summaries(_Overlap(), ["a b"], ["r"], None, "overlap")
    assert score_summaries(lambda s, r: [1] * len(s), ["a"], ["r"], None) == [1.0]
    with pytest.raises(SumbenchError, match="evaluator 'rouge1_recall' takes no options"):
        configured("rouge1_recall", {"x": "1"})


# ---- on a Pyramid folder ------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("qe-named")
    pyramid = write_pyramid_folder(root / "tinyset", n_examples=4)
    data = load_pyramid_dataset(pyramid, unit_kinds=(), labels=False)
    texts = sorted({*data.documents, *data.references,
                    *(text for system in data.systems for text in data.summaries[system])})
    folders = build_questeval_models(root / "models", texts)
    answers = write_answers(root / "answers.jsonl", texts)
    return {"root": root, "pyramid": pyramid, "data": data, "folders": folders,
            "answers": answers,
            "options": {"question_generator": str(folders["generator"]),
                        "question_answerer": str(folders["answerer"]),
                        "answers": str(answers), "question_scores": "answerability+f1",
                        "device": "cpu"}}


@pytest.mark.slow
def test_meta_eval_by_name_equals_the_questeval_command_s_score_file(lab, tmp_path, capsys):
    options = [item for key, value in lab["options"].items()
               for item in ("--metric-option", f"{key}={value}")]
    out = tmp_path / "meta.json"
    # `questeval --pyramid` compares each summary with its document and its reference
    code, by_name, err = sumbench(capsys, "meta-eval", "--pyramid", str(lab["pyramid"]),
                                  "--metric", "questeval", *options, "--metric-option",
                                  "references=true", "--out", str(out))
    assert code == 0, err
    scores = tmp_path / "scores.json"
    code, _, err = sumbench(capsys, "questeval", "--pyramid", str(lab["pyramid"]),
                            "--question-generator", str(lab["folders"]["generator"]),
                            "--question-answerer", str(lab["folders"]["answerer"]),
                            "--answers", str(lab["answers"]), "--question-scores",
                            "answerability,f1", "--device", "cpu", "--scores-out",
                            str(scores))
    assert code == 0, err
    code, by_file, err = sumbench(capsys, "meta-eval", "--pyramid", str(lab["pyramid"]),
                                  "--metric", str(scores))
    assert code == 0, err
    # the same scores (system by system here, all at once there: batches differ, 1e-7), so
    # the same ranks; Pearson on nearly constant tiny-model scores moves in the 5th digit
    means = json.loads(out.read_text())["system_means"]["metric"]
    from_file = {system: sum(values.values()) / len(values)
                 for system, values in json.loads(scores.read_text()).items()}
    assert means == pytest.approx(from_file, abs=1e-6)
    named, filed = _flat(json.loads(by_name)), _flat(json.loads(by_file))
    assert {key: value for key, value in named.items() if key[2] != "pearson"} == \
        {key: value for key, value in filed.items() if key[2] != "pearson"}
    assert named == pytest.approx(filed, abs=1e-3)
    settings = json.loads(out.read_text())["config"]["metric_settings"]
    assert settings["evaluator"] == "questeval" and settings["protocol"] == "v0.2.4"
    assert settings["question_scores"] == ["answerability", "f1"]
    assert settings["revisions"]["generator"].startswith("files:")
    assert settings["answers_source"]["answers"] == "recorded"
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", str(lab["pyramid"]), "--metric",
                            "questeval", "--metric-option", "protocl=paper")
    assert code == 2 and "unknown QuestEval option 'protocl'" in err


def _flat(correlations: dict) -> dict:
    return {(group, level, method): value for group, levels in correlations.items()
            for level in ("system", "summary") for method, value in levels[level].items()}


def test_a_column_s_models_are_folders_under_the_model_root_or_hub_ids(lab):
    from leaderboard.service.settings import column_models

    root = lab["folders"]["generator"].parent
    column = SummariesEvaluator("qe", "source", "questeval", {
        "question_generator": "generator", "question_answerer": "org/qa-model"})
    resolved = dict(column_models(column, str(root)).options)
    assert resolved["question_generator"] == str(lab["folders"]["generator"].resolve())
    assert resolved["question_answerer"] == "org/qa-model"
    for name in ("../generator", "/etc", "no such/folder/here"):
        bad = SummariesEvaluator("qe", "source", "questeval", {"question_generator": name})
        with pytest.raises(DataError):
            column_models(bad, str(root))


@pytest.mark.slow
def test_the_summaries_track_s_reference_free_column_on_a_board(lab, tmp_path):
    from sqlalchemy import select

    from leaderboard.intake.validate import Upload
    from leaderboard.service.auth import authenticate, create_token
    from leaderboard.service.db import Database, Score, Submission
    from leaderboard.service.evaluation import EvaluateOptions
    from leaderboard.service.init import initialise
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    column = ("questeval-source=source:questeval,question_generator=generator,"
              "question_answerer=answerer," + ",".join(
                  f"{key}={lab['options'][key]}" for key in ("answers", "question_scores",
                                                             "device")))
    url = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    initialise(url, pyramids=[str(lab["pyramid"])], evaluators=[
        "pyramid-scus-lexical=scus:lexical", column], settings={"n_resamples": "20"},
        computed_rows=True, score=False)
    database = Database(url)
    data = lab["data"]
    lines = "".join(json.dumps({"dataset": "tinyset", "id": example_id, "summary": summary})
                    + "\n" for example_id, summary in zip(data.ids, data.summaries["beta"]))
    user = authenticate(database, create_token(database, "erin"))
    entry = accept(database, load_settings(database), user, track_name="summaries",
                   board="tinyset", model="beta again", card={},
                   uploads=[Upload("summaries.jsonl", lines.encode())])
    Worker(database, evaluate=EvaluateOptions(
        model_root=str(lab["folders"]["generator"].parent))).drain()
    with database.session() as session:
        statuses = {row.model: row.status for row in session.scalars(
            select(Submission).where(Submission.track == "summaries"))}
        stored = json.loads(session.scalars(select(Score).where(
            Score.submission_id == entry["id"], Score.current.is_(True))).one().results)
    assert set(statuses.values()) == {"scored"} and len(statuses) == 4  # 3 reference rows
    result = stored["tinyset"]
    expected = QuestEvalEvaluator(lab["options"]).score(
        list(data.summaries["beta"]), [[text] for text in data.references],
        list(data.documents))
    assert result["questeval-source"] == pytest.approx(sum(expected) / len(expected), abs=1e-9)
    assert 0 < result["questeval-source"] < 1 and result["headline_evaluator"] == \
        "pyramid-scus-lexical"
    cost = result["cost"]["questeval-source"]
    assert cost["seconds"] >= 0 and set(cost["model_calls"]) == {
        "answers", "generator", "answerer", "weighter", "bertscore"}
    assert cost["revisions"]["generator"].startswith("files:")
    database.dispose()


def test_two_columns_with_different_models_load_each_set_once(monkeypatch):
    from leaderboard.evaluators.questeval import evaluator as module
    from tasks.plumbing.kept import forget_models

    forget_models("questeval models")
    loads = []
    monkeypatch.setattr(module, "load_models",
                        lambda names, settings: loads.append(names.question_generator) or
                        names.question_generator)
    settings = module.settings_of(parse_options({}))
    first, second = (module.ModelNames.of(parse_options({"question_generator": name}))
                     for name in ("qg-one", "qg-two"))
    for _ in range(3):  # two board columns scoring submission after submission
        assert module.shared_models(first, settings) == "qg-one"
        assert module.shared_models(second, settings) == "qg-two"
    assert loads == ["qg-one", "qg-two"]
    forget_models("questeval models")
