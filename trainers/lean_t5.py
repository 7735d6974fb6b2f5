"""Greedy decoding of T5 without `generate`: the same computation in fewer, larger operations.

For label probabilities (FAC and the other Yes/No tasks decode greedily) `model.generate`
spends about a third of a batch outside the arithmetic on a small model: its set-up,
per-layer masks built from the position bias (`where`), an unfused tanh GELU and the cache
classes. `LeanT5` runs the same T5 computation from the model's own modules and weights:
the position bias and padding mask are combined once per batch instead of once per layer,
the decoder keeps its keys and values in plain tensors, cross-attention keys and values are
computed once, and the tanh GELU is torch's fused kernel. Greedy steps follow `generate`:
argmax of the raw logits, finished rows continue with the pad token, stop when every row has
met an end token or after `max_new_tokens`.

Results equal `generate`'s up to float rounding (other kernels, same formulas); callers check
that on a batch (`trainers.greedy_labels`) before trusting it, and again whenever `check_key`
changes. Models outside the supported shape, and generation configs that would add logits
processors, get `None` and the reason, never an approximation.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

#: model classes with the T5 layout (relative position bias in the first block only). mT5 has
#: the layout too but its own rule for scaling the decoder output, so it is left to generate.
SUPPORTED = ("T5ForConditionalGeneration",)
#: generation settings that do not change greedy decoding (everything else may add a logits
#: processor or a stopping rule that this decoder does not have)
NEUTRAL_GENERATION_KEYS = frozenset({
    "use_cache", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
    "return_dict_in_generate", "pad_token_id", "bos_token_id", "eos_token_id",
    "decoder_start_token_id", "transformers_version", "max_length", "max_new_tokens",
    "temperature", "top_k", "top_p", "length_penalty", "early_stopping"})
#: settings that are neutral at these values (older configs write them out)
NEUTRAL_VALUES = {"do_sample": False, "num_beams": 1, "num_beam_groups": 1,
                  "num_return_sequences": 1, "repetition_penalty": 1.0, "min_length": 0,
                  "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
                  "diversity_penalty": 0.0, "renormalize_logits": False,
                  "remove_invalid_values": False, "typical_p": 1.0, "epsilon_cutoff": 0.0,
                  "eta_cutoff": 0.0}


@functools.lru_cache(maxsize=1)
def _default_generation_settings() -> dict:
    from transformers import GenerationConfig

    return dict(vars(GenerationConfig()))


def _generation_reason(model: Any) -> str | None:
    config, defaults = model.generation_config, _default_generation_settings()
    if (getattr(config, "num_beams", None) or 1) != 1 or getattr(config, "do_sample", None):
        return "the generation config asks for beam search or sampling"
    changed = sorted(key for key, value in vars(config).items()
                     if not key.startswith("_") and key not in NEUTRAL_GENERATION_KEYS
                     and value != defaults.get(key)
                     and not (key in NEUTRAL_VALUES and value == NEUTRAL_VALUES[key]))
    if changed:
        return f"the generation config sets {', '.join(changed)}"
    start = decoder_start_id(config)
    if not isinstance(start, int):
        return f"the decoder start token (or bos_token_id) is {start!r}, not one token id"
    return None


def decoder_start_id(generation_config: Any) -> Any:
    """The decoder's first token as `generate` picks it: decoder_start_token_id, else bos."""
    start = generation_config.decoder_start_token_id
    return start if start is not None else generation_config.bos_token_id


def _scales_output(config: Any) -> bool:
    """Whether the decoder output is scaled by d_model ** -0.5 before the LM head
    (`scale_decoder_outputs`; transformers 4 scaled exactly when embeddings were tied)."""
    scale = getattr(config, "scale_decoder_outputs", None)
    return bool(getattr(config, "tie_word_embeddings", False) if scale is None else scale)


def check_key(model: Any, device: Any) -> tuple:
    """What a check of the decoder against `generate` holds for: the device, the decoding
    token ids and output scaling, and which module objects make up the model."""
    generation = model.generation_config
    eos = generation.eos_token_id
    return (str(device), decoder_start_id(generation), tuple(eos) if isinstance(eos, list)
            else eos, generation.pad_token_id, _scales_output(model.config),
            tuple(id(module) for module in model.modules()))


def unsupported_reason(model: Any) -> str | None:
    """Why `model` cannot be decoded by `LeanT5`, or None when it can."""
    import torch

    name = type(model).__name__
    if name not in SUPPORTED:
        return f"{name} is not one of {', '.join(SUPPORTED)}"
    if model.training:
        return "the model is in training mode (dropout)"
    if model.dtype != torch.float32:
        return f"the model is in {model.dtype}, not float32"
    for stack in (model.encoder, model.decoder):
        attentions = [block.layer[0].SelfAttention for block in stack.block]
        if not attentions or not attentions[0].has_relative_attention_bias or any(
                attention.has_relative_attention_bias for attention in attentions[1:]):
            return "the position bias is not in the first block alone (not the T5 layout)"
    if getattr(model.config, "_attn_implementation", "eager") not in ("eager", "sdpa"):
        return f"attention implementation {model.config._attn_implementation!r}"
    return _generation_reason(model)


def _fused_activation(module: Any) -> Callable[[Any], Any]:
    """torch's fused tanh GELU for transformers' unfused one; any other activation as is."""
    import torch.nn.functional as F

    if type(module).__name__ == "NewGELUActivation":
        return lambda states: F.gelu(states, approximate="tanh")
    return module


def _rms_norm(norm: Any, states: Any) -> Any:
    """T5LayerNorm: scale by the root mean square (float32 variance), no mean, no bias."""
    import torch

    variance = states.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return norm.weight * (states * torch.rsqrt(variance + norm.variance_epsilon))


class LeanT5:
    """Encoder and greedy decoder for a supported T5 (see `unsupported_reason`)."""

    def __init__(self, model: Any):
        self.model, config = model, model.config
        self.heads = int(config.num_heads)
        self.scale_output = _scales_output(config)
        self.d_model = int(config.d_model)
        generation = model.generation_config
        self.start_id = decoder_start_id(generation)
        eos = generation.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        pad = generation.pad_token_id
        self.pad_id = pad if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)

    # ---- pieces --------------------------------------------------------------------------
    def _split(self, states: Any) -> Any:  # (batch, length, inner) -> (batch, heads, length, d)
        batch, length, _ = states.shape
        return states.view(batch, length, self.heads, -1).transpose(1, 2)

    def _attend(self, attention: Any, normed: Any, keys: Any, values: Any, mask: Any) -> Any:
        import torch.nn.functional as F

        queries = self._split(attention.q(normed))
        context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=1.0)
        batch, _, length, _ = context.shape
        return attention.o(context.transpose(1, 2).reshape(batch, length, -1))

    def _keys_values(self, attention: Any, normed: Any) -> tuple[Any, Any]:
        return self._split(attention.k(normed)), self._split(attention.v(normed))

    @staticmethod
    def _feed_forward(layer: Any, states: Any) -> Any:
        dense, normed = layer.DenseReluDense, _rms_norm(layer.layer_norm, states)
        act = _fused_activation(dense.act)
        if hasattr(dense, "wi_0"):
            hidden = act(dense.wi_0(normed)) * dense.wi_1(normed)
        else:
            hidden = act(dense.wi(normed))
        return states + dense.wo(hidden)

    @staticmethod
    def _padding_bias(mask: Any, dtype: Any) -> Any:
        """(batch, 1, 1, keys): 0 where attended, the dtype's minimum where padded."""
        import torch

        return torch.where(mask.bool()[:, None, None, :], 0.0, torch.finfo(dtype).min).to(dtype)

    # ---- encoder -------------------------------------------------------------------------
    def encode(self, input_ids: Any, attention_mask: Any) -> Any:
        """The encoder's last hidden states (batch, length, d_model)."""
        encoder, length = self.model.encoder, input_ids.shape[1]
        states = encoder.embed_tokens(input_ids)
        bias = encoder.block[0].layer[0].SelfAttention.compute_bias(
            length, length, device=input_ids.device)
        # the bias is a permuted view: made contiguous first, the sum is laid out plainly
        mask = bias.contiguous() + self._padding_bias(attention_mask, states.dtype)
        for block in encoder.block:
            layer = block.layer[0]
            normed = _rms_norm(layer.layer_norm, states)
            keys, values = self._keys_values(layer.SelfAttention, normed)
            states = states + self._attend(layer.SelfAttention, normed, keys, values, mask)
            states = self._feed_forward(block.layer[-1], states)
        return _rms_norm(encoder.final_layer_norm, states)

    # ---- greedy decoding -----------------------------------------------------------------
    def greedy(self, input_ids: Any, attention_mask: Any, max_new_tokens: int,
               on_step: Callable[[Any], None] | None = None) -> Any:
        """Generated sequences (batch, 1 + steps), decoder start token first, as `generate`
        returns them; `on_step(logits)` sees each step's (batch, vocab) float32 logits."""
        import torch

        decoder, device = self.model.decoder, input_ids.device
        encoded = self.encode(input_ids, attention_mask)
        cross_mask = self._padding_bias(attention_mask, encoded.dtype)
        cross = [self._keys_values(block.layer[1].EncDecAttention, encoded)
                 for block in decoder.block]
        cached: list[tuple[Any, Any] | None] = [None] * len(decoder.block)
        relative = decoder.block[0].layer[0].SelfAttention
        token = torch.full((input_ids.shape[0], 1), self.start_id, dtype=torch.long,
                           device=device)
        sequences, unfinished = [token], torch.ones(token.shape[0], dtype=torch.bool,
                                                    device=device)
        eos = torch.tensor(self.eos_ids, dtype=torch.long, device=device)
        for step in range(max_new_tokens):
            bias = relative.compute_bias(1, step + 1, device=device,
                                         past_seen_tokens=step).contiguous()
            states = decoder.embed_tokens(token)
            for number, block in enumerate(decoder.block):
                states = self._decoder_block(block, states, bias, cached, number,
                                             cross[number], cross_mask)
            logits = self._logits(_rms_norm(decoder.final_layer_norm, states))
            if on_step is not None:
                on_step(logits)
            chosen = torch.where(unfinished, logits.argmax(-1), self.pad_id)
            token = chosen[:, None]
            sequences.append(token)
            unfinished &= ~torch.isin(chosen, eos)
            if not bool(unfinished.any()):
                break
        return torch.cat(sequences, dim=1)

    def _decoder_block(self, block: Any, states: Any, bias: Any, cached: list, number: int,
                       cross: tuple[Any, Any], cross_mask: Any) -> Any:
        import torch

        layer = block.layer[0]
        normed = _rms_norm(layer.layer_norm, states)
        keys, values = self._keys_values(layer.SelfAttention, normed)
        if cached[number] is not None:
            keys = torch.cat([cached[number][0], keys], dim=2)
            values = torch.cat([cached[number][1], values], dim=2)
        cached[number] = (keys, values)
        states = states + self._attend(layer.SelfAttention, normed, keys, values, bias)
        layer = block.layer[1]
        normed = _rms_norm(layer.layer_norm, states)
        states = states + self._attend(layer.EncDecAttention, normed, *cross, cross_mask)
        return self._feed_forward(block.layer[-1], states)

    def _logits(self, states: Any) -> Any:
        import torch

        if self.scale_output:
            states = states * (self.d_model ** -0.5)
        return self.model.lm_head(states)[:, -1].to(torch.float32)

