"""The evaluator interface (tasks.metrics.evaluators): several references per summary, plain
callables as before, the registry's errors, and models kept per process (tasks.plumbing.kept)."""
from __future__ import annotations

import pytest

from tasks.metrics.evaluators import (
    CallableEvaluator,
    Evaluator,
    Rouge155Evaluator,
    RougeRecall,
    as_evaluator,
    configured,
    register_evaluator,
    score_summaries,
)
from tasks.metrics.recall import rouge_recall
from tasks.metrics.rouge155 import Rouge155, rouge155
from tasks.plumbing.errors import SumbenchError, UnknownNameError
from tasks.plumbing.kept import MODELS_PER_KIND, forget_models, kept_model
from tasks.plumbing.registry import DuplicateNameError, Registry

SUMMARIES = ["the cat sat on the mat", "a dog barked at the moon"]
REFERENCES = [["a cat sat on a mat", "the cat was on the mat today"],
              ["dogs bark", "the dog barked loudly at the moon"]]


def test_rouge_recall_takes_the_best_of_a_summary_s_references():
    scores = score_summaries(RougeRecall("rouge2_recall"), SUMMARIES, REFERENCES, None)
    each = [rouge_recall(SUMMARIES, [refs[k] for refs in REFERENCES], ["rouge2_recall"])
            ["rouge2_recall"] for k in range(2)]
    assert scores == [max(each[0][0], each[1][0]), max(each[0][1], each[1][1])]
    assert scores == pytest.approx([3 / 6, 1 / 1])  # "the cat", "on the", "the mat"; "dog bark"
    # one reference as a lone text or a list of one: the same score
    lone = score_summaries(RougeRecall("rouge2_recall"), SUMMARIES,
                           [refs[0] for refs in REFERENCES], None)
    assert lone == score_summaries(RougeRecall("rouge2_recall"), SUMMARIES,
                                   [refs[:1] for refs in REFERENCES], None) == each[0]


def test_rouge155_takes_every_reference_as_one_of_its_models():
    evaluator = Rouge155Evaluator("rouge155-1-r", "rouge-1", "r")
    config = Rouge155.load()
    expected = [rouge155(config, summary, refs, ["rouge-1"])["rouge-1"].recall
                for summary, refs in zip(SUMMARIES, REFERENCES)]
    assert score_summaries(evaluator, SUMMARIES, REFERENCES, None) == expected
    assert evaluator.settings == {"evaluator": "rouge155-1-r", "metric": "rouge-1",
                                  "implementation": "ROUGE-1.5.5 (-n 4 -m)", "value": "recall"}


class FirstWords(Evaluator):
    """A toy Evaluator: how many of the summary's words open any of its references."""
    name = "first-words"

    def score(self, summaries, references, sources):
        return [float(sum(any(ref.startswith(word) for ref in refs)
                          for word in summary.split()))
                for summary, refs in zip(summaries, references)]


def test_a_plain_callable_gets_each_summary_s_first_reference():
    seen = []

    def plug_in(summaries, references):
        seen.append(list(references))
        return [1.0] * len(summaries)

    assert score_summaries(plug_in, SUMMARIES, REFERENCES, None, "plug") == [1.0, 1.0]
    assert seen == [["a cat sat on a mat", "dogs bark"]]
    wrapped = as_evaluator("plug", plug_in)
    assert isinstance(wrapped, CallableEvaluator) and wrapped.settings == {}
    assert as_evaluator("x", FirstWords).name == "first-words"
    assert score_summaries(FirstWords(), SUMMARIES, REFERENCES, None) == [2.0, 2.0]


@pytest.mark.parametrize("call, message", [
    (lambda: score_summaries(FirstWords(), SUMMARIES, REFERENCES[:1], None),
     "evaluator 'first-words': 1 references for 2 summaries"),
    (lambda: score_summaries(FirstWords(), SUMMARIES, [["r"], []], None),
     "evaluator 'first-words': summary 2 has no reference"),
    (lambda: score_summaries(lambda s, r: [1.0], SUMMARIES, REFERENCES, None, "short"),
     "evaluator 'short' gave 1 scores for 2 summaries"),
    (lambda: configured("rouge1_recall", {"x": "1"}),
     "evaluator 'rouge1_recall' takes no options"),
    (lambda: configured("rouge9_recall"), "unknown evaluator 'rouge9_recall'; did you mean"),
])
def test_bad_calls_are_one_line_errors(call, message):
    with pytest.raises(SumbenchError, match=message):
        call()


def test_a_source_reading_evaluator_needs_as_many_sources():
    class Reader(FirstWords):
        name, reads_sources = "reader", True

    with pytest.raises(SumbenchError, match="evaluator 'reader' reads each summary's source"):
        score_summaries(Reader(), SUMMARIES, REFERENCES, None)
    with pytest.raises(SumbenchError, match="evaluator 'reader': 1 sources for 2 summaries"):
        score_summaries(Reader(), SUMMARIES, REFERENCES, ["one document"])


def test_a_taken_name_is_refused(monkeypatch):
    registry = Registry("evaluator")
    monkeypatch.setattr("tasks.metrics.evaluators.EVALUATORS", registry)
    register_evaluator("words", FirstWords)
    with pytest.raises(DuplicateNameError, match="evaluator name 'words' is already"):
        register_evaluator("words", lambda s, r: [0.0] * len(s))
    with pytest.raises(UnknownNameError):
        registry.get("sentences")


def test_models_of_a_kind_are_kept_until_more_than_its_size_are_used():
    forget_models("test kind")
    loads = []

    def loader(key):
        return lambda: loads.append(key) or f"model {key}"

    for _ in range(3):  # two columns with different models alternate: each loads once
        assert kept_model("test kind", "a", loader("a")) == "model a"
        assert kept_model("test kind", "b", loader("b")) == "model b"
    assert loads == ["a", "b"]
    for key in range(MODELS_PER_KIND):  # "a" is now the oldest of more than the size
        kept_model("test kind", key, loader(key))
    kept_model("test kind", "a", loader("a"))
    assert loads.count("a") == 2 and loads.count("b") == 1
    assert kept_model("other kind", "a", loader("a")) == "model a"  # kinds apart
    forget_models("test kind")
    kept_model("test kind", "b", loader("b"))
    assert loads.count("b") == 2
