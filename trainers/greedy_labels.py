"""Greedy decoding of label batches: `generate` with a recorder, or the lean T5 decoder
(trainers.lean_t5) once a batch decoded both ways has agreed.

The check is kept per model object (weakly referenced) together with what it holds for
(`trainers.lean_t5.check_key`: device, decoding token ids, output scaling, module objects);
when any of that changes, the next batch is checked again. A batch that ran one step only
does not exercise the decoder's cache, so multi-step batches are checked until one is.
"""
from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass

from trainers.generation import model_device, run_generate
from trainers.label_tokens import LabelTokens, YesNoRecorder
from trainers.lean_t5 import LeanT5
from trainers.lean_t5 import check_key as lean_check_key
from trainers.lean_t5 import unsupported_reason as lean_unsupported_reason
from trainers.predict_spec import PredictSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeanCheck:
    """The verdict of comparing the lean decoder with `generate` on one batch: for which
    `trainers.lean_t5.check_key`, "on" or "off: ...", and whether the batch ran more than one
    step (a one-step batch does not exercise the decoder's cache)."""
    key: tuple
    status: str
    multi_step: bool


#: model -> its latest LeanCheck
_LEAN_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: largest difference of a step probability still counted as agreement (float rounding)
LEAN_TOLERANCE = 1e-5


def _current_check(model) -> LeanCheck | None:
    checked = _LEAN_CHECKED.get(model)
    if checked is None or checked.key != lean_check_key(model, model_device(model)):
        return None
    return checked


def lean_status(model) -> str:
    """"on", "unchecked" (not compared with generate as the model is now) or "off: <why>"."""
    reason = lean_unsupported_reason(model)
    if reason:
        return f"off: {reason}"
    checked = _current_check(model)
    return "unchecked" if checked is None else checked.status


def label_decoder(model, spec: PredictSpec) -> str:
    """How label batches are decoded, for provenance: "lean T5 (checked against generate)",
    "lean T5 (not yet checked)" or "generate: <why not the lean decoder>"."""
    if spec.label_num_beams != 1:
        return "generate: beam search"
    status = lean_status(model)
    if status == "on":
        return "lean T5 (checked against generate)"
    if status == "unchecked":
        return "lean T5 (not yet checked)"
    return f"generate: {status.removeprefix('off: ')}"


def generate_label_steps(model, input_ids, mask, max_new_tokens: int, labels: LabelTokens):
    """Greedy `generate` with a recorder: (sequences, Yes-probabilities per row and step)."""
    from transformers import LogitsProcessorList

    recorder = YesNoRecorder(labels)
    output = run_generate(model, input_ids, mask, max_new_tokens=max_new_tokens, num_beams=1,
                          logits_processor=LogitsProcessorList([recorder]))
    return output.sequences, recorder.per_row()


def lean_label_steps(model, input_ids, mask, max_new_tokens: int, labels: LabelTokens):
    """The same as `generate_label_steps` through `trainers.lean_t5.LeanT5`."""
    import torch

    recorder = YesNoRecorder(labels)
    with torch.inference_mode():
        sequences = LeanT5(model).greedy(input_ids, mask, max_new_tokens,
                                         on_step=lambda logits: recorder(None, logits))
    return sequences, recorder.per_row()


def steps_agree(first, second) -> bool:
    """Same sequences and step probabilities within `LEAN_TOLERANCE`."""
    import torch

    if first[0].shape != second[0].shape or not torch.equal(first[0].cpu(), second[0].cpu()):
        return False
    return all(abs(a - b) <= LEAN_TOLERANCE
               for row, other in zip(first[1], second[1]) for a, b in zip(row, other))


def greedy_label_steps(model, input_ids, mask, max_new_tokens: int, labels: LabelTokens,
                       lean: bool = True):
    """(sequences, step probabilities) of greedy decoding. The lean decoder's first batch
    for a model (again after its device, decoding settings or modules change, and until a
    batch has run more than one step) is also decoded by `generate` and compared; a
    difference turns the lean decoder off for that model, with a warning, and `generate`'s
    results are used."""
    if not lean or lean_unsupported_reason(model):
        return generate_label_steps(model, input_ids, mask, max_new_tokens, labels)
    checked = _current_check(model)
    if checked is not None and checked.status != "on":
        return generate_label_steps(model, input_ids, mask, max_new_tokens, labels)
    steps = lean_label_steps(model, input_ids, mask, max_new_tokens, labels)
    if checked is not None and (checked.multi_step or max_new_tokens == 1):
        return steps
    reference = generate_label_steps(model, input_ids, mask, max_new_tokens, labels)
    agree = steps_agree(steps, reference)
    _LEAN_CHECKED[model] = LeanCheck(
        lean_check_key(model, model_device(model)),
        "on" if agree else "off: differs from generate on a checked batch",
        multi_step=reference[0].shape[1] > 2)
    if agree:
        return steps
    logger.warning("label probabilities: the lean T5 decoder differs from generate on a "
                   "checked batch; generate is used for this model")
    return reference
