"""QA generation: units (verbs, statements), QA parsing, UA, ROUGE-L, BERTScore hook, the task."""
from __future__ import annotations

import json

import pytest

from tasks.metrics.qa import (
    BertScoreUnavailable,
    answer_tokens,
    bertscore,
    join_qa,
    linearize_qas,
    matched_answers,
    parse_qa_list,
    qa_rougel,
    split_qa,
    token_iou,
    ua_scores,
)
from tasks.plumbing.errors import DataError
from tasks.plumbing.registry import TASKS
from tasks.qapyramid.qa_generation import QAGeneration
from tasks.qapyramid.units import predicate_word, qa_to_statement, question_verb

REFERENCE = "Juan Arango escaped punishment . He might face a retrospective ban ."
QAS = ["Who escaped from something? Juan Arango", "What did someone escape from? punishment",
       "Who might face something? He", "What might someone face? a retrospective ban"]


# ---- units ------------------------------------------------------------------------------
@pytest.mark.parametrize("question, verb", [
    ("Who escaped from something?", "escaped"), ("What did someone escape from?", "escape"),
    ("Who was someone biting?", "biting"), ("Who didn't came across?", "came"),
    ("From whom did someone attract something?", "attract"), ("What was to open?", "open"),
    ("By how much did someone win?", "win"), ("?", ""),
])
def test_question_verb(question, verb):
    assert question_verb(question) == verb


@pytest.mark.parametrize("question, answer, statement", [
    ("Who escaped from something?", "Juan Arango", "Juan Arango escaped from something."),
    ("What was given?", "no value", "No value was given."),
    ("Who did not respond?", "British police", "British police did not respond."),
    ("What did someone not respond to?", "a burglar alarm",
     "Someone did not respond to a burglar alarm."),
    ("Who was someone biting?", "Jesus Zavela", "Someone was biting Jesus Zavela."),
    ("Why might someone face something?", "for the incident",
     "Someone might face something for the incident."),
    ("From whom did someone attract something?", "the fans",
     "Someone did attract something from the fans."),
    ("How much did someone pay?", "$5", "Someone did pay $5."),
])
def test_qa_to_statement(question, answer, statement):
    assert qa_to_statement(question, answer) == statement


def test_split_and_join_qa():
    assert split_qa("  Who won ?   the  team ") == ("Who won ?", "the team")
    assert split_qa("Who won something the cup") == ("Who won something", "the cup")
    assert split_qa("Who won the cup") == ("Who won the cup", "")
    assert join_qa("Who won", "the cup") == "Who won? the cup"
    assert predicate_word(["What did someone escape from?"], REFERENCE) == "escaped"
    assert predicate_word(["What did someone escape from?"]) == "escape"


# ---- parsing and metrics ----------------------------------------------------------------
def test_parse_qa_list_is_robust():
    pairs = [("Who won?", "the team"), ("What was won?", "the cup")]
    assert parse_qa_list(linearize_qas(pairs)) == pairs
    assert linearize_qas(pairs) == "Who won? the team | What was won? the cup"
    assert parse_qa_list("Who won ?the team|What was won?  the cup\n") == \
        [("Who won ?", "the team"), ("What was won?", "the cup")]
    assert parse_qa_list("Who won? the team\nWhen did someone win something? in May") == \
        [("Who won?", "the team"), ("When did someone win something?", "in May")]
    assert parse_qa_list("Who won something the cup ; | |") == [("Who won something", "the cup")]
    assert parse_qa_list("") == [] and parse_qa_list("  |  ") == []


def test_ua_on_hand_made_answers():
    gold = ["the USC women's team", "the PAC-12 championship"]
    generated = ["USC women's team", "the championship", "the championship"]
    assert token_iou(answer_tokens(gold[0]), answer_tokens(generated[0])) == pytest.approx(0.8)
    assert token_iou(answer_tokens(gold[1]), answer_tokens(generated[1])) == pytest.approx(0.5)
    assert matched_answers(generated, gold) == [(0, 0), (1, 1)]  # duplicate matches once
    scores = ua_scores([generated], [gold])
    assert (scores["ua_precision"], scores["ua_recall"]) == (pytest.approx(2 / 3), 1.0)
    assert scores["ua_f1"] == pytest.approx(0.8)
    strict = ua_scores([generated], [gold], threshold=0.6)
    assert strict["ua_f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert ua_scores([["May"]], [["in May 2015"]], threshold=0)["ua_f1"] == 1.0
    pooled = ua_scores([generated, []], [gold, ["x"]])  # micro over two predicates
    assert (pooled["ua_precision"], pooled["ua_recall"]) == (pytest.approx(2 / 3), 2 / 3)
    assert ua_scores([[]], [[]])["ua_f1"] == 0.0


def test_qa_rougel_known_value():
    assert qa_rougel([[("Who won?", "the team")]], [[("Who won?", "the team")]]) == 1.0
    # gold tokens [who won the team], generated [who won team]: LCS 3, P 1, R 3/4
    assert qa_rougel([[("Who won?", "team")]], [[("Who won?", "the team")]]) == \
        pytest.approx(2 * 0.75 / 1.75)


def test_bertscore_needs_a_path_and_runs_on_a_tiny_model(tmp_path):
    with pytest.raises(BertScoreUnavailable, match="needs a model"):
        bertscore(["a"], ["a"], None)
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(["who won the cup", "the team"] * 5, vocab_size=300)
    build_tiny_classifier(tokenizer, save_dir=tmp_path / "enc")
    same = bertscore(["Who won? the team"], ["Who won? the team"], str(tmp_path / "enc"))
    assert same["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)
    other = bertscore(["Who won? the team", "x"], ["What was won? the cup", "x"],
                      str(tmp_path / "enc"))
    assert other["bertscore_f1"] < 1.0 - 1e-4  # the first pair differs, "x" = "x" scores 1
    task = QAGeneration(bertscore_model=str(tmp_path / "enc"))
    record = {"id": "a", "qas": [["Who won?", "the team"]],
              "prediction": [["Who won?", "the team"]]}
    assert task.score([record])["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)
    # per-example BERTScore averages to the pooled `bertscore` bit for bit (an empty
    # prediction scores 0 and still counts)
    records = [record, {"id": "b", "qas": [["What was won?", "the cup"]],
                        "prediction": [["Who won?", "the team"]]},
               {"id": "c", "qas": [["Who won?", "the team"]], "prediction": []}]
    expected = bertscore([linearize_qas(r["prediction"]) for r in records],
                         [linearize_qas(r["qas"]) for r in records], str(tmp_path / "enc"))
    scores = task.aggregate_scores(task.score_examples(records))
    assert {key: scores[key] for key in expected} == expected
    assert 0 < scores["bertscore_f1"] < 1


# ---- the task ---------------------------------------------------------------------------
@pytest.fixture
def data_file(tmp_path):
    records = [{"example_id": f"ex{i}", "source": "", "reference": REFERENCE, "QAs": QAS}
               for i in range(12)]
    path = tmp_path / "qapyramid.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_task_instances_formats_and_splits(data_file):
    task = TASKS.get("QAGEN")()
    assert isinstance(task, QAGeneration)
    splits = {s: task.load_instances(s, "qapyramid", str(data_file))
              for s in ("train", "validation", "test")}
    ids = [{i["example_id"] for i in rows} for rows in splits.values()]
    assert sum(map(len, ids)) == 12 and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    dataset = task.load("train", "qapyramid", str(data_file))
    first = dataset[0]
    assert first["predicate"] == "escaped" and first["predicate_index"] == 0
    assert first["qas"] == [["Who escaped from something?", "Juan Arango"],
                            ["What did someone escape from?", "punishment"]]
    model_input = task.format(first)[0]
    assert model_input.source == ('Generate question-answer pairs for the predicate "escaped" :'
                                  '  ' + REFERENCE)
    assert model_input.target == ("Who escaped from something? Juan Arango | "
                                  "What did someone escape from? punishment")
    parts = task.fewshot_parts(first)
    assert parts.cue == "QAS:" and parts.content.startswith("PREDICATE: escaped\nTEXT: ")
    assert task.group_key(first) == first["example_id"]


def test_task_records_and_scores(data_file):
    task = QAGeneration()
    instances = task.load_instances("all", "qapyramid", str(data_file))[:2]
    texts = ["Who escaped from something? Juan Arango | What did someone escape? punishment",
             "Who might face? He"]
    records = [task.prediction_record(i, task.parse(t, i)) for i, t in zip(instances, texts)]
    for record in records:
        task.validate_record(record)
    scores = task.score(records)
    assert (scores["ua_precision"], scores["ua_recall"]) == (1.0, 0.75)
    generated = [[tuple(pair) for pair in r["prediction"]] for r in records]
    gold = [[tuple(pair) for pair in r["qas"]] for r in records]
    former = {"rougel": qa_rougel(generated, gold),  # what `score` computed before the split
              **ua_scores([[a for _, a in pairs] for pairs in generated],
                          [[a for _, a in pairs] for pairs in gold])}
    examples = task.score_examples(records)
    assert task.aggregate_scores(examples) == former == scores
    assert examples[1]["ua"] == (1, 1, 2)  # "He" matches "He"; "a retrospective ban" is missed
    assert scores["ua_f1"] == pytest.approx(6 / 7)
    assert 0.5 < scores["rougel"] < 1.0 and task.headline(scores) == 100 * scores["rougel"]
    broken = dict(records[0], prediction=[["only a question"]])
    with pytest.raises(DataError) as error:
        task.validate_record(broken)
    assert error.value.field == "prediction"
    assert not any(key.startswith("bertscore") for key in scores)


def test_raw_variant_needs_references(qapyramid_judgments):
    with pytest.raises(DataError, match="no reference texts"):
        QAGeneration().load_instances("all", "raw", str(qapyramid_judgments))
    example = "0281c649039f99af337e91190d5bdcb5e9734969"
    task = QAGeneration(references={example: "British police did not respond to an alarm ."})
    rows = task.load_instances("all", "raw", str(qapyramid_judgments.parent))
    assert {r["example_id"] for r in rows} == {example}
    respond = [r for r in rows if r["predicate"] == "respond"]
    assert respond[0]["qas"][0] == ["Who did not respond?", "British police"]
    assert len(rows) == 6  # the example has predicates _0, _1, _4, _6, _7, _8 in the raw file
