"""`sumbench run` predicts with the USB release's budgets for the profiles that carry its
settings (inputs truncated at 8192 tokens, 767 new tokens, windows of 1024), whatever the
training budgets; other profiles with their own; the run's options win."""
from __future__ import annotations

import pytest

from benchmark.results import RunSpec
from benchmark.run import finetune_spec, predict_spec
from trainers.finetuning.profiles import profile_names

#: profile -> (max input tokens, max new tokens, window budget) of its test predictions
EXPECTED = {
    "flan-t5-large": (8192, 767, 1024),   # trained at 8192 / 768
    "flan-t5-xl": (8192, 767, 1024),      # trained at 1536 / 512: predicts as the release
    "t5-large": (8192, 767, 1024),        # Table 10's T5-Large row: Flan-T5-Large's values
    "tiny": (256, 64, 256),               # not a release profile: its own budgets
}


def _budgets(**fields) -> tuple[int, int, int]:
    spec = RunSpec(model="m", tasks=("factuality_classification",), **fields)
    predicted = predict_spec(spec, finetune_spec(spec))
    return predicted.max_input_tokens, predicted.max_new_tokens, predicted.window_budget


def test_every_profile_has_its_expected_prediction_budgets():
    assert sorted(EXPECTED) == profile_names()


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_a_profile_predicts_with_its_prediction_budgets(profile):
    assert _budgets(profile=profile) == EXPECTED[profile]


def test_run_options_win_and_windows_stay_those_trained_on():
    assert _budgets(profile="flan-t5-xl", max_input_tokens=2048, max_new_tokens=100) == \
        (2048, 100, 1024)
    # a model trained on windows of 512 predicts on windows of 512
    assert _budgets(profile="flan-t5-large", train_overrides={"max_input_tokens": "512"}) == \
        (8192, 767, 512)
