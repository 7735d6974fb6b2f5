"""The device path of a training step: host-to-device copies that do not wait, and which
attention kernel the model's attention runs on.

- `to_device`: on a CUDA device, a batch is copied from pinned host memory without blocking,
  so the host collates the next micro-batch while the device computes (a copy from pageable
  memory makes the host wait for the device every micro-batch).
- `attention_report`: the attention implementation the model was built with (T5 in
  transformers uses PyTorch's scaled_dot_product_attention, "sdpa", unless asked otherwise)
  and the kernels PyTorch's dispatcher picks for T5's two calls: self-attention with an
  additive float bias that needs a gradient (the relative position bias) and cross-attention
  with a padding mask only. Flash attention takes neither on CUDA, so there it is usually the
  memory-efficient kernel; on a CPU, the math path for self-attention (its bias gradient) and
  PyTorch's flash implementation for CPUs for cross-attention.
"""
from __future__ import annotations

from typing import Any


def to_device(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    """The batch's tensors on `device` (pinned and non-blocking on CUDA)."""
    if getattr(device, "type", None) != "cuda":
        return {key: value.to(device) for key, value in batch.items()}
    return {key: value.pin_memory().to(device, non_blocking=True)
            for key, value in batch.items()}


def attention_report(model: Any, device: Any, bf16: bool) -> dict[str, Any]:
    """{"implementation": the model's; "self_attention": SDPA's kernel for T5's self-attention
    (an additive float bias that needs a gradient: the relative position bias),
    "cross_attention": for its cross-attention (a padding mask only); or None, with a "note"
    saying why, when the model does not use SDPA or PyTorch does not say}."""
    import torch

    config = getattr(model, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    report: dict[str, Any] = {"implementation": implementation, "self_attention": None,
                              "cross_attention": None}
    if implementation != "sdpa":
        report["note"] = "the model's attention is not PyTorch's SDPA"
        return report
    heads = int(getattr(config, "num_heads", 8) or 8)
    head_dim = int(getattr(config, "d_kv", 64) or 64)
    dtype = torch.bfloat16 if bf16 else torch.float32
    try:
        from torch.nn.attention import SDPBackend

        query = torch.zeros(2, heads, 64, head_dim, dtype=dtype, device=device,
                            requires_grad=True)
        for name, bias_grad in (("self_attention", True), ("cross_attention", False)):
            bias = torch.zeros(2, heads, 64, 64, dtype=dtype, device=device,
                               requires_grad=bias_grad)
            choice = torch._fused_sdp_choice(query, query, query, bias, 0.0, False, scale=1.0)
            report[name] = SDPBackend(choice).name.lower()
    except (AttributeError, RuntimeError, TypeError, ValueError) as error:
        report["note"] = f"PyTorch does not say its SDPA choice here ({type(error).__name__})"
    return report
