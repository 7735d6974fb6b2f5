"""Class probabilities read off the Yes/No tokens of a seq2seq model's generated output.

At a label position the probability of "Yes" is renormalised over {Yes, No}:
p = P(Yes) / (P(Yes) + P(No)), computed from the step's (processed) scores, which equals the
ratio of the two vocabulary-softmax probabilities. Which steps are label positions:

- rule "official" (the USB release's `predict_classes.py`): every generated step whose token
  is Yes or No, in order. A windowed input with `n_lines` lines gets its list truncated or
  padded with 0.0 to `n_lines` (what the official scorer does per window).
- rule "positional": inputs without lines: the first generated step; inputs with `n_lines`
  lines: the step right after each generated `SENT{k}` marker, for k in 0..n_lines-1; a line
  whose marker was never generated gets 0.0.

Greedy decoding (the release's setting for labels) runs `generate` with a recorder of each
step's Yes/No probability (`YesNoRecorder`); beam search reads the scores of the beams kept.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.plumbing.errors import SumbenchError
from trainers.inference.generation import (
    EncodedSource,
    GeneratedRow,
    cut_generated,
    decode_texts,
    encode_sources,
    eos_token_ids,
    in_input_order,
    iter_batches,
    model_device,
    pad_batch,
    prepare_for_inference,
    run_generate,
)
from trainers.inference.label_tokens import (
    LabelTokens,
    YesNoRecorder,
    label_token_ids,
    renormalised_yes,
)
from trainers.inference.predict_spec import LABEL_RULES, PredictSpec
from trainers.models.tiny import build_tiny_t5

__all__ = ["LabelTokens", "LabelValues", "YesNoRecorder", "label_token_ids", "renormalised_yes",
           "official_label_steps", "marker_label_steps", "greedy_label_steps",
           "fit_to_lines", "label_values", "needs_full_generation", "generate_batch_labels",
           "beam_step_probabilities", "label_probabilities", "label_batch",
           "official_label_probabilities", "build_tiny_labeler"]


MARKER_AT_END = re.compile(r"SENT(\d+)\s*$")


@dataclass(frozen=True)
class LabelValues:
    """Probabilities for one input, and how many label positions were missing or extra."""
    values: tuple[float, ...]
    steps: tuple[int | None, ...]
    missing: int = 0
    extra: int = 0


# ---- label positions (pure functions) ---------------------------------------------------
def official_label_steps(token_ids: Sequence[int], labels: LabelTokens) -> list[int]:
    """Steps whose generated token is Yes or No."""
    return [step for step, token in enumerate(token_ids)
            if token in (labels.yes_id, labels.no_id)]


def marker_label_steps(tokenizer, token_ids: Sequence[int]) -> dict[int, int]:
    """{k: step} for the first step generated right after each `SENT{k}` marker.

    A step continues the marker (not a label position) when its text starts with a digit
    or is only whitespace.
    """
    prefixes = tokenizer.batch_decode([list(token_ids[:end]) for end in range(len(token_ids) + 1)],
                                      skip_special_tokens=False, clean_up_tokenization_spaces=False)
    steps: dict[int, int] = {}
    for step in range(len(token_ids)):
        marker = MARKER_AT_END.search(prefixes[step])
        if marker is None:
            continue
        token_text = prefixes[step + 1][len(prefixes[step]):]
        if not token_text.strip() or token_text.lstrip()[:1].isdigit():
            continue
        steps.setdefault(int(marker.group(1)), step)
    return steps


def fit_to_lines(values: list[float], steps: list[int | None], n_lines: int) -> LabelValues:
    """Truncate, or pad with 0.0, to one value per line (the official scorer's rule)."""
    missing, extra = max(0, n_lines - len(values)), max(0, len(values) - n_lines)
    padded = (values + [0.0] * missing)[:n_lines]
    return LabelValues(tuple(padded), tuple((steps + [None] * missing)[:n_lines]), missing, extra)


def label_values(row: GeneratedRow, n_lines: int | None, rule: str, labels: LabelTokens,
                 tokenizer) -> LabelValues:
    """The label probabilities of one generated row under `rule`."""
    step_p = row.step_probabilities or ()
    if rule == "official":
        steps = official_label_steps(row.token_ids, labels)
        values = [step_p[step] for step in steps]
        if n_lines is None:
            return LabelValues(tuple(values), tuple(steps))
        return fit_to_lines(values, list(steps), n_lines)
    if rule != "positional":
        raise SumbenchError(f"unknown label rule {rule!r}; expected one of {LABEL_RULES}")
    if n_lines is None:
        present = len(step_p) > 0
        return LabelValues((step_p[0],) if present else (0.0,), (0 if present else None,),
                           missing=0 if present else 1)
    markers = marker_label_steps(tokenizer, row.token_ids)
    found = [markers.get(k) for k in range(n_lines)]
    values = tuple(step_p[step] if step is not None else 0.0 for step in found)
    return LabelValues(values, tuple(found), missing=sum(step is None for step in found))


# ---- batched computation ------------------------------------------------------------------
def needs_full_generation(n_lines: Sequence[int | None], rule: str) -> bool:
    """The positional rule without lines only needs the first step; all else generates."""
    return rule == "official" or any(count is not None for count in n_lines)


def generate_batch_labels(model, tokenizer, batch: Sequence[EncodedSource], spec: PredictSpec,
                          labels: LabelTokens, max_new_tokens: int) -> list[GeneratedRow]:
    """Generate one batch recording the Yes-vs-No probability at every step of each row."""
    input_ids, mask = pad_batch(batch, tokenizer.pad_token_id, model_device(model))
    if spec.label_num_beams == 1:
        sequences, step_p = greedy_label_steps(model, input_ids, mask, max_new_tokens, labels)
    else:
        output = run_generate(model, input_ids, mask, max_new_tokens=max_new_tokens,
                              num_beams=spec.label_num_beams, output_scores=True)
        sequences, step_p = output.sequences, beam_step_probabilities(output, labels)
    eos_ids = eos_token_ids(model, tokenizer)
    generated = [cut_generated(row.tolist(), eos_ids) for row in sequences]
    texts = decode_texts(tokenizer, generated, spec.clean_up_tokenization_spaces)
    return [GeneratedRow(row.index, ids, text, tuple(step_p[position][:len(ids) + 1]))
            for position, (row, ids, text) in enumerate(zip(batch, generated, texts))]


def greedy_label_steps(model, input_ids, mask, max_new_tokens: int, labels: LabelTokens):
    """Greedy `generate` with a recorder: (sequences, Yes-probabilities per row and step)."""
    from transformers import LogitsProcessorList

    recorder = YesNoRecorder(labels)
    output = run_generate(model, input_ids, mask, max_new_tokens=max_new_tokens, num_beams=1,
                          logits_processor=LogitsProcessorList([recorder]))
    return output.sequences, recorder.per_row()


def beam_step_probabilities(output, labels: LabelTokens) -> list[list[float]]:
    """Per returned sequence, the probability at each step taken from the beam it came from."""
    rows = []
    for beam_row in output.beam_indices.tolist():
        beams = [beam for beam in beam_row if beam >= 0]
        rows.append([float(renormalised_yes(output.scores[step][beam], labels))
                     for step, beam in enumerate(beams)])
    return rows


def label_probabilities(model, tokenizer, sources: Sequence[str], spec: PredictSpec,
                        n_lines: Sequence[int | None] | None = None) -> list[list[float]]:
    """Yes-probabilities per source under `spec.label_rule`, in input order.

    `n_lines[i]` is the number of labelled lines of source i (None: one label per input).
    """
    prepare_for_inference(model, spec)
    n_lines = list(n_lines) if n_lines is not None else [None] * len(sources)
    labels = label_token_ids(tokenizer)
    encoded = encode_sources(tokenizer, sources, spec.max_input_tokens)
    rows: list[GeneratedRow] = []
    for batch_rows in iter_batches(encoded, spec.batch_size,
                                   lambda batch: label_batch(model, tokenizer, batch, spec, labels,
                                                             [n_lines[r.index] for r in batch]),
                                   description="label probabilities"):
        rows.extend(batch_rows)
    return [list(label_values(row, n_lines[row.index], spec.label_rule, labels, tokenizer).values)
            for row in in_input_order(rows, len(sources))]


def label_batch(model, tokenizer, batch: Sequence[EncodedSource], spec: PredictSpec,
                labels: LabelTokens, n_lines: Sequence[int | None]) -> list[GeneratedRow]:
    """One batch, generating only one step when the rule needs no more."""
    max_new = spec.max_new_tokens if needs_full_generation(n_lines, spec.label_rule) else 1
    return generate_batch_labels(model, tokenizer, batch, spec, labels, max_new)


# ---- the official one-example-at-a-time way (reference for tests and benchmarks) ----------
def official_label_probabilities(model, tokenizer, source: str, spec: PredictSpec) -> list[float]:
    """One `generate(output_scores=True)` call for one input; at every generated Yes/No token
    take the vocabulary softmax (float32) and renormalise over {Yes, No}."""
    import torch

    labels = label_token_ids(tokenizer)
    encoded = tokenizer(source, return_tensors="pt", truncation=True,
                        max_length=spec.max_input_tokens)
    with torch.inference_mode():
        output = model.generate(encoded.input_ids.to(model_device(model)),
                                max_new_tokens=spec.max_new_tokens, num_beams=spec.label_num_beams,
                                do_sample=False, return_dict_in_generate=True, output_scores=True)
    tokens = output.sequences[0][1:].tolist()
    scores = list(output.scores)
    if getattr(output, "beam_indices", None) is not None:
        beams = [beam for beam in output.beam_indices[0].tolist() if beam >= 0]
        scores = [scores[step][beam:beam + 1] for step, beam in enumerate(beams)]
    result = []
    for token, step_scores in zip(tokens, scores):
        if token in (labels.yes_id, labels.no_id):
            probs = torch.softmax(step_scores.squeeze(0).float(), dim=0)
            yes, no = probs[labels.yes_id].item(), probs[labels.no_id].item()
            result.append(yes / (yes + no))
    return result


# ---- a tiny model with known label behaviour (tests and benchmarks) -------------------
def build_tiny_labeler(tokenizer, sources: Sequence[str], seed: int = 0,
                       stop_after_label: bool = True, **shape):
    """A `trainers.models.tiny` T5 edited so that, on `sources`, its first generated token is Yes or
    No (which one, and how sure, depends on the input) and, with `stop_after_label`, the next
    one is EOS, like a fine-tuned FAC model; without it, it repeats its label to the end.
    `shape`: `build_tiny_t5`'s size options (default the tiny test shape).

    The edit: output head untied from the embeddings and shrunk (moderate logits),
    cross-attention amplified (outputs depend on the input), Yes/No given one input
    embedding, their output rows set along the mean first-step state (so they win) plus/minus
    its main direction of variation (so inputs split), EOS along the part of the second-step
    states outside the span of the first-step states (so it wins only at step two).
    """
    import torch

    model = build_tiny_t5(tokenizer, seed=seed, **shape)
    labels, pad = label_token_ids(tokenizer), tokenizer.pad_token_id
    with torch.no_grad():
        model.lm_head.weight = torch.nn.Parameter(model.shared.weight.detach() * 0.05)
        for block in model.decoder.block:
            block.layer[1].EncDecAttention.o.weight.mul_(20.0)
        embeddings, heads = model.shared.weight, model.lm_head.weight
        shared = (embeddings[labels.yes_id] + embeddings[labels.no_id]) / 2
        embeddings[labels.yes_id], embeddings[labels.no_id] = shared, shared
        first, second = _decoder_states(model, tokenizer, sources, [pad, labels.yes_id])
        mean = first.mean(0)
        direction = torch.linalg.svd(first - mean, full_matrices=False).Vh[0]
        direction = direction - (direction @ mean) / (mean @ mean) * mean
        direction = 2.0 * direction / ((first - mean) @ direction).std()
        heads[labels.yes_id] = 5.0 * mean / (mean @ mean) + direction
        heads[labels.no_id] = 5.0 * mean / (mean @ mean) - direction
        if stop_after_label:
            heads[tokenizer.eos_token_id] = _stop_row(first, second, heads)
    return model


def _stop_row(first, second, heads):
    """An output row that is ~0 on the first-step states and beats every other row by 10 on
    the second-step states."""
    import torch

    _, singular, basis = torch.linalg.svd(first, full_matrices=False)
    basis = basis[:int((singular > 1e-6 * singular[0]).sum())]
    outside = second.mean(0) - basis.T @ (basis @ second.mean(0))
    unit = outside / (outside @ outside)
    rival = (second @ heads.T).max()
    return unit * (rival + 10.0) / (second @ unit).min()


def _decoder_states(model, tokenizer, sources: Sequence[str], decoder_ids: list[int]):
    """Final decoder states at each of `decoder_ids`' positions: one [n, d] tensor per step."""
    import torch

    encoded = tokenizer(list(sources), return_tensors="pt", padding=True)
    decoder_input = torch.tensor([decoder_ids] * len(sources))
    states = model(**encoded, decoder_input_ids=decoder_input,
                   output_hidden_states=True).decoder_hidden_states[-1]
    return [states[:, step] for step in range(len(decoder_ids))]
