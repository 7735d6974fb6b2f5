"""AlignScore's Lightning checkpoints read without Lightning, and the part of its model that
`nli_sp` runs.

The published checkpoints (`AlignScore-base.ckpt` on roberta-base, `AlignScore-large.ckpt` on
roberta-large, hub repository `yzha/AlignScore`) are Lightning `.ckpt` files: a pickle whose
`state_dict` holds `BERTAlignModel`'s weights (`base_model.*`: a RobertaModel with its pooler;
`mlm_head.*`, `bin_layer.*`, `tri_layer.*`, `reg_layer.*`) and whose `hyper_parameters` name
the base model (`model`, e.g. "roberta-large"). `read_checkpoint` loads it with
`torch.load(weights_only=True)`: a file that holds anything but tensors and plain containers
(a pickle that would run code) is refused before anything in it runs. `AlignScoreModel` keeps
what the default `nli_sp` mode reads: the RobertaModel and the 3-way `tri_layer` head on
`pooler_output`, whose softmax column 0 is "aligned" (the fork's `inference.py`); the MLM,
binary and regression heads are never computed (the official forward computes the MLM
head's logits over every padded position and drops them).

The official loader (`load_from_checkpoint(..., strict=False)` over `from_pretrained(base)`)
keeps the base model's pretrained weight for any entry the checkpoint lacks; here the base
model is built from its config alone, so a checkpoint missing base-model weights is refused
(the published ones hold them all). Only RoBERTa bases are supported (the two published
checkpoints; the official code also branches on "bert"/"albert"/"electra" names).
"""
from __future__ import annotations

import functools
import pickle
import zipfile
from pathlib import Path
from typing import Any

from leaderboard.evaluators.pyramid.presence import PresenceBackendError

BASE_PREFIX = "base_model."
HEAD_PREFIX = "tri_layer."
#: the softmax column of `tri_layer` that means "aligned" (MNLI's entailment, label 0)
ALIGNED = 0
#: transformers' "no limit given" model_max_length is int(1e30); anything this big is unset
UNSET_MAX_LENGTH = 10 ** 9


def _checkpoint_error(path: Path, reason: str) -> PresenceBackendError:
    return PresenceBackendError(f"{path}: {reason}")


def _load_weights_only(path: Path) -> Any:
    """torch.load with weights_only=True: tensors and plain containers only."""
    import torch

    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        message = str(error)
        found = [line.strip() for line in message.splitlines() if "Unsupported global" in line]
        if not found and not zipfile.is_zipfile(path):
            raise _checkpoint_error(path, "not a torch checkpoint (neither a zip archive nor "
                                          "a pickle of tensors)") from error
        detail = found[0] if found else message.splitlines()[0]
        raise _checkpoint_error(path, "refused: it holds more than tensors and plain "
                                      f"metadata ({detail})") from error
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError) as error:
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise _checkpoint_error(path, f"not a torch checkpoint ({first})") from error


def read_checkpoint(path: str | Path) -> tuple[dict, dict]:
    """(state_dict, hyper_parameters) of a Lightning `.ckpt`, loaded weights-only."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PresenceBackendError(f"AlignScore checkpoint {path} does not exist (a .ckpt file "
                                   "such as AlignScore-large.ckpt)")
    loaded = _load_weights_only(path)
    state = loaded.get("state_dict") if isinstance(loaded, dict) else None
    if not isinstance(state, dict):
        raise _checkpoint_error(path, "not a Lightning checkpoint (no 'state_dict' mapping)")
    hyper = loaded.get("hyper_parameters") or {}
    if not isinstance(hyper, dict):
        raise _checkpoint_error(path, "its 'hyper_parameters' is not a mapping")
    if not any(key.startswith(HEAD_PREFIX) for key in state):
        sample = ", ".join(sorted(state)[:3]) or "none"
        raise _checkpoint_error(path, f"not an AlignScore checkpoint: its state_dict has no "
                                      f"tri_layer head (keys: {sample}, ...)")
    return state, hyper


def base_model_name(path: str | Path, hyper: dict, base_model: str | None) -> str:
    """The base model to read config and tokenizer from: the one given, else the
    checkpoint's own `hyper_parameters["model"]`."""
    name = base_model or hyper.get("model")
    if not isinstance(name, str) or not name:
        raise PresenceBackendError(f"{path}: the checkpoint names no base model "
                                   "(hyper_parameters 'model'); give base_model=FOLDER_OR_ID")
    return name


@functools.lru_cache(maxsize=1)
def _module_class():
    """The torch module class, made on first use (importing this module imports no torch)."""
    import torch
    from torch import nn

    class AlignScoreHead(nn.Module):
        """RobertaModel (with pooler) + `tri_layer`: the aligned probability per row."""

        def __init__(self, config):
            from transformers import RobertaModel

            super().__init__()
            self.config = config
            self.base_model = RobertaModel(config, add_pooling_layer=True)
            self.tri_layer = nn.Linear(config.hidden_size, 3)

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            pooled = self.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                     token_type_ids=token_type_ids).pooler_output
            return torch.softmax(self.tri_layer(pooled), dim=-1)[:, ALIGNED]

    return AlignScoreHead


def build_model(path: str | Path, state: dict, config: Any):
    """The AlignScore head on `config`'s RoBERTa with the checkpoint's weights (its
    base_model.* and tri_layer.* entries; every weight the model has must be there)."""
    if getattr(config, "model_type", None) != "roberta":
        raise _checkpoint_error(Path(path), f"base model of type "
                                            f"{getattr(config, 'model_type', None)!r}; the "
                                            "AlignScore backend runs RoBERTa bases only")
    model = _module_class()(config)
    wanted = model.state_dict()
    weights = {key: value for key, value in state.items()
               if key in wanted and key.startswith((BASE_PREFIX, HEAD_PREFIX))}
    missing = sorted(set(wanted) - set(weights))
    if missing:
        raise _checkpoint_error(Path(path), f"the checkpoint lacks {len(missing)} weight(s) of "
                                            f"the AlignScore model (first: {missing[0]}); is "
                                            "it for another base model?")
    for key, value in weights.items():
        if tuple(value.shape) != tuple(wanted[key].shape):
            raise _checkpoint_error(Path(path), f"{key} is {list(value.shape)} in the "
                                                f"checkpoint but {list(wanted[key].shape)} for "
                                                f"the base model {config.name_or_path or ''}"
                                                .rstrip())
    model.load_state_dict(weights, strict=True)
    return model.eval()


def pair_max_length(tokenizer: Any, config: Any) -> int:
    """The official pair length: `tokenizer.model_max_length` (512 for roberta-*). A
    tokenizer that sets none (transformers' int(1e30); the official code would pad to it)
    gets the model's position limit; one that sets more than the model has positions for is
    refused."""
    positions = int(config.max_position_embeddings) - int(config.pad_token_id or 0) - 1
    given = int(getattr(tokenizer, "model_max_length", UNSET_MAX_LENGTH) or UNSET_MAX_LENGTH)
    if given >= UNSET_MAX_LENGTH:
        return positions
    if given > positions:
        raise PresenceBackendError(f"the tokenizer's model_max_length {given} exceeds the "
                                   f"model's {positions} positions")
    return given
