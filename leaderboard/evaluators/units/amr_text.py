"""Text of AMR graphs from a seq2seq generator, as amrlib's `generate_t5wtense` runs one (its
`generate`, and the SCU-approximation authors' `generate_taged`, which feeds already tagged
one-line graphs): batches of 32 in input order, each input cut at the model's `max_in_len`,
greedy decoding to `max_out_len` tokens (the model config's
`task_specific_params.translation_amr_to_text`; 512 and 90 for t5wtense), special tokens
dropped."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainers.inference.generation import resolve_device
from trainers.models.model_loading import load_seq2seq

DEFAULT_LENGTHS = {"max_in_len": 512, "max_out_len": 90}
TASK = "translation_amr_to_text"


class AmrGenerator:
    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 32):
        self.model, self.tokenizer, self.batch_size = model.eval(), tokenizer, batch_size
        params = (getattr(model.config, "task_specific_params", None) or {}).get(TASK, {})
        self.max_in = int(params.get("max_in_len", DEFAULT_LENGTHS["max_in_len"]))
        self.max_out = int(params.get("max_out_len", DEFAULT_LENGTHS["max_out_len"]))

    def generate(self, graphs: Sequence[str], progress=None) -> list[str]:
        import torch

        texts: list[str] = []
        device = next(self.model.parameters()).device
        for start in range(0, len(graphs), self.batch_size):
            batch = list(graphs[start:start + self.batch_size])
            encoded = self.tokenizer(batch, padding=True, truncation=True,
                                     max_length=self.max_in, return_tensors="pt")
            with torch.no_grad():
                out = self.model.generate(input_ids=encoded["input_ids"].to(device),
                                          attention_mask=encoded["attention_mask"].to(device),
                                          max_length=self.max_out, num_beams=1,
                                          do_sample=False)
            texts.extend(self.tokenizer.decode(ids, skip_special_tokens=True) for ids in out)
            if progress is not None:
                progress.update(len(batch))
        return texts


def load_amr_generator(name: str, device: str = "auto") -> AmrGenerator:
    """A generator by folder or hub id (safetensors only)."""
    model, tokenizer = load_seq2seq(name, "AMR generator")
    return AmrGenerator(model.to(resolve_device(device)), tokenizer)
