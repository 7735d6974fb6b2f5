"""tasks.plumbing.json_fields: the specs' JSON round trips and unknown-field errors, written
once and shared by RunSpec, PredictSpec, FinetuneSpec and the leaderboard's InstanceSettings."""
from __future__ import annotations

import json

import pytest

from benchmark.results import RunSpec
from leaderboard.service.settings import InstanceSettings
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.json_fields import JsonFields
from trainers.finetuning.profiles import FinetuneSpec, SpecError, get_profile
from trainers.inference.predict_spec import PredictSpec

SPECS = [
    RunSpec(tasks=("factuality_classification", "abstractive_summarization"), model="m",
            train_overrides=(("learning_rate", 0.001),)),
    PredictSpec(batch_size=4, window_tokens=None),
    get_profile("tiny", model="m"),
    InstanceSettings(),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: type(spec).__name__)
def test_a_spec_comes_back_from_its_json_unchanged(spec):
    assert isinstance(spec, JsonFields)
    text = spec.to_json()
    assert type(spec).from_json(text) == spec
    assert json.loads(text) == spec.to_dict()  # only JSON values: no tuple survives


def test_the_json_shapes_are_those_files_already_hold():
    assert "\n" not in PredictSpec().to_json()  # one line in prediction files
    assert RunSpec(tasks=("fac",), model="m",
                   train_overrides=(("lora_r", 8),)).to_dict()["train_overrides"] == {"lora_r": 8}
    assert get_profile("tiny").to_dict()["lora_target_modules"] == ["q", "v"]


@pytest.mark.parametrize("spec_class, data, error, message", [
    (RunSpec, {"tasks": ["fac"], "modle": "m"}, SumbenchError,
     "unknown RunSpec field(s): modle; did you mean 'mode' or 'model'"),
    (PredictSpec, {"batch": 4}, SumbenchError, "unknown PredictSpec field(s): batch"),
    (FinetuneSpec, {"learnin_rate": 1}, SpecError,
     "unknown spec field(s): learnin_rate; did you mean 'learning_rate'"),
    (InstanceSettings, {"ladder_stp": 1}, SumbenchError,
     "unknown leaderboard setting(s): ladder_stp; did you mean 'ladder_step'"),
])
def test_an_unknown_field_is_refused_by_name(spec_class, data, error, message):
    with pytest.raises(error) as caught:
        spec_class.from_dict(data)
    assert message in str(caught.value)
