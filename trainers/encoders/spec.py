"""What an encoder fine-tuning run is: `EncoderSpec`, frozen and JSON-serialisable, and the
`roberta-large` profile of USB Table 2's RoBERTa-Large rows.

Table 10 of the paper gives, per task, only a learning rate, a batch size and the longest
input (`TABLE_10`); everything else is sumbench's choice, marked as such in the fields below
(usb-baselines §3.0: transformers' `TrainingArguments` defaults, the checkpoint's dropout, up to
10 epochs keeping the epoch with the best Table 2 metric on the validation split). "Batch" is
the effective batch: micro-batches add up to it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tasks.plumbing.errors import SumbenchError, check_choice

#: the tasks an encoder runs (USB's release folder names and their short names)
ENCODER_TASKS = {"factuality_classification": "FAC", "evidence_extraction": "EVEXT",
                 "extractive_summarization": "EXT", "unsupported_span_prediction": "UNSUP"}
PRECISIONS = ("auto", "bf16", "fp32")
LONG_ARTICLES = ("truncate", "windows")


@dataclass(frozen=True)
class TaskSettings:
    """Table 10's row of one task: learning rate, effective batch, longest input in tokens
    (EXT: tokens per sentence, and sentences per article)."""
    learning_rate: float
    batch_size: int
    max_input_tokens: int
    max_sentences: int | None = None
    #: the Table 2 metric the best epoch is chosen by (on the validation split)
    selection_metric: str = "auc"


#: USB paper, Table 10 (RoBERTa-Large)
TABLE_10 = {
    "factuality_classification": TaskSettings(1e-5, 32, 512),
    "extractive_summarization": TaskSettings(1e-5, 32, 128, max_sentences=128),
    "evidence_extraction": TaskSettings(2e-5, 2048, 128, selection_metric="f1"),
    "unsupported_span_prediction": TaskSettings(2e-5, 32, 512, selection_metric="f1"),
}


@dataclass(frozen=True)
class EncoderSpec:
    """An encoder fine-tuning run of one task (the fields' comments say whose value it is)."""
    profile: str
    model: str
    task: str
    learning_rate: float           # Table 10
    batch_size: int                # Table 10 (effective)
    max_input_tokens: int          # Table 10
    max_sentences: int | None = None    # Table 10 (EXT)
    selection_metric: str = "auc"  # Table 2's metric of the task
    # ---- sumbench's choices where the paper is silent (usb-baselines §3.0) ----
    num_epochs: int = 10
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_epsilon: float = 1e-8
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0      # linear decay, no warmup
    max_grad_norm: float = 1.0
    dropout: float | None = None   # None: the checkpoint's (0.1 for roberta-large)
    sentence_pooling: str = "mean"  # EXT: mean of the sentence's token states, or "cls"
    #: EXT articles over `max_sentences` lines: the first ones kept, as the H-LSTM reader does
    #: ("truncate"), or every line in windows of `max_sentences` stitched per article
    long_articles: str = "truncate"
    precision: str = "auto"        # bf16 where supported, else fp32; never fp16
    seed: int = 0
    # ---- the run's options (data-size studies, quick runs) ----
    train_fraction: float = 1.0    # the seeded fraction of training documents
    max_steps: int | None = None   # stop after this many optimizer steps (the schedule's end)

    def __post_init__(self) -> None:
        check_choice(self.task, ENCODER_TASKS, "encoder task")
        check_choice(self.sentence_pooling, ("mean", "cls"), "sentence pooling")
        check_choice(self.long_articles, LONG_ARTICLES, "long_articles")
        if self.long_articles != "truncate" and self.task != "extractive_summarization":
            raise SumbenchError(f"long_articles={self.long_articles} is an EXT setting (articles "
                                f"over max_sentences lines); {self.task} takes none")
        if self.precision == "fp16":
            raise SumbenchError("precision 'fp16' is not supported for encoder runs: use "
                                "'bf16' or 'fp32'")
        check_choice(self.precision, PRECISIONS, "precision")
        for name in ("batch_size", "max_input_tokens", "num_epochs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise SumbenchError(f"{name} must be a positive integer, got "
                                    f"{getattr(self, name)!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int)
                                           or self.max_steps < 1):
            raise SumbenchError(f"max_steps must be a positive integer, got {self.max_steps!r}")
        if not 0.0 < float(self.train_fraction) <= 1.0:
            raise SumbenchError(f"train_fraction must be in (0, 1], got {self.train_fraction!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every field; those of `RUN_OPTION_DEFAULTS` only when set otherwise (a spec without
        them reads as before)."""
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        for name, default in RUN_OPTION_DEFAULTS.items():
            if data[name] == default:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderSpec:
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            check_choice(unknown[0], sorted(names), "encoder spec field")
        values = dict(data)
        if "adam_betas" in values:
            values["adam_betas"] = tuple(values["adam_betas"])
        return cls(**values)


#: the fields `to_dict` leaves out at these values (a spec written before they existed
#: reads the same)
RUN_OPTION_DEFAULTS = {"train_fraction": 1.0, "max_steps": None, "long_articles": "truncate"}

#: encoder profiles: name -> the checkpoint it starts from
ENCODER_PROFILES = {"roberta-large": "FacebookAI/roberta-large"}


def encoder_task_name(name: str) -> str:
    """A task's release folder name from it or its short name (FAC, EVEXT, EXT, UNSUP); any
    other task is refused, naming the ones an encoder profile runs."""
    by_short = {short.lower(): folder for folder, short in ENCODER_TASKS.items()}
    folder = by_short.get(str(name).lower(), name)
    if folder not in ENCODER_TASKS:
        raise SumbenchError(f"the encoder profiles run {', '.join(ENCODER_TASKS.values())} "
                            f"only, not {name!r}")
    return folder


def encoder_spec(profile: str, task: str, model: str | None = None,
                 **overrides: Any) -> EncoderSpec:
    """The profile's spec of one task (Table 10's row), `model` and `overrides` applied."""
    check_choice(profile, ENCODER_PROFILES, "encoder profile")
    folder = encoder_task_name(task)
    row = dataclasses.asdict(TABLE_10[folder])
    return EncoderSpec(profile=profile, model=model or ENCODER_PROFILES[profile], task=folder,
                       **{**row, **overrides})
