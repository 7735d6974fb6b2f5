"""QuestEval: each protocol's arithmetic on recorded questions and answers against values
worked out by hand from the code (shared/docs/questeval.md §6, §9); the pipeline on tiny real
T5 models (the same scores at batch 1 and 32, from a cold and a warm cache, recomputed when
an answer changes); the command line and its bad input."""
from __future__ import annotations

import json

import pytest

from leaderboard.evaluators.questeval.answers import RecordedAnswers, sentences
from leaderboard.evaluators.questeval.bertscore import NO_BERT_SCORE, default_layer, load_bertscore
from leaderboard.evaluators.questeval.models import T2TModel, first_piece
from leaderboard.evaluators.questeval.scoring import Models, Settings, Summary, questeval
from tasks.metrics.questeval import (
    Asked,
    Compared,
    check_score_types,
    protocol_score,
    split_on_punct,
    squad_f1,
)
from tasks.plumbing.errors import DataError, SumbenchError
from trainers.models.disk_cache import DiskCache

from helpers import sumbench
from qe_helpers import build_questeval_models, write_answers


# ---- arithmetic --------------------------------------------------------------------------
@pytest.mark.parametrize("gold, prediction, f1", [
    ("the cat", "a cat", 1.0), ("Paris", "Paris, France", 2 / 3), ("", "", 1.0),
    ("Paris", "", 0.0), ("Paris", "Rome", 0.0), ("an Apple pie!", "APPLE", 2 / 3),
])
def test_squad_f1_with_squad_normalisation(gold, prediction, f1):
    assert squad_f1(gold, prediction) == pytest.approx(f1)
    assert squad_f1(prediction, gold) == pytest.approx(f1)  # called either way round (M:502)


def test_the_official_splitter_cuts_after_end_marks_at_the_next_word():
    import spacy

    nlp = spacy.blank("en")
    text = "Hi there. It rains !! Really? Dr. Smith said so... ok"
    # "Dr." is one token, "..." is not a "." token: neither ends a sentence
    assert sentences(nlp, text) == ["Hi there.", "It rains !!", "Really?",
                                    "Dr. Smith said so... ok"]
    assert split_on_punct([], "") == []


def _asked(p: float, f1: float, weight: float = 1.0) -> Asked:
    return Asked("q", "gold", "answer", p, {"f1": f1}, weight)


SOURCE = Compared("source", False, recall=[_asked(0.9, 1.0, 0.5), _asked(0.2, 0.0, 1.0)],
                  precision=[_asked(0.6, 0.5)])
REFERENCE = Compared("reference", False, recall=[_asked(1.0, 1.0)],
                     precision=[_asked(0.0, 0.0)])
KINDS = ("answerability", "f1")


@pytest.mark.parametrize("protocol, compared, weighter, expected", [
    # v0.2.4: R = (0.9 + 0.2 + 1 + 0) / 4, P = (0.6 + 0.5) / 2, F = (P + R) / 2
    ("v0.2.4", [SOURCE], False, (0.5375, 0.55, 0.525)),
    # the weighter multiplies the source's recall scores, still divided by 4
    ("v0.2.4", [SOURCE], True, ((0.55 + 0.2875) / 2, 0.55, 0.2875)),
    # the max over compared texts: the reference pair gives (1 + 0) / 2 = 0.5 < 0.5375
    ("v0.2.4", [REFERENCE, SOURCE], False, (0.5375, 0.55, 0.525)),
    # v0.1.1: R and P are means over the compared texts, F = (P + R) / 2
    ("v0.1.1", [SOURCE, REFERENCE], False, ((0.275 + 0.7625) / 2, 0.275, 0.7625)),
    # paper: P = mean F1 = 0.5, R = (0.5*0.9 + 1*0.2) / 1.5, F = 2PR / (P + R)
    ("paper", [SOURCE], True, (2 * 0.5 * (0.65 / 1.5) / (0.5 + 0.65 / 1.5), 0.5, 0.65 / 1.5)),
    ("paper", [SOURCE], False, (2 * 0.5 * 0.55 / 1.05, 0.5, 0.55)),
])
def test_each_protocol_s_arithmetic_on_recorded_answers(protocol, compared, weighter,
                                                        expected):
    score = protocol_score(protocol, False, compared, KINDS, weighter)
    assert (score.score, score.precision, score.recall) == pytest.approx(expected)


def test_empty_texts_no_questions_and_clipped_scores():
    assert protocol_score("v0.2.4", True, [SOURCE], KINDS, False).score == 0.0
    empty = Compared("source", True, [], [])
    assert protocol_score("v0.2.4", False, [empty], KINDS, False).score == 0.0
    none = Compared("source", False, [], [])  # a text with no answers: 0, not an error
    for protocol in ("v0.2.4", "v0.1.1", "paper"):
        assert protocol_score(protocol, False, [none], KINDS, False).score == 0.0
    over = Compared("source", False, [_asked(1.0000004, 1.0)], [_asked(1.0000004, 1.0)])
    assert protocol_score("v0.2.4", False, [over], KINDS, False).score == 1.0


@pytest.mark.parametrize("names, message", [
    (["exact"], "one or more of answerability, f1, bertscore"), ([], "got none"),
    (["f1", "f1"], "each once"),
])
def test_unknown_score_names_list_the_choices(names, message):
    with pytest.raises(SumbenchError, match=message):
        check_score_types(names)
    with pytest.raises(SumbenchError, match="choices: v0.2.4, v0.1.1, paper"):
        Settings("v2")


# ---- the pipeline on tiny models -----------------------------------------------------------
TEXTS = {
    "summary one": "Ada Lovelace wrote the first program. She worked with Babbage.",
    "summary two": "The bridge in Ohio closed in 1877.",
    "source one": "Ada Lovelace wrote the first program for the Analytical Engine. Charles "
                  "Babbage designed the engine. She worked with Babbage in London.",
    "source two": "The council closed the bridge in Ohio in 1877. It had stood for years.",
    "reference one": "Lovelace wrote a program for Babbage's engine.",
    "reference two": "An Ohio bridge closed in 1877.",
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("questeval")
    folders = build_questeval_models(root, TEXTS.values())
    answers = write_answers(root / "answers.jsonl", TEXTS.values())
    return {"root": root, "folders": folders, "answers": answers}


def _summaries() -> list[Summary]:
    return [Summary("a", TEXTS["summary one"], TEXTS["source one"], (TEXTS["reference one"],),
                    "sys1"),
            Summary("b", TEXTS["summary two"], TEXTS["source two"], (TEXTS["reference two"],),
                    "sys1"),
            Summary("c", "", TEXTS["source two"], (TEXTS["reference two"],), "sys2")]


def _models(lab, batch_size: int, bertscore=None) -> Models:
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    def load(role, word):
        folder = lab["folders"][role]
        return T2TModel(T5ForConditionalGeneration.from_pretrained(folder),
                        AutoTokenizer.from_pretrained(folder), role=role, word=word,
                        batch_size=batch_size)
    scorer = load_bertscore(str(bertscore), 2, batch_size=batch_size, device="cpu")[0] \
        if bertscore else None
    return Models(load("generator", None), load("answerer", "unanswerable"),
                  load("weighter", "true"), scorer, {"generator": "g1", "answerer": "a1",
                                                     "weighter": "w1", "bertscore": "b1"})


NOTHING_COMPUTED = {"answers": 0, "generator": 0, "answerer": 0, "weighter": 0,
                    "bertscore": 0}


def _scores(result: dict) -> list[float]:
    return [row[key] for row in result["summaries"] for key in ("score", "precision",
                                                                 "recall")]


@pytest.mark.parametrize("protocol", ["v0.2.4", "v0.1.1", "paper"])
@pytest.mark.slow
def test_the_same_scores_at_batch_1_and_32(lab, protocol):
    answers = RecordedAnswers(lab["answers"])
    settings = Settings(protocol, ("answerability", "f1"), protocol == "paper")
    one = questeval(_summaries(), _models(lab, 1), answers, settings)
    many = questeval(_summaries(), _models(lab, 32), answers, settings)
    assert _scores(one) == pytest.approx(_scores(many), abs=1e-6)
    assert one["summaries"][2]["score"] == 0.0  # an empty summary scores 0
    assert one["summaries"][0]["questions"]["summary"] == 4  # Ada Lovelace, She, Babbage
    assert 0 <= one["corpus_score"] <= 1


@pytest.mark.slow
def test_a_warm_cache_gives_the_same_scores_and_an_answer_change_is_recomputed(lab, tmp_path):
    settings = Settings("v0.2.4", ("answerability", "f1"), True)
    answers = RecordedAnswers(lab["answers"])
    with DiskCache(tmp_path / "cache.sqlite") as cache:
        cold = questeval(_summaries(), _models(lab, 8), answers, settings, cache)
        warm = questeval(_summaries(), _models(lab, 8), answers, settings, cache)
        assert _scores(warm) == _scores(cold)
        assert all(cold["computed"][role] for role in ("generator", "answerer", "weighter"))
        assert warm["computed"] == NOTHING_COMPUTED
        changed = tmp_path / "changed.jsonl"
        write_answers(changed, TEXTS.values(), drop="Babbage")
        again = questeval(_summaries(), _models(lab, 8), RecordedAnswers(changed), settings,
                          cache)
    # the answers are read again, never kept by text alone (the official cache's stale
    # answers, shared/docs/questeval.md §7): Babbage's questions are gone, the others cached
    assert again["summaries"][0]["questions"]["summary"] == 3 and _scores(again) != _scores(cold)
    assert again["computed"] == NOTHING_COMPUTED


@pytest.mark.slow
def test_details_hold_every_question_and_its_scores(lab):
    result = questeval(_summaries()[:1], _models(lab, 8), RecordedAnswers(lab["answers"]),
                       Settings("v0.2.4", ("answerability", "f1")), details=True)
    row = result["summaries"][0]
    source, reference = row["details"]
    assert [item["answer"] for item in source["precision"]] == ["Ada", "Lovelace", "She",
                                                                "Babbage"]
    assert len(source["recall"]) == row["questions"]["compared"][0]
    assert set(source["recall"][0]) == {"answer", "question", "qa_answer", "answerability",
                                        "f1", "weight"}


# ---- BERTScore -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bert_folder(lab):
    from trainers.models.tiny import build_tiny_bert_encoder

    folder = lab["root"] / "bert"
    build_tiny_bert_encoder([*TEXTS.values(), "unanswerable"] * 5, folder)
    return folder


def test_bertscore_is_bert_score_s_f1_and_0_for_an_empty_side(bert_folder):
    from bert_score import BERTScorer

    scorer, revision = load_bertscore(str(bert_folder), 2, device="cpu")
    pairs = [("Ada Lovelace", "Lovelace"), ("Ohio", "Ohio"), ("", "Ohio"), ("  ", "Ohio"),
             ("Ohio", ""), ("\x07", "Ohio"), ("unanswerable", "1877")]
    got = scorer.predict(pairs)
    direct = BERTScorer(model_type=str(bert_folder), num_layers=2).score(
        [pairs[0][0], pairs[6][0]], [pairs[0][1], pairs[6][1]])[2].tolist()
    # identical texts match token for token; bert-score itself gives 0 to a side without
    # word pieces ("\x07" is cleaned away), the rule a side empty once stripped gets here
    assert got == pytest.approx([direct[0], 1.0, 0.0, 0.0, 0.0, 0.0, direct[1]], abs=1e-6)
    assert 0 < got[0] < 1 and revision.startswith("files:") and revision.endswith("@layer2")
    assert default_layer("bert-base-multilingual-cased") == 9  # the official model's layer
    with pytest.raises(SumbenchError, match="no default layer .* give --bertscore-layer N"):
        load_bertscore(str(bert_folder))


def test_without_bert_score_the_bertscore_score_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "bert_score", None)
    with pytest.raises(SumbenchError, match="pip install 'sumbench.questeval.'") as caught:
        load_bertscore("bert-base-multilingual-cased")
    assert str(caught.value) == NO_BERT_SCORE


def _by_hand_v024(row: dict) -> float:
    """v0.2.4's score from a row's details: per pair the mean of its two directions, each
    the mean of every clipped score (answerability, BERTScore, F1) of every question, the
    source's recall side times the weights; the max over pairs (M:625-676)."""
    def direction(items, weighted):
        values = [min(max(item[kind], 0.0), 1.0) * (item["weight"] if weighted else 1.0)
                  for kind in ("answerability", "bertscore", "f1") for item in items]
        return sum(values) / len(values) if values else 0.0
    return max((direction(pair["recall"], pair["role"] == "source")
                + direction(pair["precision"], False)) / 2 for pair in row["details"])


@pytest.mark.slow
def test_bertscore_enters_v024_at_any_batch_and_from_a_warm_cache(lab, bert_folder, tmp_path):
    settings = Settings("v0.2.4", weighter=True)  # the default scores: bertscore included
    answers = RecordedAnswers(lab["answers"])
    one = questeval(_summaries(), _models(lab, 1, bert_folder), answers, settings,
                    details=True)
    with DiskCache(tmp_path / "cache.sqlite") as cache:
        cold = questeval(_summaries(), _models(lab, 32, bert_folder), answers, settings, cache,
                         details=True)
        warm = questeval(_summaries(), _models(lab, 32, bert_folder), answers, settings, cache)
    assert _scores(one) == pytest.approx(_scores(cold), abs=1e-6)
    assert _scores(warm) == _scores(cold) and warm["computed"] == NOTHING_COMPUTED
    assert cold["computed"]["bertscore"] > 0
    scorer = load_bertscore(str(bert_folder), 2, device="cpu")[0]
    for row in one["summaries"][:2]:
        items = [item for pair in row["details"] for side in ("recall", "precision")
                 for item in pair[side]]
        assert [item["bertscore"] for item in items] == pytest.approx(
            scorer.predict([(item["qa_answer"], item["answer"]) for item in items]), abs=1e-6)
        assert row["score"] == pytest.approx(_by_hand_v024(row), abs=1e-9)
    plain = questeval(_summaries(), _models(lab, 8), answers,
                      Settings("v0.2.4", ("answerability", "f1"), True))
    assert _scores(plain)[:6] != pytest.approx(_scores(one)[:6], abs=1e-3)


def test_a_tokenizer_without_the_word_is_refused_naming_it():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    word_level = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(
        {"[UNK]": 0, "yes": 1}, unk_token="[UNK]")), unk_token="[UNK]")
    with pytest.raises(SumbenchError, match="the question answerer's tokenizer has no piece "
                                            "for 'unanswerable'"):
        first_piece(word_level, "unanswerable", "question answerer")


@pytest.mark.slow
def test_bad_summaries_and_answers_name_their_line(lab, tmp_path):
    with pytest.raises(SumbenchError, match="summary 1 .'x'. has neither a source nor"):
        questeval([Summary("x", "text")], _models(lab, 8), RecordedAnswers(lab["answers"]),
                  Settings("v0.2.4", ("f1",)))
    bad = tmp_path / "answers.jsonl"
    bad.write_text('{"text": "a", "answers": ["x"]}\n{"text": "b", "answers": [1]}\n')
    with pytest.raises(DataError, match=r"answers\.jsonl:2, field 'answers'") as caught:
        RecordedAnswers(bad)
    assert caught.value.field == "answers"
    with pytest.raises(DataError, match="no recorded answers per sentence"):
        questeval(_summaries()[:1], _models(lab, 8), RecordedAnswers(_only_answers(tmp_path)),
                  Settings("v0.1.1", ("f1",)))


def _only_answers(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text("".join(json.dumps({"text": text, "answers": ["Ohio"]}) + "\n"
                            for text in TEXTS.values()))
    return path


# ---- the command line ---------------------------------------------------------------------
def _args(lab, *extra, answers=None, scores=("--question-scores", "answerability,f1")):
    return ["questeval", "--answers", str(answers or lab["answers"]), "--question-generator",
            str(lab["folders"]["generator"]), "--question-answerer",
            str(lab["folders"]["answerer"]), *scores, "--device", "cpu", *extra]


def _summaries_file(tmp_path):
    summaries = tmp_path / "summaries.jsonl"
    summaries.write_text("".join(json.dumps({
        "id": s.id, "summary": s.summary, "source": s.source, "references": list(s.references),
        "system": s.system}) + "\n" for s in _summaries()))
    return summaries


@pytest.mark.slow
def test_the_command_scores_a_summaries_file_and_writes_its_provenance(lab, tmp_path, capsys):
    summaries = _summaries_file(tmp_path)
    out = tmp_path / "questeval.json"
    code, printed, err = sumbench(capsys, *_args(lab, "--summaries", str(summaries), "--out",
                                                 str(out), "--cache",
                                                 str(tmp_path / "c.sqlite")))
    assert code == 0, err
    document = json.loads(out.read_text())
    expected = questeval(_summaries(), _models(lab, 48), RecordedAnswers(lab["answers"]),
                         Settings("v0.2.4", ("answerability", "f1")))
    assert [row["score"] for row in document["summaries"]] == pytest.approx(
        [row["score"] for row in expected["summaries"]], abs=1e-6)
    assert set(document["systems"]) == {"sys1", "sys2"} and document["systems"]["sys2"] == 0
    assert document["config"]["protocol"] == "v0.2.4" and document["config"]["answers"][
        "answers"] == "recorded"
    assert document["config"]["revisions"]["generator"].startswith("files:")
    assert {"git", "packages"} <= set(document["provenance"])
    assert json.loads(printed)["corpus_score"] == pytest.approx(document["corpus_score"])


@pytest.mark.slow
def test_the_command_s_default_scores_read_bertscore_from_the_model_it_names(
        lab, bert_folder, tmp_path, capsys):
    out = tmp_path / "questeval.json"
    code, _, err = sumbench(capsys, *_args(lab, "--summaries", str(_summaries_file(tmp_path)),
                                           "--bertscore-model", str(bert_folder),
                                           "--bertscore-layer", "2", "--out", str(out),
                                           scores=()))
    assert code == 0, err
    document = json.loads(out.read_text())
    expected = questeval(_summaries(), _models(lab, 48, bert_folder),
                         RecordedAnswers(lab["answers"]), Settings("v0.2.4"))
    assert [row["score"] for row in document["summaries"]] == pytest.approx(
        [row["score"] for row in expected["summaries"]], abs=1e-6)
    config = document["config"]
    assert config["question_scores"] == ["answerability", "bertscore", "f1"]
    assert config["models"]["bertscore"] == str(bert_folder)
    assert config["revisions"]["bertscore"].endswith("@layer2")
    code, _, err = sumbench(capsys, *_args(lab, "--summaries", str(_summaries_file(tmp_path)),
                                           "--bertscore-model", str(bert_folder), scores=()))
    assert code == 2 and "give --bertscore-layer N" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("line, message", [
    ({"id": "x", "summary": "s"}, "bad.jsonl:1, field 'source': a summary needs a source or "
                                  "references"),
    ({"id": 3, "summary": "s", "source": "d"}, "field 'id': expected a string"),
    ({"id": "x", "summary": "s", "references": "r"}, "field 'references': expected a list"),
])
@pytest.mark.slow
def test_a_bad_summaries_file_is_one_line_naming_line_and_field(lab, tmp_path, capsys, line,
                                                                message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n")
    code, _, err = sumbench(capsys, *_args(lab, "--summaries", str(path)))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_command_scores_every_system_of_a_pyramid_folder(lab, tmp_path, capsys):
    from tasks.qapyramid.pyramid_data import load_pyramid_dataset

    from lb_helpers import write_pyramid_folder

    root = write_pyramid_folder(tmp_path / "pyramid", n_examples=3)
    data = load_pyramid_dataset(root, unit_kinds=(), labels=False)
    texts = {*data.documents, *data.references,
             *(text for system in data.systems for text in data.summaries[system])}
    answers = tmp_path / "pyramid-answers.jsonl"
    write_answers(answers, sorted(texts))
    code, printed, err = sumbench(capsys, *_args(lab, "--pyramid", str(root), answers=answers))
    assert code == 0, err
    report = json.loads(printed)
    assert report["n_summaries"] == 3 * len(data.systems)
    assert set(report["systems"]) == set(data.systems)
    scores = tmp_path / "questeval-scores.json"
    code, _, err = sumbench(capsys, *_args(lab, "--pyramid", str(root), "--scores-out",
                                           str(scores), "--cache", str(tmp_path / "c.sqlite"),
                                           answers=answers))
    assert code == 0, err
    assert {system: sorted(values) for system, values in json.loads(scores.read_text())
            .items()} == {system: list(data.ids) for system in data.systems}
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", str(root), "--metric",
                                  str(scores))  # correlated with the human Pyramid
    assert code == 0, err
    assert "kendall" in printed.lower()


# ---- long sources in windows (an extension) ----------------------------------------------
def test_a_long_source_is_cut_into_overlapping_windows_that_cover_it(lab):
    from transformers import AutoTokenizer

    from leaderboard.evaluators.questeval.scoring import source_windows

    tokenizer = AutoTokenizer.from_pretrained(lab["folders"]["answerer"])
    short = TEXTS["source one"]
    assert source_windows(short, tokenizer, 128) == [short]
    long = " ".join(f"Fact {n} holds in Ohio." for n in range(200))
    tokens = len(tokenizer(long, add_special_tokens=False)["input_ids"])
    windows = source_windows(long, tokenizer, 128, size=480)
    assert len(windows) == -(-(tokens - 480) // 128) + 1
    assert long.startswith(windows[0]) and long.endswith(windows[-1])
    assert all(len(tokenizer(w, add_special_tokens=False)["input_ids"]) <= 481 for w in windows)
    assert all(window in long for window in windows)
    with pytest.raises(SumbenchError, match="window stride is a positive number"):
        Settings(window_stride=0)


@pytest.mark.slow
def test_with_windows_each_question_keeps_its_most_answerable_window(lab, tmp_path):
    from leaderboard.evaluators.questeval.scoring import SEP, source_windows

    long = " ".join(f"Ada Lovelace met Babbage on day {n}." for n in range(150))
    answers = tmp_path / "answers.jsonl"
    write_answers(answers, [TEXTS["summary one"], long])
    summary = [Summary("long", TEXTS["summary one"], long)]
    models = _models(lab, 8)
    settings = Settings("v0.2.4", ("answerability", "f1"), source_windows=True)
    windowed = questeval(summary, models, RecordedAnswers(answers), settings, details=True)
    plain = questeval(summary, models, RecordedAnswers(answers),
                      Settings("v0.2.4", ("answerability", "f1")), details=True)
    windows = source_windows(long, models.answerer.tokenizer, 128)
    assert len(windows) > 2
    chosen = windowed["summaries"][0]["details"][0]["precision"]
    for item in chosen:
        outputs = models.answerer.predict([f"{item['question']} {SEP} {w}" for w in windows])
        assert item["answerability"] == pytest.approx(max(1 - o.probability for o in outputs))
    assert len(plain["summaries"][0]["details"][0]["precision"]) == len(chosen)
    assert settings.name == "v0.2.4 + source windows (stride 128, an extension)"
