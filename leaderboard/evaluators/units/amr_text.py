"""Text of AMR graphs from a seq2seq generator, as amrlib's `generate_t5wtense` runs one (its
`generate`, and the SCU-approximation authors' `generate_taged`, which feeds already tagged
one-line graphs): batches of 32 in input order, each input cut at the model's `max_in_len`,
greedy decoding to `max_out_len` tokens (the model config's
`task_specific_params.translation_amr_to_text`; 512 and 90 for t5wtense), special tokens
dropped."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainers.inference.generation import resolve_device, seq2seq_texts
from trainers.models.model_loading import load_seq2seq_safetensors

DEFAULT_LENGTHS = {"max_in_len": 512, "max_out_len": 90}
TASK = "translation_amr_to_text"


class AmrGenerator:
    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 32):
        self.model, self.tokenizer, self.batch_size = model.eval(), tokenizer, batch_size
        params = (getattr(model.config, "task_specific_params", None) or {}).get(TASK, {})
        self.max_in = int(params.get("max_in_len", DEFAULT_LENGTHS["max_in_len"]))
        self.max_out = int(params.get("max_out_len", DEFAULT_LENGTHS["max_out_len"]))

    def generate(self, graphs: Sequence[str], progress=None) -> list[str]:
        return seq2seq_texts(self.model, self.tokenizer, graphs, batch_size=self.batch_size,
                             max_input_tokens=self.max_in, max_length=self.max_out,
                             progress=progress)


def load_amr_generator(name: str, device: str = "auto") -> AmrGenerator:
    """A generator by folder or hub id (safetensors only)."""
    model, tokenizer = load_seq2seq_safetensors(name, "AMR generator")
    return AmrGenerator(model.to(resolve_device(device)), tokenizer)
