"""One encoder task end to end: records in, a fine-tuned model and official prediction records
out (the glue of `inputs`, `heads`, `training` and `records` that `sumbench train|predict|run`
with an encoder profile use).

- `checkpoint_kind(model)`: what a `--model` is, read from its files before any weight loads:
  "encoder-model" (a folder `model_files.save_model` wrote), "encoder-runs" (a folder of
  per-task training folders, `<task>/best`, a run folder, `train/<task>/best`, or an export of
  flat `<task>/` folders), "roberta" (a
  RoBERTa folder or hub id, as published) or another config `model_type` ("t5", ...);
  `check_profile_fits` refuses a seq2seq profile with an encoder checkpoint and an encoder
  profile with any other checkpoint, in one line.
- `task_features`, `task_records`: a task's encoder inputs and its prediction records.
- `start_model`: the encoder of a RoBERTa checkpoint under the task's head (seeded by the spec,
  the spec's dropout when set), or a sumbench encoder model to fine-tune further.
- `train_task`: `training.train_encoder`, each epoch judged by the task's Table 2 metric on the
  validation records (`spec.selection_metric`, the official scorer's number).
- `predict_task`: a fine-tuned model's official prediction records of a split.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.scoring import score_records
from trainers.encoders.heads import TASK_MODELS, load_encoder, model_class
from trainers.encoders.inputs import (
    check_encoder_tokenizer,
    evext_inputs,
    ext_inputs,
    fac_inputs,
    unsup_inputs,
)
from trainers.encoders.model_files import (
    HEAD_FILE,
    load_model,
    model_folder_tokenizer,
    read_description,
)
from trainers.encoders.prediction import predict_probabilities
from trainers.encoders.records import evext_records, ext_records, fac_records, unsup_records
from trainers.encoders.spec import ENCODER_PROFILES, ENCODER_TASKS, EncoderSpec
from trainers.encoders.training import (
    BEST_FOLDER,
    DEFAULT_TOKENS_PER_MICROBATCH,
    RESULT_FILE,
    train_encoder,
)
from trainers.finetuning.data import select_documents
from trainers.inference.generation import resolve_device
from trainers.models.model_loading import check_model_source, load_errors, load_failure

#: what `checkpoint_kind` calls a sumbench encoder model folder and a folder of training runs
ENCODER_MODEL, ENCODER_RUNS = "encoder-model", "encoder-runs"
#: the checkpoint kinds an encoder profile takes
ENCODER_KINDS = (ENCODER_MODEL, ENCODER_RUNS, "roberta")


def is_encoder_profile(profile: str | None) -> bool:
    return profile in ENCODER_PROFILES


# ---- what a --model is -------------------------------------------------------------------
def _config_type(path: Path) -> str | None:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SumbenchError(f"cannot read {path}: {error}") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    return str(model_type) if model_type else None


def checkpoint_kind(model: str, revision: str | None = None, *, hub: bool = True) -> str | None:
    """What `model` is (see the module docstring), from its files only: a local folder's
    `sumbench_head.json`, `<task>/best/` or `config.json`; a hub id's config (`hub=False`:
    None for a hub id, nothing fetched). None where nothing tells."""
    folder = Path(str(model)).expanduser()
    if folder.is_dir():
        if (folder / HEAD_FILE).is_file():
            return ENCODER_MODEL
        if any((folder / runs / task / best / HEAD_FILE).is_file() for task in ENCODER_TASKS
               for runs, best in ((".", BEST_FOLDER), ("train", BEST_FOLDER), (".", "."))):
            return ENCODER_RUNS
        if (folder / "config.json").is_file():
            return _config_type(folder / "config.json")
        return None
    if not hub or folder.exists():
        return None
    from transformers import AutoConfig

    check_model_source(str(model), "model")
    try:
        return AutoConfig.from_pretrained(str(model), revision=revision).model_type
    except load_errors() as error:
        raise load_failure(str(model), error, "model") from None


def check_profile_fits(model: str, profile: str, revision: str | None = None) -> str | None:
    """The checkpoint's kind, after refusing (one line) an encoder profile with a checkpoint
    that is no RoBERTa, and a seq2seq profile with a RoBERTa or sumbench encoder checkpoint
    (the seq2seq side checks local folders only: hub ids load as before)."""
    encoder = is_encoder_profile(profile)
    kind = checkpoint_kind(model, revision, hub=encoder)
    profiles = ", ".join(ENCODER_PROFILES)
    what = {ENCODER_MODEL: "a sumbench encoder model",
            ENCODER_RUNS: "a folder of sumbench encoder models",
            None: "no model of a known type"}.get(kind, f"a {kind} model")
    if encoder and kind not in ENCODER_KINDS:
        raise SumbenchError(
            f"--model {model} is {what}, but --profile {profile} is an "
            f"encoder profile ({profiles}), which fine-tunes a RoBERTa checkpoint; give a "
            f"RoBERTa model, or a seq2seq profile (flan-t5-large, t5-large, ...) for this one")
    if not encoder and kind in ENCODER_KINDS:
        raise SumbenchError(
            f"--model {model} is {what}, but --profile {profile} is a seq2seq "
            f"profile; encoder checkpoints take an encoder profile ({profiles})")
    return kind


# ---- inputs and records ------------------------------------------------------------------
def task_features(spec: EncoderSpec, records: Sequence[dict], tokenizer,
                  path: str | None = None, gold: bool = True) -> list:
    """The task's encoder inputs of `records`, cut to the spec's budgets (`gold=False`: to
    predict, no gold field read)."""
    if spec.task == "factuality_classification":
        return fac_inputs(records, tokenizer, spec.max_input_tokens, path, gold)
    if spec.task == "evidence_extraction":
        return evext_inputs(records, tokenizer, spec.max_input_tokens, path, gold)
    if spec.task == "extractive_summarization":
        return ext_inputs(records, tokenizer, spec.max_sentences or spec.max_input_tokens,
                          spec.max_input_tokens, path, spec.long_articles, gold)
    return unsup_inputs(records, tokenizer, spec.max_input_tokens, path, gold)


def task_records(spec: EncoderSpec, records: Sequence[dict], features: Sequence[Any],
                 probabilities: Sequence[Any]) -> list[dict]:
    """The official prediction records of `records` from their inputs' probabilities."""
    if spec.task == "factuality_classification":
        return fac_records(records, probabilities)
    if spec.task == "evidence_extraction":
        return evext_records(records, features, probabilities)
    if spec.task == "extractive_summarization":
        return ext_records(records, probabilities, features)
    return unsup_records(records, features, probabilities)


# ---- models ------------------------------------------------------------------------------
def load_tokenizer(model: str, revision: str | None = None):
    """The checkpoint's tokenizer (a sumbench model folder's is in its `encoder/`); local files
    only for a folder. One the heads cannot read (no RoBERTa `<s>` / `</s>` framing) is
    refused in one line."""
    from transformers import AutoTokenizer

    folder = Path(str(model)).expanduser()
    if (folder / HEAD_FILE).is_file():
        folder = model_folder_tokenizer(folder)
    local = folder.is_dir()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder) if local else str(model),
                                                  revision=None if local else revision,
                                                  local_files_only=local)
    except load_errors() as error:
        raise load_failure(str(model), error, "tokenizer") from None
    check_encoder_tokenizer(tokenizer, f"the tokenizer of {model}")
    return tokenizer


def set_dropout(encoder, dropout: float) -> None:
    """Every dropout of the encoder (hidden and attention) at `dropout`, its config too."""
    from torch import nn

    encoder.config.hidden_dropout_prob = dropout
    encoder.config.attention_probs_dropout_prob = dropout
    for module in encoder.modules():
        if isinstance(module, nn.Dropout):
            module.p = dropout  # attention reads its dropout's p too


def check_task_model(model, spec: EncoderSpec, source: str) -> None:
    if model.kind != TASK_MODELS[spec.task]:
        raise SumbenchError(f"{source} holds a {model.kind}, but {spec.task} needs a "
                            f"{TASK_MODELS[spec.task]}")


def start_model(spec: EncoderSpec, model: str, revision: str | None = None):
    """The model to fine-tune: a sumbench encoder model as saved (its head must be the
    task's), or the RoBERTa checkpoint's encoder under the task's head, seeded by
    `spec.seed`. The spec's dropout replaces the checkpoint's when set."""
    if (Path(str(model)).expanduser() / HEAD_FILE).is_file():
        network = load_model(model)
        check_task_model(network, spec, str(model))
    else:
        options = {"pooling": spec.sentence_pooling} \
            if TASK_MODELS[spec.task] == "HierarchicalTagger" else {}
        network = model_class(TASK_MODELS[spec.task])(load_encoder(model, revision),
                                                      seed=spec.seed, **options)
    if spec.dropout is not None:
        set_dropout(network.encoder, spec.dropout)
    return network.train()


def trained_folder(model: str, task: str) -> Path:
    """The fine-tuned model of `task` in `model`: the folder itself (a sumbench encoder model),
    or its `<task>/best` (a folder of training runs, as `sumbench train` writes), its
    `train/<task>/best` (a `sumbench run` folder) or its `<task>` (an export,
    `sumbench encoders export`)."""
    folder = Path(str(model)).expanduser()
    for candidate in (folder, folder / task / BEST_FOLDER, folder / "train" / task / BEST_FOLDER,
                      folder / task):
        if (candidate / HEAD_FILE).is_file():
            read_description(candidate)
            return candidate
    raise SumbenchError(f"{model} holds no fine-tuned encoder model for {task} (a folder with "
                        f"{HEAD_FILE}, or {task}/{BEST_FOLDER}/ or {task}/ in it); train one with "
                        f"`sumbench train --profile roberta-large`")


def trained_spec(folder: Path) -> EncoderSpec | None:
    """The spec a `best/` folder was trained with (its run's train_result.json), when known."""
    result = folder.parent / RESULT_FILE
    if folder.name != BEST_FOLDER or not result.is_file():
        return None
    try:
        return EncoderSpec.from_dict(json.loads(result.read_text(encoding="utf-8"))["spec"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SumbenchError(f"cannot read the spec of {result}: {error}") from None


# ---- train and predict -------------------------------------------------------------------
def score_of(spec: EncoderSpec, records: Sequence[dict]) -> dict:
    """The official scorer's numbers of one task's prediction records."""
    return score_records({spec.task: records})[spec.task]


def validation_metric(spec: EncoderSpec, records: Sequence[dict], tokenizer, batch_size: int,
                      path: str | None = None):
    """`evaluate(model)` for `train_encoder`: the spec's Table 2 metric of `records`."""
    features = task_features(spec, records, tokenizer, path)

    def evaluate(model) -> float:
        probabilities = predict_probabilities(model, features, tokenizer, batch_size,
                                              precision=spec.precision)
        model.train()
        value = score_of(spec, task_records(spec, records, features, probabilities)).get(
            spec.selection_metric)
        return float("nan") if value is None else float(value)

    return evaluate


def fraction_records(records: Sequence[dict], fraction: float, seed: int) -> list[dict]:
    """The records of the seeded `fraction` of their documents (`select_documents`: the
    documents a seq2seq run of the same fraction and seed trains on)."""
    if fraction >= 1.0:
        return list(records)
    chosen = select_documents([str(record.get("id", "")) for record in records], fraction, seed)
    return [record for record in records if str(record.get("id", "")) in chosen]


def train_task(spec: EncoderSpec, model: str, train: Sequence[dict],
               validation: Sequence[dict] | None, out_dir: str | Path, *,
               revision: str | None = None, device: str = "auto", batch_size: int = 32,
               tokens_per_microbatch: int | None = None, paths: tuple = (None, None),
               progress: bool = True, resume: bool = False) -> Path:
    """Fine-tune `model` on the train records of `spec.train_fraction` of their documents
    (every epoch scored on `validation`, the best kept; None: the last epoch); returns
    `out_dir/best`. `resume` goes on from the state an interrupted run saved in `out_dir`."""
    tokenizer = load_tokenizer(model, revision)
    train = fraction_records(train, spec.train_fraction, spec.seed)
    features = task_features(spec, train, tokenizer, paths[0])
    evaluate = None if validation is None else \
        validation_metric(spec, validation, tokenizer, batch_size, paths[1])
    network = start_model(spec, model, revision).to(resolve_device(device))
    return train_encoder(spec, features, network, out_dir, evaluate=evaluate,
                         tokens_per_microbatch=tokens_per_microbatch
                         or DEFAULT_TOKENS_PER_MICROBATCH,
                         progress=progress, tokenizer=tokenizer, resume=resume)


def predict_task(spec: EncoderSpec, folder: str | Path, records: Sequence[dict], *,
                 device: str = "auto", batch_size: int = 32, path: str | None = None,
                 progress: bool = False) -> list[dict]:
    """The official prediction records of `records` by the fine-tuned model in `folder`."""
    model = load_model(folder)
    check_task_model(model, spec, str(folder))
    model = model.to(resolve_device(device))
    tokenizer = load_tokenizer(str(folder))
    features = task_features(spec, records, tokenizer, path, gold=False)
    probabilities = predict_probabilities(model, features, tokenizer, batch_size,
                                          precision=spec.precision, progress=progress)
    return task_records(spec, records, features, probabilities)
