"""The public-gold copy check reads records as each task's metric does: a copy perturbed in
what the metric ignores is still a copy, per task as well as pooled, and a good model's own
outputs are not; on a public board, only text outputs that reproduce the references unrank
a model evaluated here (label decisions equal to the gold's could be a perfect
classifier's: they flag it)."""
from __future__ import annotations

import pytest

from leaderboard.service.boards import not_ranked_reason
from leaderboard.tracks.base import gold_match_summary, text_copies
from leaderboard.tracks.usb import COPY_SHARES, UsbTrack
from tasks import get_task, task_names
from tasks.gold import gold_templates
from tasks.plumbing.io import read_jsonl

TASKS = task_names("usb")
TEXT = ("abstractive_summarization", "topicbased_summarization", "multisentence_compression",
        "fixing_factuality")


@pytest.fixture(scope="module")
def gold(data_dir) -> dict:
    return {"all": {name: {"templates": gold_templates(get_task(name), str(data_dir), "all")}
                    for name in TASKS}}


def _copy(gold, change=lambda task, prediction: prediction, tasks=TASKS) -> dict:
    """Each task's gold answers as predictions, through `change`."""
    return {name: [{**template, "prediction": change(get_task(name),
                                                     get_task(name).gold_prediction(template))}
                   for template in gold["all"][name]["templates"]] for name in tasks}


def _sample(usb_fixture_dir, names=TASKS) -> dict:
    """The shared fixture's sample predictions: a real model's outputs."""
    return {name: read_jsonl(usb_fixture_dir / "predictions" / f"{name}.jsonl")
            for name in names}


def _confident(task, prediction):
    """Labels moved from 1.0/0.0 to 0.98/0.02 (AUC, F1 and accuracy unchanged)."""
    return [0.98 if value else 0.02 for value in prediction] \
        if task.output_kind == "probabilities" else prediction


def _accented(task, prediction):
    """" é" after each text answer: outside ROUGE's [a-z0-9] tokens."""
    return prediction + " é" if isinstance(prediction, str) else prediction


def test_the_exact_copy_copies_every_task(gold):
    match = UsbTrack().gold_match(_copy(gold), gold, "all")
    assert match["matches_public_gold"] and match["share"] == 1.0
    assert match["copied_parts"] == sorted(TASKS) and sorted(match["text_copies"]) == sorted(TEXT)
    assert match["copy_shares"] == {name: COPY_SHARES[name] for name in TASKS}


def test_perturbations_the_metrics_ignore_leave_a_copy(gold):
    confident = UsbTrack().gold_match(_copy(gold, _confident), gold, "all")
    assert confident["copied_parts"] == sorted(TASKS)  # decisions equal the gold's
    accented = UsbTrack().gold_match(_copy(gold, _accented), gold, "all")
    assert accented["parts"]["fixing_factuality"] == 0.0  # exact match sees the letter
    assert sorted(accented["text_copies"]) == sorted(set(TEXT) - {"fixing_factuality"})
    for name in set(TEXT) - {"fixing_factuality"}:
        assert accented["parts"][name] == 1.0, name


def test_a_task_copied_whole_is_flagged_however_much_else_is_answered(gold, usb_fixture_dir):
    """Pooled over all records a copied FIX is diluted below 85% by a real model's answers to
    the other tasks; its own share flags it, and names it."""
    records = {**_sample(usb_fixture_dir), **_copy(gold, tasks=("fixing_factuality",))}
    match = UsbTrack().gold_match(records, gold, "all")
    assert match["share"] < 0.85 and match["matches_public_gold"]
    assert match["copied_parts"] == match["text_copies"] == ["fixing_factuality"]


def test_a_good_model_s_outputs_are_not_a_copy(gold, usb_fixture_dir):
    match = UsbTrack().gold_match(_sample(usb_fixture_dir), gold, "all")
    assert not match["matches_public_gold"] and match["copied_parts"] == []
    assert all(match["parts"][name] < COPY_SHARES[name] for name in TASKS), match["parts"]
    assert match["share"] < 0.5


def _entry(gold_match: dict, **card) -> dict:
    return {"kind": "evaluation", "gold_match": gold_match, "card": {
        "training_data": "USB train split", "usb_test_seen": False, **card}}


def test_only_text_copies_unrank_a_model_evaluated_here():
    text = gold_match_summary({"fixing_factuality": (8, 10, True),
                               "factuality_classification": (2, 10, False)}, COPY_SHARES)
    labels = gold_match_summary({"factuality_classification": (10, 10, False),
                                 "fixing_factuality": (3, 10, True)}, COPY_SHARES)
    assert text["matches_public_gold"] and labels["matches_public_gold"]
    assert not_ranked_reason(_entry(text)) == ("its outputs reproduce the public references of "
                                               "fixing_factuality (memorised test data)")
    assert labels["copied_parts"] == ["factuality_classification"]
    assert not_ranked_reason(_entry(labels)) is None  # flagged, still ranked
    stored_before = {"matches_public_gold": True, "share": 1.0, "parts": {"fac": 1.0}}
    assert text_copies(stored_before) == ["fac"]  # scored under the old rule: as it was
    assert not_ranked_reason({**_entry(labels), "kind": "submission"}).startswith(
        "self-reported")
