"""A fine-tuned encoder model on disk: its RoBERTa encoder, its head and what the head is, in
one of two layouts, and the export from one to the other.

- "nested" (what training writes, `best/`): `encoder/` (the RobertaModel's `save_pretrained`
  and its tokenizer), `head.safetensors` (every weight outside the encoder) and
  `sumbench_head.json` (the class and its options).
- "flat" (what a leaderboard evaluates, `export_models`): one folder of plain files only,
  as a transformers model folder is: `config.json` (the encoder's), `model.safetensors`
  (encoder and head weights, the head's keys as the model names them), the tokenizer's files
  and `sumbench_head.json` (with `"layout": "flat"` and the task). A set of models is a folder
  of such folders, one per task, named by the task's release folder
  (`factuality_classification/`, ...).

`load_model` reads either layout, from safetensors only; `model_folder_tokenizer` is where the
tokenizer of either is. Description files are read by `read_tagged_json` (a format tag and
version 1, else a one-line error naming the file).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError
from trainers.encoders.heads import (
    TASK_MODELS,
    build_random_encoder,
    load_encoder,
    model_class,
)
from trainers.models.model_loading import load_errors, load_failure

#: the file that makes a folder a sumbench encoder model, and its format tag
HEAD_FILE = "sumbench_head.json"
HEAD_FORMAT = "sumbench-encoder-head"
HEAD_WEIGHTS = "head.safetensors"
ENCODER_FOLDER = "encoder"
#: the flat layout's weights (encoder and head) and configuration
FLAT_WEIGHTS, FLAT_CONFIG = "model.safetensors", "config.json"
LAYOUTS = ("nested", "flat")


def save_model(model, folder: str | Path, tokenizer=None, *, layout: str = "nested",
               task: str | None = None) -> Path:
    """Save a model with its head in `layout` (see the module); the tokenizer when given.
    Returns the folder."""
    from safetensors.torch import save_file

    if layout not in LAYOUTS:
        raise SumbenchError(f"unknown model layout {layout!r}; choose one of "
                            f"{', '.join(LAYOUTS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {key: value.detach().contiguous().cpu()
               for key, value in model.state_dict().items()}
    description = {"format": HEAD_FORMAT, "version": 1, "kind": model.kind,
                   "options": model.options()}
    if layout == "flat":
        model.encoder.config.save_pretrained(str(folder))
        save_file(weights, str(folder / FLAT_WEIGHTS))
        description.update(layout="flat", task=task)
        saved_in = folder
    else:
        model.encoder.save_pretrained(str(folder / ENCODER_FOLDER))
        save_file({key: value for key, value in weights.items()
                   if not key.startswith("encoder.")}, str(folder / HEAD_WEIGHTS))
        saved_in = folder / ENCODER_FOLDER
    if tokenizer is not None:
        tokenizer.save_pretrained(str(saved_in))
    (folder / HEAD_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return folder


def read_description(folder: Path) -> dict[str, Any]:
    """The `sumbench_head.json` of a saved model folder, checked."""
    path = folder / HEAD_FILE
    if not path.is_file():
        raise SumbenchError(f"{folder} is no sumbench encoder model folder (no {HEAD_FILE}); "
                            f"a plain RoBERTa folder loads with load_encoder")
    description = read_tagged_json(path, HEAD_FORMAT)
    if description.get("layout", "nested") not in LAYOUTS:
        raise SumbenchError(f"{path}: layout {description.get('layout')!r} is not one of "
                            f"{', '.join(LAYOUTS)}")
    if not isinstance(description.get("options", {}), dict):
        raise SumbenchError(f"{path}: options is not a JSON object")
    return description


def read_tagged_json(path: Path, format_tag: str) -> dict[str, Any]:
    """A JSON object whose "format" is `format_tag` and "version" 1 (the files sumbench's
    encoder runs write); anything else is a one-line SumbenchError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SumbenchError(f"cannot read {path}: {error}") from None
    if not isinstance(data, dict) or data.get("format") != format_tag or \
            data.get("version") != 1:
        raise SumbenchError(f"{path} is not a {format_tag} file of version 1")
    return data


def is_flat(folder: Path) -> bool:
    return read_description(folder).get("layout") == "flat"


def model_folder_tokenizer(folder: Path) -> Path:
    """Where a saved model's tokenizer is: `encoder/` (nested) or the folder (flat)."""
    return folder if is_flat(folder) else folder / ENCODER_FOLDER


def _flat_encoder(folder: Path):
    """The flat folder's encoder, built from its config.json (its weights set after)."""
    from transformers import RobertaConfig

    try:
        config = RobertaConfig.from_json_file(str(folder / FLAT_CONFIG))
    except load_errors() as error:
        raise load_failure(str(folder), error, "encoder model configuration") from None
    if config.model_type != "roberta":
        raise SumbenchError(f"{folder / FLAT_CONFIG}: model_type {config.model_type!r} is not "
                            f"'roberta'")
    return build_random_encoder(config, 0)


def load_model(folder: str | Path):
    """A model saved by `save_model` (either layout), in eval mode: its encoder, its class and
    options, and its weights (safetensors only; a missing or extra weight, or one of another
    shape, is a SumbenchError naming the file)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    description = read_description(folder)
    cls = model_class(str(description.get("kind", "")))
    flat = description.get("layout") == "flat"
    encoder = _flat_encoder(folder) if flat else load_encoder(str(folder / ENCODER_FOLDER))
    try:
        model = cls(encoder, **description.get("options", {}))
    except TypeError as error:
        raise SumbenchError(f"{folder / HEAD_FILE}: options do not fit a {cls.kind}: "
                            f"{error}") from None
    weights_file = folder / (FLAT_WEIGHTS if flat else HEAD_WEIGHTS)
    try:
        weights = load_file(str(weights_file))
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except load_errors() as error:  # unreadable, or a weight of another shape
        raise load_failure(str(folder), error, "encoder model weights") from None
    if not flat:
        missing = [key for key in missing if not key.startswith("encoder.")]
    if missing or unexpected:
        raise SumbenchError(f"{weights_file} does not fit a {cls.kind}: missing "
                            f"{missing[:3]}, unexpected {list(unexpected)[:3]}")
    return model.eval()


def export_models(folders: dict[str, Path], out: str | Path) -> dict[str, Path]:
    """Each task's model (`{task: saved model folder}`, either layout) written flat to
    `out/<task>/` with its tokenizer, all or nothing; `out` must not exist yet. Returns
    `{task: folder}`."""
    from transformers import AutoTokenizer

    out = Path(out)
    if out.exists():
        raise SumbenchError(f"{out} exists: export into a new folder")
    with atomic_directory(out) as staging:
        for task, folder in folders.items():
            tokenizer = AutoTokenizer.from_pretrained(str(model_folder_tokenizer(folder)),
                                                      local_files_only=True)
            model = load_model(folder)
            if model.kind != TASK_MODELS.get(task):
                raise SumbenchError(f"{folder} holds a {model.kind}, but {task} needs a "
                                    f"{TASK_MODELS.get(task, 'model of an encoder task')}")
            save_model(model, staging / task, tokenizer, layout="flat", task=task)
    return {task: out / task for task in folders}
