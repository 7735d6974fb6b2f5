"""Deciding a run's micro-batch plan (`micro_batches.MicroBatchPlan`), probing GPU memory
where the spec says `auto`.

The probe runs forward and backward passes on micro-batches of the run's longest examples
(source and target), with the optimizer's AdamW moments held in memory as they will be, and
takes the largest size that fits with a safety margin (`MARGIN`). Longest examples are the
worst case for a given padded size (attention grows faster than linearly), so every real
micro-batch of the plan fits as well. `gradient_checkpointing: auto` is on only when the
longest micro-batch asked for (or, with `auto` tokens, a single longest example) does not fit
without it. A probe changes no weights, gradients or random state.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from tasks.plumbing.errors import SumbenchError
from trainers.finetuning.micro_batches import MicroBatchPlan, largest_fitting
from trainers.finetuning.profiles import FinetuneSpec

logger = logging.getLogger(__name__)

#: the share of the largest fitting size a plan uses (fragmentation, longer real batches of
#: another step, the allocator's slack)
MARGIN = 0.85


def decide_plan(spec: FinetuneSpec, model: Any, examples: Any, device: Any, bf16: bool,
                probe=None) -> MicroBatchPlan:
    """The plan of a new run. `probe(tokens, checkpointing) -> bool` says whether a
    micro-batch of that many padded tokens of the longest examples fits (default: a real
    forward and backward pass on `device`; only CUDA devices are probed)."""
    tokens, checkpointing = spec.tokens_per_microbatch, spec.gradient_checkpointing
    count = spec.per_device_batch_size
    if tokens != "auto" and checkpointing != "auto":
        return MicroBatchPlan(tokens, count, checkpointing, "configured")
    if getattr(device, "type", str(device)) != "cuda" and probe is None:
        return cpu_fallback(spec, device)
    probe = remembered(probe or MemoryProbe(model, examples, device, bf16))
    longest = longest_tokens(examples)
    if tokens == "auto":
        return probed_tokens(spec, probe, longest)
    asked = tokens if tokens is not None else count * longest
    needed = not probe(asked, False)
    if needed and not probe(asked, True):
        field = "tokens_per_microbatch" if tokens else "per_device_batch_size"
        raise SumbenchError(f"a micro-batch of {asked} padded tokens of the longest examples "
                            f"does not fit on {device} even with gradient checkpointing: "
                            f"lower {field}")
    return MicroBatchPlan(tokens, count, needed,
                          f"configured; gradient checkpointing auto: "
                          f"{'needed' if needed else 'not needed'} for {asked} padded tokens")


def remembered(probe):
    """`probe` asked each (tokens, checkpointing) once: `auto` checkpointing and the size
    search both ask about one longest example, and each answer is a real pass on the GPU."""
    answers: dict[tuple[int, bool], bool] = {}

    def ask(tokens: int, checkpointing: bool) -> bool:
        if (tokens, checkpointing) not in answers:
            answers[tokens, checkpointing] = probe(tokens, checkpointing)
        return answers[tokens, checkpointing]
    return ask


def cpu_fallback(spec: FinetuneSpec, device: Any) -> MicroBatchPlan:
    checkpointing = spec.gradient_checkpointing is True
    source = (f"auto needs a CUDA device to probe; on {device}: per_device_batch_size "
              f"{spec.per_device_batch_size}, gradient checkpointing "
              f"{'on' if checkpointing else 'off'}")
    tokens = None if spec.tokens_per_microbatch == "auto" else spec.tokens_per_microbatch
    if tokens is not None:
        source = f"configured; gradient checkpointing auto: off on {device} (not probed)"
    else:
        logger.warning("micro-batch plan: %s", source)
    return MicroBatchPlan(tokens, spec.per_device_batch_size, checkpointing, source)


def probed_tokens(spec: FinetuneSpec, probe, longest: int) -> MicroBatchPlan:
    """The largest token budget that fits (without checkpointing when one longest example
    fits without it), times MARGIN, at most a whole step of longest examples."""
    most = spec.batch_size * longest
    checkpointing = spec.gradient_checkpointing
    if checkpointing == "auto":
        checkpointing = not probe(longest, False)
    examples = largest_fitting(lambda n: probe(n * longest, checkpointing), 1, spec.batch_size)
    if examples is None:
        raise SumbenchError(f"one longest example ({longest} padded tokens) does not fit on "
                            f"the GPU{'' if checkpointing else ' without gradient checkpointing'}"
                            f": lower max_input_tokens / max_output_tokens"
                            f"{'' if checkpointing else ' or set gradient_checkpointing'}")
    budget = most if examples == spec.batch_size else max(longest, int(examples * longest
                                                                        * MARGIN))
    return MicroBatchPlan(budget, spec.per_device_batch_size, bool(checkpointing),
                          f"probed: {examples} longest examples ({examples * longest} padded "
                          f"tokens) fit, {MARGIN:.0%} kept")


def longest_tokens(examples: Any) -> int:
    """Padded tokens of one example as long as the longest source plus the longest target."""
    return int(np.max(examples.source_lengths) + np.max(examples.target_lengths))


class MemoryProbe:
    """probe(tokens, checkpointing): does a micro-batch of the longest examples, that many
    padded tokens, fit on the device (with AdamW's moments allocated beside)? Only a CUDA
    device runs out of memory as an error to catch; elsewhere everything fits."""

    def __init__(self, model: Any, examples: Any, device: Any, bf16: bool):
        self.model, self.device, self.bf16 = model, device, bf16
        longest_source = int(np.argmax(examples.source_lengths))
        longest_target = int(np.argmax(examples.target_lengths))
        self.rows = (examples.input_ids[longest_source], examples.labels[longest_target])
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)

    def __call__(self, tokens: int, checkpointing: bool) -> bool:
        import torch

        rows = max(1, tokens // (len(self.rows[0]) + len(self.rows[1])))
        set_checkpointing(self.model, checkpointing)
        held = None
        cuda = self.device.type == "cuda"
        try:
            held = torch.empty(2 * self.trainable, dtype=torch.float32, device=self.device)
            with torch.random.fork_rng(devices=[self.device.index or 0] if cuda else []):
                loss = self.loss(rows)
                loss.backward()
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            del held
            self.model.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.empty_cache()

    def loss(self, rows: int):
        import torch

        source, target = self.rows
        config = self.model.config
        inputs = torch.tensor([source] * rows, device=self.device)
        decoder = torch.tensor([[config.decoder_start_token_id, *target[:-1]]] * rows,
                               device=self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.model(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                decoder_input_ids=decoder, use_cache=False).logits
        labels = torch.tensor([target] * rows, device=self.device)
        return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def set_checkpointing(model: Any, on: bool) -> None:
    """Gradient checkpointing (non-reentrant) on or off, on the model under a LoRA wrapper."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if not on:
        if hasattr(base, "activation_checkpointing_disable"):
            if base.is_activation_checkpointing:
                base.activation_checkpointing_disable()
        elif getattr(base, "is_gradient_checkpointing", False):
            base.gradient_checkpointing_disable()
        return
    enable = getattr(base, "activation_checkpointing_enable", None)
    if enable is not None:
        enable({"use_reentrant": False})
    else:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
