"""An exact shortcut for encoder classifiers whose head reads only the first token.

BERT-family sequence classifiers (BERT, RoBERTa, XLM-R) classify from the first position of the
last layer (`[CLS]`, `<s>`). The last layer's other positions feed nothing, so
`first_token_forward(model)` returns a forward that runs the embeddings and every layer but the
last exactly as the model's modules do, and the last layer for the first position only (its
query, attention over every key, its feed-forward), then the model's own head. The saving is
most of one layer: nearly half of a 2-layer test model, about 4% of roberta-large (24 layers).

With a single query the last layer need not project the keys and values of every position
(`_first_position_layer`). Per head h, with q the scaled query and x_j the layer's input at
position j, the score q . (W_k x_j + b_k) = (W_k^T q) . x_j + q . b_k, and the last term is the
same for every j, so the softmax drops it; the attended value sum_j p_j (W_v x_j + b_v) = W_v
(sum_j p_j x_j) + b_v, since the weights p_j sum to 1. Two small products per pair and head
replace two projections of every position: about 5% of the 2-layer test model's forward passes
on 2 CPU cores. That needs plain `torch.nn.Linear` keys and values (their weight is the whole
map: no hooks, no replaced forward); other modules (adapters, quantized or offloaded layers)
get the keys and values projected as the model does.

In the layers that run in full, heads of at most 32 on a CPU attend over keys and values
padded with masked positions to a multiple of 16 (`_padded_keys`): torch's CPU flash attention
runs such lengths faster (at head size 16 by 4-38%, at 32 by 2-12%; at 64, as in roberta-large,
it was mixed, so those heads are left alone). On the presence benchmark's 2-layer test model
that is about 7% of the CPU time.

The logits equal the model's forward up to float rounding (other kernels and matrix shapes);
callers check that on real inputs (`agrees`) before trusting the shortcut. A model outside the
supported shape gets `None` and the reason, never an approximation.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: class name -> (attribute of the encoder, whether the head is pooler + classifier)
SUPPORTED = {"BertForSequenceClassification": ("bert", True),
             "RobertaForSequenceClassification": ("roberta", False),
             "XLMRobertaForSequenceClassification": ("roberta", False)}
#: keys and values padded to a multiple of this many positions for small heads on a CPU
KEY_BLOCK = 16
#: the largest head size that gets the padding (measured faster at 16 and 32, not at 64)
KEY_BLOCK_HEAD_SIZE = 32
LAYER_PARTS = ("attention.self.query", "attention.self.key", "attention.self.value",
               "attention.output.dense", "attention.output.LayerNorm", "intermediate",
               "output.dense", "output.LayerNorm")


def _has_part(module: Any, dotted: str) -> bool:
    for name in dotted.split("."):
        module = getattr(module, name, None)
        if module is None:
            return False
    return True


def unsupported_reason(model: Any) -> str | None:
    """Why `model` cannot take the shortcut, or None when it can."""
    name = type(model).__name__
    if name not in SUPPORTED:
        return f"{name} is not one of {', '.join(sorted(SUPPORTED))}"
    if model.training:
        return "the model is in training mode (dropout)"
    config = model.config
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return "the encoder is configured as a decoder"
    if getattr(config, "position_embedding_type", "absolute") not in (None, "absolute"):
        return f"position_embedding_type {config.position_embedding_type!r} is not absolute"
    encoder_name, pooled = SUPPORTED[name]
    base = getattr(model, encoder_name, None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if base is None or not layers or getattr(base, "embeddings", None) is None:
        return f"{name} has no {encoder_name}.embeddings and {encoder_name}.encoder.layer"
    missing = [part for part in LAYER_PARTS
               if not all(_has_part(layer, part) for layer in layers)]
    if missing:
        return f"its layers lack {', '.join(missing)}"
    if pooled and getattr(base, "pooler", None) is None:
        return "the BERT classifier has no pooler"
    if config.hidden_size % config.num_attention_heads:
        return "hidden_size is not a multiple of num_attention_heads"
    return None


def _layer(layer: Any, queries: Any, keys: Any, mask: Any, heads: int) -> Any:
    """One BERT layer (post-norm) for the positions in `queries`, attending over `keys`."""
    import torch.nn.functional as F

    attention, batch = layer.attention, queries.shape[0]

    def split(states):  # (batch, length, hidden) -> (batch, heads, length, head size)
        return states.view(batch, states.shape[1], heads, -1).transpose(1, 2)

    key, value, mask = _padded_keys(split(attention.self.key(keys)),
                                    split(attention.self.value(keys)), mask)
    context = F.scaled_dot_product_attention(
        split(attention.self.query(queries)), key, value, attn_mask=mask)
    context = context.transpose(1, 2).reshape(batch, queries.shape[1], -1)
    attended = attention.output.LayerNorm(attention.output.dense(context) + queries)
    return layer.output.LayerNorm(layer.output.dense(layer.intermediate(attended)) + attended)


def _padded_keys(key: Any, value: Any, mask: Any) -> tuple[Any, Any, Any]:
    """Keys and values (batch, heads, length, head size) and the boolean key mask (batch, 1, 1,
    length) padded with masked positions to a multiple of KEY_BLOCK, for heads of at most
    KEY_BLOCK_HEAD_SIZE on a CPU; others as they are. A masked key gets no weight, so the
    attention is the same up to float rounding; torch's CPU flash attention is faster on such
    lengths (head size 16, 32 sequences: 127 keys 4.7 ms, 128 keys 3.2 ms)."""
    import torch.nn.functional as F

    padding = -key.shape[2] % KEY_BLOCK
    if not padding or not _pads_keys(key.device, key.shape[3]):
        return key, value, mask
    return (F.pad(key, (0, 0, 0, padding)), F.pad(value, (0, 0, 0, padding)),
            F.pad(mask, (0, padding), value=False))


def _pads_keys(device: Any, head_size: int) -> bool:
    """Whether `_padded_keys` pads the keys of heads of `head_size` on `device`."""
    return str(device).split(":")[0] == "cpu" and head_size <= KEY_BLOCK_HEAD_SIZE


def padded_key_block(model: Any, device: Any) -> int:
    """The multiple that the shortcut's full layers pad keys to for `model` on `device`
    (`_padded_keys`), for batch plans that count it (trainers.batch_plan); 1 where none are
    padded: an unsupported model, off a CPU, heads wider than KEY_BLOCK_HEAD_SIZE, or only a
    folded last layer."""
    if unsupported_reason(model) is not None:
        return 1
    config = model.config
    layers = getattr(model, SUPPORTED[type(model).__name__][0]).encoder.layer
    pads = _pads_keys(device, config.hidden_size // int(config.num_attention_heads))
    full = len(layers) > 1 or not _folds(layers[-1].attention.self)
    return KEY_BLOCK if pads and full else 1


def _plain_linear(module: Any) -> bool:
    """Whether `module` is a plain linear layer whose weight is its whole map: exactly
    `torch.nn.Linear`, no hooks and no replaced `forward` (as offloading wrappers install),
    its weight in memory (not on the "meta" device)."""
    import torch

    return (type(module) is torch.nn.Linear and not module._forward_hooks
            and not module._forward_pre_hooks and "forward" not in vars(module)
            and module.weight.device.type != "meta")


def _folds(attention: Any) -> bool:
    """Whether the key and value maps can be folded (plain linear layers)."""
    return _plain_linear(attention.key) and _plain_linear(attention.value)


def _first_position_layer(layer: Any, hidden: Any, mask: Any, heads: int) -> Any:
    """One BERT layer's output at the first position (batch, 1, hidden), its keys and values
    folded into the query and the attention weights (the module docstring has the algebra)."""
    import torch

    attention = layer.attention.self
    if not _folds(attention):
        return _layer(layer, hidden[:, :1], hidden, mask, heads)
    batch, _, width = hidden.shape
    size = width // heads
    first = hidden[:, :1]
    query = attention.query(first).view(batch, heads, size) * size ** -0.5
    folded = torch.einsum("bhs,hsw->bhw", query, attention.key.weight.view(heads, size, width))
    scores = torch.einsum("bhw,blw->bhl", folded, hidden)
    weights = torch.softmax(scores.masked_fill(~mask[:, 0], float("-inf")), dim=-1)
    mixed = torch.einsum("bhl,blw->bhw", weights, hidden)
    context = torch.einsum("bhw,hsw->bhs", mixed, attention.value.weight.view(heads, size, width))
    if attention.value.bias is not None:
        context = context + attention.value.bias.view(heads, size)
    context = context.reshape(batch, 1, width)
    attended = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + first)
    return layer.output.LayerNorm(layer.output.dense(layer.intermediate(attended)) + attended)


def first_token_forward(model: Any) -> tuple[Callable[..., Any] | None, str | None]:
    """(forward, None) for a supported classifier, where `forward(input_ids, attention_mask,
    token_type_ids=None)` returns the logits; (None, reason) otherwise."""
    reason = unsupported_reason(model)
    if reason is not None:
        return None, reason
    encoder_name, pooled = SUPPORTED[type(model).__name__]
    base = getattr(model, encoder_name)
    layers, heads = list(base.encoder.layer), int(model.config.num_attention_heads)

    def head(first):
        return model.classifier(base.pooler(first)) if pooled else model.classifier(first)

    def forward(input_ids, attention_mask, token_type_ids=None):
        hidden = base.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask = attention_mask.bool()[:, None, None, :]
        for layer in layers[:-1]:
            hidden = _layer(layer, hidden, hidden, mask, heads)
        return head(_first_position_layer(layers[-1], hidden, mask, heads))

    return forward, None


def agrees(first: Any, second: Any, tolerance: float = 1e-4) -> bool:
    """Whether two logit tensors agree within `tolerance` relative to their scale."""
    if first.shape != second.shape:
        return False
    scale = max(1.0, float(second.abs().max()))
    return float((first - second).abs().max()) <= tolerance * scale
