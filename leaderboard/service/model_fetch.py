"""A submitted model copied into a worker's scratch folder, checked and hashed as it is copied.

`fetch_model` resolves the SOURCE again under the worker's own model root (a GPU machine may
mount the lab's storage elsewhere than the web server), copies a folder's checked files (or
downloads a hub model's configuration, tokenizer and safetensors files, public models only,
after checking their size) into `dest`, and returns the copy's content digest. A PEFT adapter
brings its base model along: the base it names (a folder under the root, or a hub model at
the adapter's recorded revision) is fetched into `dest/base`, the copy's `adapter_config.json`
points at it, and the digest covers both.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from leaderboard.service.model_source import (
    HUB_PATTERNS,
    content_digest,
    hub_size,
    is_inside,
    model_card,
    model_files,
    resolve_source,
)
from tasks.errors import DataError

ADAPTER_CONFIG = "adapter_config.json"


@dataclass(frozen=True)
class FetchedModel:
    folder: Path            # the copy the evaluation loads
    digest: str             # of the copy (and of its base model, for an adapter)
    card: str | None        # its README.md


def fetch_model(name: str, revision: str | None, model_root: str | None, max_bytes: int,
                dest: Path) -> FetchedModel:
    folder = fetch_one(name, revision, model_root, max_bytes, dest / "model")
    digest = folder[1]
    config_path = folder[0] / ADAPTER_CONFIG
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        base_name = relative_base(str(config.get("base_model_name_or_path") or ""), model_root)
        base, base_digest = fetch_one(base_name, config.get("revision"), model_root, max_bytes,
                                      dest / "base")
        config["base_model_name_or_path"] = str(base)
        config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        digest = hashlib.sha256(f"{digest}+{base_digest}".encode()).hexdigest()
    return FetchedModel(folder[0], digest, model_card(folder[0]))


def fetch_one(name: str, revision: str | None, model_root: str | None, max_bytes: int,
              dest: Path) -> tuple[Path, str]:
    """(the copy, its digest) of one model: a folder under the root or a hub model."""
    source = resolve_source(name, model_root, revision)
    if source.kind == "folder":
        folder, root = Path(source.path), Path(model_root)
        return dest, content_digest(folder, model_files(folder, root), max_bytes, dest, root)
    from huggingface_hub import snapshot_download

    size = hub_size(source.name, revision)
    if size > max_bytes:
        raise DataError(f"the model's files hold {size} bytes, over this instance's limit of "
                        f"{max_bytes}", field="evaluate")
    snapshot_download(source.name, revision=revision, local_dir=dest,
                      allow_patterns=HUB_PATTERNS, token=False)
    return dest, content_digest(dest, model_files(dest), max_bytes)


def relative_base(name: str, model_root: str | None) -> str:
    """An adapter's base model as a SOURCE: an absolute folder must lie under the root."""
    if not name:
        raise DataError(f"the adapter names no base model ({ADAPTER_CONFIG}: "
                        f"base_model_name_or_path)", field="evaluate")
    if not Path(name).is_absolute():
        return name
    root = Path(model_root).resolve() if model_root else None
    if root is None or not is_inside(Path(name).resolve(), root):
        raise DataError(f"the adapter's base model {name} is not under the model root",
                        field="evaluate")
    return str(Path(name).resolve().relative_to(root))
