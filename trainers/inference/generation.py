"""Batched seq2seq generation: tokenize, sort by length, generate, cut at EOS, decode.

Rows are computed independently of their batch companions (padding is masked), so results do
not depend on the batch size; batches are formed over length-sorted inputs to limit padding
and the original order is restored by index.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError
from trainers.inference.predict_spec import DEVICES, PredictSpec, is_device_name
from trainers.models.padding import right_padded, row_mask


@dataclass(frozen=True)
class EncodedSource:
    """One tokenized model input: `index` into the caller's list, ids after truncation."""
    index: int
    input_ids: tuple[int, ...]
    source_tokens: int

    @property
    def truncated(self) -> bool:
        return self.source_tokens > len(self.input_ids)


@dataclass(frozen=True)
class GeneratedRow:
    """What one input produced: generated token ids (no start token, cut before EOS), the
    decoded text, and when labels were requested the Yes-vs-No probability at every step."""
    index: int
    token_ids: tuple[int, ...]
    text: str
    step_probabilities: tuple[float, ...] | None = None


def encode_sources(tokenizer, sources: Sequence[str], max_input_tokens: int,
                   indices: Sequence[int] | None = None) -> list[EncodedSource]:
    """Tokenize with special tokens, truncating to `max_input_tokens` (EOS kept at the end)."""
    indices = list(range(len(sources))) if indices is None else list(indices)
    if not sources:
        return []
    full = tokenizer(list(sources), truncation=False, verbose=False)["input_ids"]
    long = [position for position, ids in enumerate(full) if len(ids) > max_input_tokens]
    cut = dict(zip(long, tokenizer([sources[position] for position in long], truncation=True,
                                   max_length=max_input_tokens)["input_ids"])) if long else {}
    return [EncodedSource(index, tuple(cut.get(position, ids)), len(ids))
            for position, (index, ids) in enumerate(zip(indices, full))]


def length_sorted_batches(encoded: Sequence[EncodedSource],
                          batch_size: int) -> list[list[EncodedSource]]:
    """Longest inputs first (ties keep input order), cut into batches of `batch_size`."""
    order = sorted(range(len(encoded)), key=lambda i: (-len(encoded[i].input_ids), i))
    ordered = [encoded[i] for i in order]
    return [ordered[start:start + batch_size] for start in range(0, len(ordered), batch_size)]


def model_device(model):
    """The device of the model's (first) weights, where its inputs must go."""
    return next(model.parameters()).device


def resolve_device(name: str) -> str:
    """"auto" means the first CUDA device when there is one, else the CPU; another name must
    be one torch can use here (a SumbenchError names what is missing)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not is_device_name(name):
        raise SumbenchError(f"device must be {DEVICES}; got {name!r}")
    kind, _, index = name.partition(":")
    backend = {"cuda": torch.cuda, "xpu": getattr(torch, "xpu", None),
               "mps": getattr(torch.backends, "mps", None)}.get(kind)
    if kind != "cpu" and (backend is None or not backend.is_available()):
        raise SumbenchError(f"device {name!r} was asked for but torch sees no {kind} device")
    if index and kind != "cpu":
        count = getattr(backend, "device_count", lambda: 1)()
        if int(index) >= count:
            raise SumbenchError(f"device {name!r}: torch sees {count} {kind} device(s)")
    return name


def prepare_for_inference(model, spec: PredictSpec):
    """Put the model in evaluation mode on the spec's device and dtype (in place)."""
    import torch

    dtype = getattr(torch, spec.dtype)
    model.eval()
    model.to(device=resolve_device(spec.device), dtype=dtype)
    return model


def pad_batch(batch: Sequence[EncodedSource], pad_id: int, device) -> tuple[Any, Any]:
    """Right-padded input ids and attention mask tensors on `device`."""
    import torch

    rows = [row.input_ids for row in batch]
    return (torch.from_numpy(right_padded(rows, pad_id)).to(device),
            torch.from_numpy(row_mask(rows)).to(device))


def eos_token_ids(model, tokenizer) -> set[int]:
    """Every id that ends generation for this model (generation config, else tokenizer)."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    return set(eos) if isinstance(eos, (list, tuple)) else {int(eos)}


def cut_generated(sequence: Sequence[int], eos_ids: set[int]) -> tuple[int, ...]:
    """Drop the decoder start token and everything from the first EOS on."""
    generated = list(sequence)[1:]
    for position, token in enumerate(generated):
        if token in eos_ids:
            return tuple(generated[:position])
    return tuple(generated)


#: the decode-time space clean-up that transformers 4.x tokenizers applied by default (the
#: USB release decoded its outputs that way); applied here whatever the tokenizer's type
CLEAN_UP_REPLACEMENTS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                         (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                         (" 're", "'re"))


def clean_up_spaces(text: str) -> str:
    for old, new in CLEAN_UP_REPLACEMENTS:
        text = text.replace(old, new)
    return text


def decode_texts(tokenizer, token_ids: Sequence[Sequence[int]], clean_up: bool) -> list[str]:
    """Decode as the official release did: special tokens kept, spaces cleaned up if asked."""
    texts = tokenizer.batch_decode([list(ids) for ids in token_ids], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    return [clean_up_spaces(text) for text in texts] if clean_up else texts


def run_generate(model, input_ids, attention_mask, *, max_new_tokens: int, num_beams: int,
                 logits_processor=None, output_scores: bool = False):
    """One deterministic `model.generate` call (greedy or beam search) returning a dict."""
    import torch

    kwargs: dict[str, Any] = {}
    if logits_processor is not None:
        kwargs["logits_processor"] = logits_processor
    with torch.inference_mode():
        return model.generate(input_ids=input_ids, attention_mask=attention_mask,
                              max_new_tokens=max_new_tokens, num_beams=num_beams,
                              do_sample=False, return_dict_in_generate=True,
                              output_scores=output_scores, **kwargs)


def generate_batch_texts(model, tokenizer, batch: Sequence[EncodedSource],
                         spec: PredictSpec) -> list[GeneratedRow]:
    """Generate free text for one batch."""
    input_ids, mask = pad_batch(batch, tokenizer.pad_token_id, model_device(model))
    output = run_generate(model, input_ids, mask, max_new_tokens=spec.max_new_tokens,
                          num_beams=spec.num_beams)
    eos_ids = eos_token_ids(model, tokenizer)
    generated = [cut_generated(row.tolist(), eos_ids) for row in output.sequences]
    texts = decode_texts(tokenizer, generated, spec.clean_up_tokenization_spaces)
    return [GeneratedRow(row.index, ids, text)
            for row, ids, text in zip(batch, generated, texts)]


BatchRunner = Callable[[Sequence[EncodedSource]], list[GeneratedRow]]


def iter_batches(encoded: Sequence[EncodedSource], batch_size: int, run: BatchRunner,
                 description: str = "generating") -> Iterator[list[GeneratedRow]]:
    """Run `run` over length-sorted batches with a progress bar; yields each batch's rows."""
    from tqdm.auto import tqdm

    batches = length_sorted_batches(encoded, batch_size)
    with tqdm(total=len(encoded), desc=description, unit="ex", disable=None) as bar:
        for batch in batches:
            rows = run(batch)
            bar.update(len(batch))
            yield rows


def in_input_order(rows: Sequence[GeneratedRow], count: int) -> list[GeneratedRow]:
    by_index = {row.index: row for row in rows}
    return [by_index[index] for index in range(count)]


def generate_texts(model, tokenizer, sources: Sequence[str], spec: PredictSpec) -> list[str]:
    """Generated text for each source, in input order (batched, length-sorted)."""
    prepare_for_inference(model, spec)
    encoded = encode_sources(tokenizer, sources, spec.max_input_tokens)
    rows = [row for batch_rows in iter_batches(
        encoded, spec.batch_size, lambda batch: generate_batch_texts(model, tokenizer, batch, spec))
        for row in batch_rows]
    return [row.text for row in in_input_order(rows, len(sources))]


def seq2seq_output_batches(model, tokenizer, inputs: Sequence[str], *, batch_size: int,
                           max_input_tokens: int | None = None, length_sorted: bool = False,
                           num_beams: int = 1, progress=None,
                           **generate_kwargs) -> Iterator[tuple[list[int], Any]]:
    """`model.generate` (no sampling; greedy unless `num_beams` > 1) over batches of `inputs`:
    yields (the batch's positions in `inputs`, generate's output). Inputs are cut at
    `max_input_tokens` (None: never cut) and batched in input order or, `length_sorted`,
    shortest first (ties in input order); the tokenizer pads each batch to its longest.
    `progress.update(size)` follows each batch; `generate_kwargs` go to `model.generate`."""
    import torch

    if not inputs:
        return
    cut = {} if max_input_tokens is None else {"truncation": True,
                                                 "max_length": max_input_tokens}
    ids = tokenizer(list(inputs), **cut)["input_ids"]
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i)) if length_sorted \
        else list(range(len(ids)))
    device = model_device(model)
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        batch = tokenizer.pad({"input_ids": [ids[i] for i in chosen]}, return_tensors="pt")
        with torch.inference_mode():
            output = model.generate(input_ids=batch["input_ids"].to(device),
                                    attention_mask=batch["attention_mask"].to(device),
                                    num_beams=num_beams, do_sample=False, **generate_kwargs)
        yield chosen, output
        if progress is not None:
            progress.update(len(chosen))


def seq2seq_texts(model, tokenizer, inputs: Sequence[str], *, batch_size: int,
                  decode: Callable[[Any], list[str]] | None = None, **options) -> list[str]:
    """The generated text of each input, in input order (`seq2seq_output_batches` runs the
    model, `options` are its). `decode(sequences)` makes the texts; by default the tokenizer's
    `batch_decode` without special tokens (its own space clean-up)."""
    decode = decode or (lambda sequences: tokenizer.batch_decode(sequences,
                                                                 skip_special_tokens=True))
    texts: list[str] = [""] * len(inputs)
    for chosen, output in seq2seq_output_batches(model, tokenizer, inputs,
                                                 batch_size=batch_size, **options):
        for index, text in zip(chosen, decode(getattr(output, "sequences", output))):
            texts[index] = text
    return texts
