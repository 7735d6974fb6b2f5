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


def _call(module: str, function: str, *args, **kwargs):
    """A function of one of our modules, called (imported only when the case runs)."""
    import importlib

    return getattr(importlib.import_module(module), function)(*args, **kwargs)


#: the sites issue 64 turned to check_choice / check_choices: the whole one-line message
CONVERTED = [
    (lambda: _call("benchmark.synthetic", "SyntheticSpec", domains=("biographies", "companys")),
     "unknown synthetic domain 'companys'; did you mean 'companies'? (known: biographies, "
     "companies, disasters, schools, landmarks, newspapers)"),
    (lambda: _call("benchmark.synthetic", "SyntheticSpec", test_only_domains=("moon",)),
     "unknown synthetic domain 'moon' (known: biographies, companies, disasters, schools, "
     "landmarks, newspapers)"),
    (lambda: _call("leaderboard.tracks", "make_track", "usbb"),
     "unknown track 'usbb'; did you mean 'usb'? (known: usb, summaries, evaluators)"),
    (lambda: _call("leaderboard.evaluators.pyramid.presence", "ChatBackend", client=object(),
                   prompt_style="tsk"),
     "unknown prompt style 'tsk'; did you mean 'task'? (known: task, qapyramid-gpt4o)"),
    (lambda: _call("trainers.fewshot.prompts", "get_style", "gpt-4"),
     "unknown prompt style 'gpt-4'; did you mean 'gpt-3.5'? (known: flan-t5, gpt-3.5, "
     "gpt-3.5-first, llama, vicuna, vicuna-chat)"),
    (lambda: _call("tasks.metrics", "evaluate_module_path", "usb_rogue"),
     "unknown evaluate module 'usb_rogue'; did you mean 'usb_rouge'? (known: usb_rouge, "
     "usb_classification, usb_spans)"),
    (lambda: _call("tasks.metrics.rouge", "aggregate_rouge", [{}], "median"),
     "unknown ROUGE aggregate 'median'; did you mean 'mean'? (known: mean, bootstrap-mid)"),
    (lambda: _call("tasks.qapyramid.pyramid_data", "select_systems", ("t5-large", "bart"),
                   ["bart", "t5-larg"]),
     "unknown system 't5-larg'; did you mean 't5-large'? (known: t5-large, bart)"),
    (lambda: _call("tasks.qapyramid.pyramid_data", "select_systems", ("sysA", "sysB"),
                   ["sysA", "sysC"]),  # closer names suggested than elsewhere (cutoff 0.5)
     "unknown system 'sysC'; did you mean 'sysB' or 'sysA'? (known: sysA, sysB)"),
    (lambda: _call("tasks.qapyramid.dataset", "check_split", "dev"),
     "unknown split 'dev' (known: train, validation, test, all)"),
    (lambda: _call("tasks.qapyramid.presence_detection", "PresenceDetection").load_instances(
        "all", "realsum"),
     "unknown presence_detection variant 'realsum'; did you mean 'realsumm'? (known: "
     "qapyramid, realsumm, pyrxsum)"),
    (lambda: _call("tasks.qapyramid.presence_detection", "qapyramid_instances", [],
                   unit_kind="scu"),
     "unknown QAPyramid unit kind 'scu' (known: qa, statement)"),
    (lambda: _call("tasks.units.kinds", "read_unit_kind", "acus", ("scus", "stus")),
     "unknown unit kind 'acus'; did you mean 'scus'? (known: scus, stus)"),
    (lambda: _call("leaderboard.tracks.pyramid_gold", "read_extra_units", {"sgu": "x"}, 1),
     "unknown extra unit kind 'sgu'; did you mean 'sgus'? (known: smus, sgus, ssus, ngrams)"),
]


@pytest.mark.parametrize("call, message", CONVERTED)
def test_the_converted_sites_give_check_choice_s_error(call, message):
    with pytest.raises(UnknownNameError) as caught:
        call()
    assert str(caught.value) == message
    assert isinstance(caught.value, SumbenchError) and isinstance(caught.value, KeyError)


def test_a_backend_name_is_matched_in_any_case_before_the_check():
    from leaderboard.evaluators.pyramid.scoring import canonical_backend

    assert canonical_backend("LEXICAL") == "lexical"
    with pytest.raises(UnknownNameError, match=r"^unknown presence backend 'lexcal'; did you "
                                               r"mean 'lexical'\? \(known: alignscore, "
                                               r"causal-lm, chat, "):
        canonical_backend("lexcal")


@pytest.mark.parametrize("name, kind", [("usb", "UsbTrack"), ("summaries", "SummariesTrack"),
                                        ("evaluators", "EvaluatorsTrack")])
def test_every_known_track_is_made(name, kind):
    from leaderboard.tracks import make_track

    assert type(make_track(name)).__name__ == kind
