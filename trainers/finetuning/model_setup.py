"""The model a fine-tuning run starts from and what it trains with: the precision, the start
checkpoint (the user's own, so pickled weights are read), LoRA and gradient checkpointing, and
AdamW with its schedule (`trainers.finetuning.finetune` runs the loop)."""
from __future__ import annotations

import math

from trainers.finetuning.lora import apply_lora
from trainers.finetuning.memory_probe import set_checkpointing
from trainers.finetuning.profiles import FinetuneSpec, SpecError
from trainers.models.disk_cache import hub_commit as model_commit
from trainers.models.model_loading import (
    check_model_source,
    load_errors,
    load_failure,
    resolve_model_path,
)


def resolve_precision(precision: str, device) -> str:
    """"bf16" or "fp32": `auto` picks bf16 on GPUs that support it. fp16 is always refused."""
    import torch

    if precision == "fp16":
        raise SpecError("precision 'fp16' is not supported for T5 (float16 overflows)")
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise SpecError("precision 'bf16' was requested but this GPU does not support bfloat16")
    return precision


def load_finetuning_start(spec: FinetuneSpec):
    """(model in float32, tokenizer, provenance) of the checkpoint fine-tuning starts from: the
    user's own, so pickled weights (.bin) are read too (a model sumbench must not trust, such
    as a submitted one, goes through `model_loading.load_seq2seq_safetensors`). A local folder
    is loaded by its absolute path, which is what a LoRA adapter then records as its base."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    if not spec.model:
        raise SpecError("field 'model' is empty: give a hub id or a local folder (--model)")

    check_model_source(spec.model)
    source = resolve_model_path(spec.model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=spec.revision)
        model = AutoModelForSeq2SeqLM.from_pretrained(source, revision=spec.revision,
                                                      dtype=torch.float32)
    except load_errors() as error:
        raise load_failure(spec.model, error) from None
    if model.config.decoder_start_token_id is None:
        raise SpecError(f"model {spec.model} has no decoder_start_token_id (not seq2seq?)")
    commit = model_commit(spec.model, spec.revision)
    info = {"model": source, "revision": spec.revision, "commit": commit,
            "class": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters())}
    return model, tokenizer, info


def prepare_for_training(model, spec: FinetuneSpec, checkpointing: bool | None = None):
    """LoRA as the spec asks and gradient checkpointing as `checkpointing` says (None: the
    spec's, when it is a boolean; the run decides `auto` with its micro-batch plan); the
    model in train mode."""
    model.config.use_cache = False
    if spec.lora:
        model = apply_lora(model, spec)
    on = spec.gradient_checkpointing is True if checkpointing is None else checkpointing
    set_checkpointing(model, on)
    return model.train()


def decay_groups(model, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups of the trainable weights: `weight_decay` on matrices, none on
    biases and norms (empty groups left out)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


def build_optimizer(model, spec: FinetuneSpec, total_steps: int, device=None):
    """AdamW over the trainable weights (no decay on biases / norms; fused into one kernel on
    a CUDA device) and the LR schedule."""
    import torch
    from transformers import get_scheduler

    fused = getattr(device, "type", None) == "cuda"
    optimizer = torch.optim.AdamW(decay_groups(model, spec.weight_decay), lr=spec.learning_rate,
                                  **({"fused": True} if fused else {}))
    warmup = math.ceil(spec.warmup_ratio * total_steps)
    name = "constant_with_warmup" if spec.lr_scheduler == "constant" else spec.lr_scheduler
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=warmup,
                              num_training_steps=total_steps)
    return optimizer, scheduler
