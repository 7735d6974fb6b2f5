"""Fine-tuning specs: one frozen, JSON-serialisable dataclass and named profiles.

The `flan-t5-large`, `flan-t5-xl` and `t5-large` profiles carry the USB paper's
hyperparameters (Table 10: learning rate, effective batch size, input/output budgets). Values
the paper does not give are our choices and are marked as such below; every value can be
overridden with
`dataclasses.replace(get_profile(name), field=value)` or `spec.override({...})`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError, check_choice, did_you_mean
from tasks.plumbing.json_fields import JsonFields

PRECISIONS = ("auto", "bf16", "fp32")
#: spec fields a resumed run may change: they decide only whether a GPU adds up in a fixed
#: order, never what is computed (each resume's own value is kept in train_config.json's
#: `resumes`); a run recorded before a field existed resumes as well
RESUMABLE_SPEC_FIELDS = ("deterministic",)
MIXINGS = ("proportional", "temperature")
SCHEDULERS = ("linear", "constant", "cosine")
#: T5 defaults from the LoRA paper's attention-only recipe (query and value projections)
T5_LORA_TARGETS = ("q", "v")


class SpecError(SumbenchError, ValueError):
    """An invalid fine-tuning spec value; the message names the field."""


@dataclass(frozen=True)
class FinetuneSpec(JsonFields):
    """Everything that determines a fine-tuning run, apart from the task list and data folder."""
    unknown_field_error, field_kind = SpecError, "spec field(s)"

    profile: str = "custom"
    model: str = ""                       # hub id or local folder
    revision: str | None = None           # hub branch, tag or commit
    # --- optimisation (paper: lr, batch_size) --------------------------------------------
    learning_rate: float = 5e-5
    batch_size: int = 32                  # effective: per_device x accumulation x world size
    per_device_batch_size: int = 4        # examples a micro-batch, when not cut by tokens
    # micro-batches cut by padded tokens (trainers.finetuning.micro_batches): None (by
    # per_device_batch_size), a number, or "auto" (the largest that fits the GPU, found by a
    # short probe; on a CPU, per_device_batch_size). Steps keep their `batch_size` examples.
    tokens_per_microbatch: int | str | None = None
    num_epochs: int = 10                  # our choice; early stopping usually ends runs sooner
    max_steps: int | None = None          # overrides num_epochs when set
    lr_scheduler: str = "linear"          # transformers' Seq2SeqTrainer default
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0
    # --- sequence budgets (paper) -----------------------------------------------------------
    max_input_tokens: int = 512
    max_output_tokens: int = 128
    # official EXT/EVEXT window budget (the USB release's scripts: 1024 tokens). Windowed tasks
    # are cut into windows of `window_budget` = min(window_tokens, max_input_tokens) tokens in
    # training, validation and prediction alike, so the model trains on the windows it sees.
    window_tokens: int = 1024
    # --- numerics and memory ----------------------------------------------------------------
    precision: str = "auto"               # auto = bf16 where supported, else fp32; never fp16
    gradient_checkpointing: bool | str = False    # or "auto": on only when memory needs it
    compile: bool = False                 # torch.compile the model for training
    # deterministic kernels (torch.use_deterministic_algorithms during training): a resumed or
    # repeated GPU run ends with the same weights bit for bit. Off trades that for speed (GPU
    # attention and embedding gradients then add up in varying order); CPU kernels used here
    # are deterministic either way.
    deterministic: bool = True
    # --- LoRA (off = full fine-tuning) ------------------------------------------------------
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] = T5_LORA_TARGETS
    # --- data ----------------------------------------------------------------------------
    variant: str = "all"
    mixing: str = "proportional"
    mixing_temperature: float = 2.0
    train_fraction: float = 1.0
    megabatch_steps: int = 50             # length grouping window, in optimizer steps
    # --- evaluation, checkpoints, logging -----------------------------------------------------
    eval_every_steps: int | None = None   # None: at the end of every epoch
    early_stopping_patience: int | None = 3   # evaluations without improvement; None: off
    save_every_steps: int | None = 500
    keep_checkpoints: int = 2
    log_every_steps: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_target_modules", tuple(self.lora_target_modules))
        self.validate()

    def validate(self) -> None:
        if self.precision == "fp16":
            raise SpecError("precision 'fp16' is not supported: T5 activations overflow in "
                            "float16 (NaN losses); use 'bf16' (Ampere or newer GPUs) or 'fp32'")
        _choice("precision", self.precision, PRECISIONS)
        _choice("mixing", self.mixing, MIXINGS)
        _choice("lr_scheduler", self.lr_scheduler, SCHEDULERS)
        tokens = self.tokens_per_microbatch
        if tokens is not None and tokens != "auto" and (
                isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
            raise SpecError(f"field 'tokens_per_microbatch' must be a number >= 1, 'auto' or "
                            f"null, got {tokens!r}")
        if not isinstance(self.gradient_checkpointing, bool) and \
                self.gradient_checkpointing != "auto":
            raise SpecError(f"field 'gradient_checkpointing' must be true, false or 'auto', "
                            f"got {self.gradient_checkpointing!r}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"field '{field.name}' must be a finite number, got {value!r}")
        for name in ("batch_size", "per_device_batch_size", "num_epochs", "max_input_tokens",
                     "max_output_tokens", "window_tokens", "megabatch_steps", "keep_checkpoints",
                     "log_every_steps", "lora_r"):
            if int(getattr(self, name)) < 1:
                raise SpecError(f"field '{name}' must be >= 1, got {getattr(self, name)!r}")
        for name in ("max_steps", "eval_every_steps", "save_every_steps",
                     "early_stopping_patience"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise SpecError(f"field '{name}' must be >= 1 or null, got {value!r}")
        if not 0.0 < self.train_fraction <= 1.0:
            raise SpecError(f"field 'train_fraction' must be in (0, 1], got {self.train_fraction}")
        if self.learning_rate <= 0 or self.mixing_temperature <= 0:
            raise SpecError("fields 'learning_rate' and 'mixing_temperature' must be positive")
        if self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise SpecError("field 'weight_decay' must be >= 0 and 'max_grad_norm' > 0")
        if not 0.0 <= self.warmup_ratio < 1.0 or not 0.0 <= self.lora_dropout < 1.0:
            raise SpecError("fields 'warmup_ratio' and 'lora_dropout' must be in [0, 1)")

    @property
    def window_budget(self) -> int:
        """Tokens of one window of a windowed task: min(window_tokens, max_input_tokens)."""
        return min(self.window_tokens, self.max_input_tokens)

    def accumulation_steps(self, world_size: int = 1) -> int:
        """Gradient accumulation so that per_device x accumulation x world == batch_size."""
        per_step = self.per_device_batch_size * world_size
        if self.batch_size % per_step:
            raise SpecError(
                f"field 'batch_size' ({self.batch_size}) is not a multiple of "
                f"per_device_batch_size x world size ({self.per_device_batch_size} x "
                f"{world_size}); choose a per_device_batch_size that divides it")
        return self.batch_size // per_step

    def override(self, values: dict[str, Any]) -> FinetuneSpec:
        """A copy with `values` applied; strings (from a command line) are parsed by field type.
        Setting `per_device_batch_size` alone cuts micro-batches by count again (it is the
        explicit override of a token plan)."""
        parsed = {name: _parse_value(self, name, value) for name, value in values.items()}
        if "per_device_batch_size" in parsed and "tokens_per_microbatch" not in parsed:
            parsed["tokens_per_microbatch"] = None
        return dataclasses.replace(self, **parsed)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(f"field '{name}' must be one of {', '.join(allowed)}; got {value!r}")


def _parse_value(spec: FinetuneSpec, name: str, value: Any) -> Any:
    fields = {f.name: f for f in dataclasses.fields(spec)}
    if name not in fields:
        raise SpecError(f"unknown spec field '{name}'{did_you_mean(name, fields)}")
    if not isinstance(value, str):
        return value
    current = getattr(spec, name)
    if value.lower() in ("none", "null") and name in _OPTIONAL_FIELDS:
        return None
    if value.lower() == "auto" and name in _AUTO_FIELDS:
        return "auto"
    if name in _AUTO_FIELDS:
        current = fields[name].default
    if isinstance(current, bool):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise SpecError(f"field '{name}' expects true/false, got {value!r}")
        return value.lower() in ("true", "1", "yes")
    if isinstance(current, tuple):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    try:
        if isinstance(current, int) or name in _OPTIONAL_INT_FIELDS:
            return int(value)
        if isinstance(current, float):
            return float(value)
    except ValueError:
        raise SpecError(f"field '{name}' expects a number, got {value!r}") from None
    return value


_OPTIONAL_INT_FIELDS = ("max_steps", "eval_every_steps", "save_every_steps",
                        "early_stopping_patience", "tokens_per_microbatch")
_OPTIONAL_FIELDS = _OPTIONAL_INT_FIELDS + ("revision",)
#: fields that also take "auto" (decided by the run: trainers.finetuning.micro_batches)
_AUTO_FIELDS = ("tokens_per_microbatch", "gradient_checkpointing")

PROFILES: dict[str, FinetuneSpec] = {
    # USB paper: lr 5e-5, batch 32, max input 8192, max output 768. Micro-batches are cut by
    # tokens to fit the GPU (auto), with gradient checkpointing only when memory needs it;
    # per_device_batch_size is the cut on a CPU, or when set explicitly. Checkpointing
    # replays the dropout masks, so it never changes results. How a step is split into
    # micro-batches (per_device_batch_size, number of processes) changes nothing else when
    # dropout is 0 (the loss is normalised over the whole step; up to floating-point
    # summation order), but with dropout > 0 (Flan-T5's config: dropout_rate 0.1) the masks
    # are drawn per micro-batch and process, so a different split gives different masks: a
    # run with the same distribution of updates, not the same weights.
    "flan-t5-large": FinetuneSpec(
        profile="flan-t5-large", model="google/flan-t5-large", learning_rate=5e-5,
        batch_size=32, per_device_batch_size=2, max_input_tokens=8192, max_output_tokens=768,
        tokens_per_microbatch="auto", gradient_checkpointing="auto"),
    # USB paper (Table 10): the original T5-Large (Raffel et al. 2020) with Flan-T5-Large's
    # values (lr 5e-5, batch 32, max input 8192, max output 768) and its format; the
    # checkpoint is not named, so the hub's t5-large. What the paper leaves open is
    # Flan-T5-Large's choice, so the two rows differ only in the checkpoint. Never fp16: the
    # original T5 overflows to NaN there (transformers #11461).
    "t5-large": FinetuneSpec(
        profile="t5-large", model="google-t5/t5-large", learning_rate=5e-5,
        batch_size=32, per_device_batch_size=2, max_input_tokens=8192, max_output_tokens=768,
        tokens_per_microbatch="auto", gradient_checkpointing="auto"),
    # USB paper: lr 5e-5, batch 64, max input 1536, max output 512.
    "flan-t5-xl": FinetuneSpec(
        profile="flan-t5-xl", model="google/flan-t5-xl", learning_rate=5e-5,
        batch_size=64, per_device_batch_size=4, max_input_tokens=1536, max_output_tokens=512,
        tokens_per_microbatch="auto", gradient_checkpointing="auto"),
    # Seconds on a CPU with a model from trainers.models.tiny; `model` must be set by the caller.
    "tiny": FinetuneSpec(
        profile="tiny", model="", learning_rate=1e-3, batch_size=4, per_device_batch_size=2,
        num_epochs=2, max_input_tokens=256, max_output_tokens=64, precision="fp32",
        lora_r=4, lora_alpha=8, save_every_steps=None, early_stopping_patience=None,
        megabatch_steps=4, log_every_steps=1),
}


#: (input tokens, new tokens) the USB release predicts with, for the profiles that carry its
#: settings: its predict scripts truncate inputs at 8192 tokens and generate up to
#: max_length 768 (767 new tokens) whatever budgets the model was trained with
RELEASE_PREDICTION_BUDGETS = {"flan-t5-large": (8192, 767), "flan-t5-xl": (8192, 767),
                              "t5-large": (8192, 767)}
#: the release's cap on new tokens, for any other profile
MAX_NEW_TOKENS = 767


def prediction_budgets(spec: FinetuneSpec) -> tuple[int, int]:
    """(input tokens, new tokens) that `sumbench run` predicts test items with: the release's
    for its profiles; otherwise the spec's training budgets, new tokens capped at 767."""
    if spec.profile in RELEASE_PREDICTION_BUDGETS:
        return RELEASE_PREDICTION_BUDGETS[spec.profile]
    return spec.max_input_tokens, min(spec.max_output_tokens, MAX_NEW_TOKENS)


def profile_names() -> list[str]:
    return sorted(PROFILES)


def get_profile(name: str, **overrides: Any) -> FinetuneSpec:
    """The named profile's spec, with keyword `overrides` applied."""
    spec = PROFILES[check_choice(name, profile_names(), "fine-tuning profile")]
    return spec.override(overrides) if overrides else spec
