"""SemiAutoQAPyramid and AutoQAPyramid with the lexical backend, an oracle backend built from
the human judgments, a fake QA generator and a tiny seq2seq generator."""
from __future__ import annotations

from collections import defaultdict

import pytest

from leaderboard.evaluators.pyramid.presence import LexicalBackend, PresenceBackend, PresenceResult
from leaderboard.evaluators.qapyramid.autoqapyramid import (
    AutoQAPyramid,
    SemiAutoQAPyramid,
    gold_predicates,
    seq2seq_qa_generator,
)

QAS = [("Who scored something?", "Arango"), ("What did someone score?", "a free kick"),
       ("Who was bitten?", "Zavala")]
ITEMS = [{"example_id": "e1", "qas": QAS,
          "summaries": {"good": "Arango scored a free kick and bit Zavala.",
                        "half": "Arango scored a header.", "none": "Rain fell in Mexico."}},
         {"example_id": "e2", "qas": [("Who won?", "Chelsea")],
          "summaries": {"good": "Chelsea won.", "half": "Chelsea lost.", "none": "Nothing."}}]


class RecordingBackend(PresenceBackend):
    """Present iff the (summary, unit) pair is in `table`; records what it was asked."""
    name = "recording"

    def __init__(self, table=None):
        self.table, self.seen = table or {}, []

    def fingerprint(self) -> str:
        return "recording"

    def score_iter(self, pairs):
        for pair in pairs:
            self.seen.append(tuple(pair))
            value = float(self.table.get(tuple(pair[:2]), 0))
            yield PresenceResult(value, int(value))


def test_semiauto_with_the_lexical_backend():
    result = SemiAutoQAPyramid(LexicalBackend(threshold=0.5)).score(ITEMS)
    # unit content tokens: {scored, arango}, {score, free, kick}, {bitten, zavala}, {won, chelsea}
    # "half": 1, 0, 0 -> 1/3; e2 "Chelsea lost.": chelsea only -> 0.5 -> present
    assert result.per_summary["good"] == {"e1": 1.0, "e2": 1.0}
    assert result.per_summary["half"] == {"e1": pytest.approx(1 / 3), "e2": 1.0}
    assert result.per_summary["none"] == {"e1": 0.0, "e2": 0.0}
    assert result.system["half"] == pytest.approx((1 / 3 + 1) / 2)
    assert result.presence["half"]["e1"] == [1.0, 0.0, 0.0]
    soft = SemiAutoQAPyramid(LexicalBackend(0.5), use="probability").score(ITEMS)
    assert soft.presence["good"]["e1"] == [1.0, pytest.approx(2 / 3), 0.5]


def test_statement_units_and_example_ids_reach_the_backend():
    backend = RecordingBackend()
    SemiAutoQAPyramid(backend, unit_kind="statement").score(ITEMS[1:])
    assert backend.seen[0] == ("Chelsea won.", "Chelsea won.", "e2")


def test_oracle_backend_reproduces_human_qapyramid(qapyramid_judgments):
    """Majority votes as presence: the published human QAPyramid system scores."""
    from tasks.qapyramid.judgments import load_qa_judgments

    table, items = {}, defaultdict(lambda: {"qas": [], "summaries": {}})
    for judgment in load_qa_judgments(qapyramid_judgments):
        summary = f"summary of {judgment.system} on {judgment.example_id}"
        unit = f"{judgment.question} {judgment.answer}"
        table[(summary, unit)] = int(2 * sum(judgment.values) > len(judgment.values))
        item = items[judgment.example_id]
        item["summaries"][judgment.system] = summary
        if judgment.system == "bart":
            item["qas"].append((judgment.question, judgment.answer))
    result = SemiAutoQAPyramid(RecordingBackend(table)).score(
        [{"example_id": eid, **item} for eid, item in items.items()])
    published = {"bart": 0.51, "pegasus": 0.46, "brio": 0.56, "brio-ext": 0.55,
                 "matchsum": 0.50, "llama-3-8b-instruct": 0.54, "llama-3-70b-instruct": 0.53,
                 "mixtral-8x7b-instruct-v0.1": 0.48, "mixtral-8x22b-instruct-v0.1": 0.48,
                 "GPT4": 0.55}
    assert {s: round(v, 2) for s, v in result.system.items()} == published
    assert result.system["bart"] == pytest.approx(0.5094640604457995, abs=1e-12)


def test_autoqapyramid_with_a_fake_generator():
    calls = []

    def generator(references):
        calls.append(list(references))
        return [[("Who scored something?", "Arango"), ("Who took something?", "a penalty")]
                if "Arango" in text else [("Who won?", "Chelsea")] for text in references]

    items = [{"example_id": "e1", "reference": "Arango scored a free kick .",
              "summaries": ITEMS[0]["summaries"]},
             {"example_id": "e3", "reference": "Arango scored a free kick .",
              "summaries": {"good": "Arango scored."}},
             {"example_id": "e2", "reference": "Chelsea won .", "summaries": ITEMS[1]["summaries"]}]
    with pytest.raises(ValueError, match="example 'e3' has no output of system\\(s\\) 'half', "
                       "'none'; every system needs a summary of every example"):
        AutoQAPyramid(generator, LexicalBackend(0.5)).score(items)  # never a silent average
    calls.clear()
    items[1]["summaries"] = {"good": "Arango scored.", "half": "Nothing.", "none": "Nothing."}
    result = AutoQAPyramid(generator, LexicalBackend(0.5)).score(items)
    assert calls == [["Arango scored a free kick .", "Chelsea won ."]]  # once per reference
    assert result.qas["e3"] == [("Who scored something?", "Arango"),
                                ("Who took something?", "a penalty")]
    assert result.per_summary["good"] == {"e1": 0.5, "e3": 0.5, "e2": 1.0}
    assert result.per_summary["none"] == {"e1": 0.0, "e3": 0.0, "e2": 0.0}
    with pytest.raises(ValueError, match="returned 1 lists for 2"):
        AutoQAPyramid(lambda refs: [[]], LexicalBackend()).score(items)


def test_seq2seq_generator_with_a_tiny_t5():
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(["Who scored something? Arango | What was scored? a goal"]
                                     * 20, vocab_size=300)
    model = build_tiny_t5(tokenizer, seed=0)
    asked = []

    def predicates(reference):
        asked.append(reference)
        return ["scored", "won"] if "won" in reference else ["scored"]

    generate = seq2seq_qa_generator(model, tokenizer, predicates, max_new_tokens=8,
                                    batch_size=4)
    references = ["Arango scored a goal .", "Chelsea won and Arango scored ."]
    result = AutoQAPyramid(generate, LexicalBackend()).score(
        [{"example_id": f"x{k}", "reference": reference, "summaries": {"s": "Arango scored."}}
         for k, reference in enumerate(references)])
    assert asked == references  # one generation per (reference, predicate), 3 in one batch
    generated = [result.qas[f"x{k}"] for k in range(2)]
    assert all(isinstance(q, str) and isinstance(a, str) for qas in generated for q, a in qas)
    for k, qas in enumerate(generated):  # scored exactly when QAs were generated
        assert (f"x{k}" in result.per_summary.get("s", {})) == bool(qas)


def test_gold_predicates_keep_one_word_per_predicate_group():
    """"opened" is two predicates of the reference (two gold groups): it is generated for
    twice, so the AutoQAPyramid denominator counts both, as the gold QAs do."""
    from tasks.qapyramid.dataset import QAPyramidExample

    reference = "Maria opened a bakery and later opened a cafe that sold bread."
    qas = (("Who opened something?", "Maria"), ("What did someone open?", "a bakery"),
           ("Who opened something?", "Maria"), ("What did someone open?", "a cafe"),
           ("What sold something?", "a cafe"), ("What did something sell?", "bread"))
    example = QAPyramidExample("e1", "source", reference, qas)
    assert example.predicate_groups() == [[0, 1], [2, 3], [4, 5]]
    assert gold_predicates(example) == ["opened", "opened", "sold"]
    one_qa = {"opened": [("Who opened something?", "Maria")],
              "sold": [("What sold something?", "a cafe")]}

    def generator(references):
        return [[qa for word in gold_predicates(example) for qa in one_qa[word]]
                for _ in references]

    result = AutoQAPyramid(generator, LexicalBackend(threshold=0.5)).score(
        [{"example_id": "e1", "reference": reference,
          "summaries": {"s": "Maria opened a bakery."}}])
    assert result.presence["s"]["e1"] == [1.0, 1.0, 0.0]
    assert result.system["s"] == pytest.approx(2 / 3)  # each word once would give 1/2
    assert gold_predicates(QAPyramidExample("e2", "s", "Nothing.", ())) == []
