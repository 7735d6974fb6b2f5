"""The encoder runs' spec (trainers.encoders.spec): USB Table 10's RoBERTa-Large rows, the
choices where the paper is silent, and bad values refused in one line."""
from __future__ import annotations

import json

import pytest

from tasks.plumbing.errors import SumbenchError
from trainers.encoders.spec import ENCODER_TASKS, EncoderSpec, encoder_spec


@pytest.mark.parametrize("task, row", [
    ("FAC", (1e-5, 32, 512, None, "auc")),
    ("EXT", (1e-5, 32, 128, 128, "auc")),
    ("EVEXT", (2e-5, 2048, 128, None, "f1")),
    ("UNSUP", (2e-5, 32, 512, None, "f1")),
])
def test_the_profile_carries_table_10(task, row):
    spec = encoder_spec("roberta-large", task)
    assert (spec.learning_rate, spec.batch_size, spec.max_input_tokens, spec.max_sentences,
            spec.selection_metric) == row
    assert spec.model == "FacebookAI/roberta-large" and spec.task == {
        short: folder for folder, short in ENCODER_TASKS.items()}[task]
    # the choices of usb-baselines §3.0: transformers' defaults, 10 epochs, no fp16
    assert (spec.adam_betas, spec.adam_epsilon, spec.weight_decay, spec.warmup_ratio,
            spec.max_grad_norm, spec.num_epochs) == ((0.9, 0.999), 1e-8, 0.0, 0.0, 1.0, 10)


def test_a_spec_round_trips_through_json():
    spec = encoder_spec("roberta-large", "unsupported_span_prediction", model="/models/r",
                        num_epochs=3, precision="fp32")
    assert EncoderSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


@pytest.mark.parametrize("call, message", [
    (lambda: encoder_spec("roberta-large", "ABS"),
     "the encoder profiles run FAC, EVEXT, EXT, UNSUP only, not 'ABS'"),
    (lambda: encoder_spec("roberta-large", "fixing_factuality"),
     "only, not 'fixing_factuality'"),
    (lambda: encoder_spec("roberta-larg", "FAC"), "unknown encoder profile 'roberta-larg'"),
    (lambda: encoder_spec("roberta-large", "FAC", precision="fp16"),
     "precision 'fp16' is not supported for encoder runs"),
    (lambda: encoder_spec("roberta-large", "EXT", sentence_pooling="max"),
     "unknown sentence pooling 'max'"),
    (lambda: encoder_spec("roberta-large", "FAC", batch_size=0),
     "batch_size must be a positive integer, got 0"),
    (lambda: EncoderSpec.from_dict({**encoder_spec("roberta-large", "FAC").to_dict(),
                                    "learnin_rate": 1}),
     "unknown encoder spec field 'learnin_rate'; did you mean 'learning_rate'"),
])
def test_bad_values_are_one_line_errors(call, message):
    with pytest.raises(SumbenchError, match=message.replace("(", r"\(")):
        call()
