"""One check for an unknown choice (tasks.plumbing.errors.check_choice): one error class,
one message shape, close names suggested; the settings, metrics and options that take a
choice from a fixed list all answer through it."""
from __future__ import annotations

import pytest

from tasks.plumbing.errors import SumbenchError, UnknownNameError, check_choice, check_choices


@pytest.mark.parametrize("value, message", [
    ("kendal", "unknown correlation method 'kendal'; did you mean 'kendall'? (known: kendall, "
               "pearson, spearman)"),
    ("tau", "unknown correlation method 'tau' (known: kendall, pearson, spearman)"),
])
def test_an_unknown_choice_is_one_line_with_close_names(value, message):
    with pytest.raises(UnknownNameError) as caught:
        check_choice(value, ("kendall", "pearson", "spearman"), "correlation method")
    assert str(caught.value) == message
    assert isinstance(caught.value, SumbenchError)  # what every command reports in one line
    assert check_choice("pearson", ("kendall", "pearson"), "correlation method") == "pearson"


def test_several_choices_are_checked_in_order():
    assert check_choices(["rouge-1", "rouge-l"], ("rouge-1", "rouge-2", "rouge-l"), "m") == [
        "rouge-1", "rouge-l"]
    with pytest.raises(UnknownNameError, match=r"^unknown m 'rouge-3'; did you mean"):
        check_choices(["rouge-1", "rouge-3", "x"], ("rouge-1", "rouge-2", "rouge-l"), "m")


@pytest.mark.parametrize("call, message", [
    (lambda: __import__("tasks.metrics.correlation", fromlist=["x"]).check_rule("zeros"),
     "unknown undefined-correlation rule 'zeros'"),
    (lambda: __import__("tasks.metrics.easiness", fromlist=["x"]).unigram_scorer("rouge"),
     "unknown ROUGE variant 'rouge'"),
    (lambda: __import__("tasks", fromlist=["x"]).get_task("abstractive_summarization",
                                                          rouge_aggregate="median"),
     "unknown ROUGE aggregate 'median'"),
    (lambda: __import__("benchmark.experiments.runner", fromlist=["x"]).kind_module("transfr"),
     "unknown experiment kind 'transfr'; did you mean 'transfer'?"),
])
def test_the_places_that_take_a_fixed_choice_answer_through_it(call, message):
    with pytest.raises(UnknownNameError) as caught:
        call()
    assert str(caught.value).startswith(message)
