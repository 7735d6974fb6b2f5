"""A submitted model copied into a worker's scratch folder, checked and hashed as it is copied.

`fetch_model` resolves the SOURCE again under the worker's own model root (a GPU machine may
mount the lab's storage elsewhere than the web server) and copies the folder's loaded files
(leaderboard.service.model_source), read without following links, into `dest`. A hub model is
first downloaded into the scratch folder (its configuration, tokenizer and safetensors files,
public models only, after checking their size), then copied from there exactly as a folder
is. A PEFT adapter brings its base model along: the base it names (a folder under the root or
a hub model at the adapter's recorded revision; never another adapter) is fetched into
`dest/base` and the copy's `adapter_config.json` points at it. Then every reference in the
copy's JSON files is checked to stay inside the copy (leaderboard.service.model_refs), so the
evaluation loads nothing but the bytes hashed here.

The content digest is the sha256 over the loaded files' names and their own sha256, in name
order, as they were submitted (for an adapter, with its base model's digest); the weights
fingerprint covers the tensors alone; the files key covers the contents of every other
loaded file (configuration, generation configuration, tokenizer, adapter configuration; the
base model's too), JSON compared by its values without the fields that record where and
with which library version it was written, and never the index that only says which shard
holds which tensor. Weights fingerprint, files key and predict settings together say what
produces the outputs: the duplicate rule keys on them (a re-sharded copy of the same model
is the same model; the same tensors with another tokenizer are not).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from leaderboard.service.model_refs import (
    BASE_KEY,
    DATA_FILES,
    check_references,
    weights_fingerprint,
)
from leaderboard.service.model_source import (
    ADAPTER_CONFIG,
    HUB_PATTERNS,
    INDEX,
    LOADED_NAMES,
    ModelLimits,
    check_hub_size,
    model_card,
    open_source,
    plan_folder,
    resolve_source,
)
from leaderboard.service.nofollow import Folder, refuse
from tasks.plumbing.errors import DataError


@dataclass(frozen=True)
class FetchedModel:
    folder: Path            # the copy the evaluation loads
    digest: str             # its loaded files as submitted (and its base model's)
    weights: str            # the weights fingerprint (and its base model's)
    card: str | None        # its README.md
    removed: tuple[str, ...] = ()  # recorded-only fields taken out of the copy
    files_key: str = ""     # the contents of its other loaded files (and its base model's)


@dataclass(frozen=True)
class Copied:
    folder: Path
    files: tuple[str, ...]
    digest: str
    card: str | None


class Budget:
    """The bytes a model (with its base) may bring, counted as they are read."""

    def __init__(self, max_bytes: int):
        self.left, self.max_bytes = max_bytes, max_bytes

    def __call__(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise refuse(f"the model's files hold more than this instance's limit of "
                         f"{self.max_bytes} bytes")


def digest_of(hashes: list[tuple[str, str]]) -> str:
    """sha256 over (name, file sha256) in name order."""
    digest = hashlib.sha256()
    for name, file_hash in sorted(hashes):
        digest.update(json.dumps([name, file_hash]).encode())
    return digest.hexdigest()


def fetch_model(name: str, revision: str | None, model_root: str | None, limits: ModelLimits,
                dest: Path, kind: str | None = None) -> FetchedModel:
    """The model copied into `dest` (its base too, for an adapter) and checked; `kind`: what
    SOURCE was when submitted ("folder" or "hub"), which it must still be."""
    budget = Budget(limits.max_bytes)
    model = fetch_one(name, revision, model_root, limits, dest / "model", budget, kind)
    if ADAPTER_CONFIG not in model.files:
        removed = check_references(model.folder, model.files)
        return FetchedModel(model.folder, model.digest, weights_of(model), model.card,
                            tuple(removed), files_key(model))
    config_path = model.folder / ADAPTER_CONFIG
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise refuse(f"{ADAPTER_CONFIG} is not valid JSON") from None
    if not isinstance(config, dict):
        raise refuse(f"{ADAPTER_CONFIG} is not a JSON object")
    base = fetch_one(base_source(config.get(BASE_KEY), model_root), config.get("revision"),
                     model_root, limits, dest / "base", budget)
    if ADAPTER_CONFIG in base.files:
        raise refuse(f"{ADAPTER_CONFIG}: {BASE_KEY} names another adapter: the base of an "
                     f"adapter must be a full model")
    config[BASE_KEY] = str(base.folder)
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    removed = check_references(base.folder, base.files) + \
        check_references(model.folder, model.files, base.folder)
    return FetchedModel(model.folder, combine(model.digest, base.digest),
                        combine(weights_of(model), weights_of(base)), model.card,
                        tuple(removed), files_key(model, base))


def combine(adapter: str, base: str) -> str:
    return hashlib.sha256(f"{adapter}+{base}".encode()).hexdigest()


def weights_of(copied: Copied) -> str:
    return weights_fingerprint(copied.folder / name for name in copied.files
                               if name.endswith(".safetensors"))


#: JSON fields that record where and by what a file was written, not what the model does
#: (an adapter's base is keyed by its own files)
RECORDED_FIELDS = frozenset({"_name_or_path", "name_or_path", "transformers_version",
                             BASE_KEY})


def files_key(model: Copied, base: Copied | None = None) -> str:
    """sha256 over the contents of the loaded files other than weights and their index, in
    name order (the base model's under `base/`); JSON by its values, recorded fields aside."""
    entries = []
    for prefix, copied in (("", model), ("base/", base)):
        for name in copied.files if copied else ():
            if name.endswith(".safetensors") or name == INDEX:
                continue
            data = (copied.folder / name).read_bytes()
            if name.endswith(".json") and name not in DATA_FILES:
                data = _json_values(data)
            entries.append((prefix + name, hashlib.sha256(data).hexdigest()))
    return digest_of(entries)


def _json_values(data: bytes) -> bytes:
    try:
        values = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return data  # checked already; as it is otherwise
    if isinstance(values, dict):
        values = {key: value for key, value in values.items() if key not in RECORDED_FIELDS}
    return json.dumps(values, sort_keys=True, separators=(",", ":")).encode()


def fetch_one(name: str, revision: str | None, model_root: str | None, limits: ModelLimits,
              dest: Path, budget: Budget, kind: str | None = None) -> Copied:
    """One model's loaded files copied into `dest`: a folder under the root, or a hub model
    downloaded beside `dest` first (never one for the other: `kind`, when given)."""
    source = resolve_source(name, model_root, revision)
    if kind is not None and source.kind != kind:
        raise refuse(f"{name!r} was a {kind} model when it was submitted and names a "
                     f"{source.kind} model now: submit it again")
    if source.kind == "folder":
        with open_source(source.name, model_root) as folder:
            return copy_folder(folder, limits, dest, budget)
    from huggingface_hub import snapshot_download

    download = dest.with_name(dest.name + "-download")
    try:
        check_hub_size(source.name, revision, limits)
        snapshot_download(source.name, revision=revision, local_dir=download,
                          allow_patterns=HUB_PATTERNS, token=False)
    except DataError:
        raise
    except Exception as error:  # the hub's own errors: named by kind, no local path
        raise refuse(f"{source.name!r} cannot be downloaded from the hub "
                     f"({type(error).__name__})") from None
    with Folder.at(download, source.name) as folder:
        return copy_folder(folder, limits, dest, budget)


def copy_folder(folder: Folder, limits: ModelLimits, dest: Path, budget: Budget,
                loaded_names: frozenset[str] = LOADED_NAMES) -> Copied:
    plan = plan_folder(folder, limits, loaded_names)
    dest.mkdir(parents=True)
    hashes = [(name, folder.copy(name, dest / name, budget)) for name in plan.files]
    card = model_card(folder) if plan.has_card else None
    return Copied(dest, plan.files, digest_of(hashes), card)


def base_source(name, model_root: str | None) -> str:
    """An adapter's base model as a SOURCE: a relative name as it is, an absolute folder
    (judged by its name alone) as its place under the root."""
    if not isinstance(name, str) or not name.strip():
        raise refuse(f"the adapter names no base model ({ADAPTER_CONFIG}: {BASE_KEY})")
    if not os.path.isabs(name):
        return name
    path = os.path.normpath(name)
    for root in _root_spellings(model_root):
        if os.path.commonpath([path, root]) == root and path != root:
            return os.path.relpath(path, root)
    raise refuse(f"{ADAPTER_CONFIG}: {BASE_KEY} is not under the model root")


def _root_spellings(model_root: str | None) -> list[str]:
    """The root as the operator wrote it and as it resolves (the operator's own links)."""
    if model_root is None:
        return []
    return sorted({os.path.abspath(model_root), os.path.realpath(model_root)})
