"""A small on-disk key-value cache (SQLite file, JSON values) for model and API responses.

Keys are hashes of canonical JSON (`cache_key`), so any JSON-serialisable description of a
request (model id, revision, inputs, parameters) becomes a stable key. Each write is its own
transaction: an interrupted run keeps every answer it already stored and never a partial one.
`model_revision` fingerprints a model for such keys (explicit revision, a hash of a local
folder's weight, config and tokenizer files, hub commit, or a hash of the parameters).
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

from tasks.errors import SumbenchError

_MISSING = object()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(*parts: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of `parts`."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


class DiskCache:
    """A persistent `key -> JSON value` map in one SQLite file (safe across threads)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise SumbenchError(f"cache {self.path} is a folder; give a file path")
        try:
            self._connection = sqlite3.connect(str(self.path), check_same_thread=False,
                                               timeout=30.0)
            with self._lock, self._connection:
                self._connection.execute("CREATE TABLE IF NOT EXISTS entries "
                                         "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except sqlite3.DatabaseError as error:
            raise SumbenchError(f"cache {self.path} is not a sumbench cache (SQLite: {error}); "
                                "move it away or choose another cache file") from None

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._connection.execute(
                "SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def __contains__(self, key: str) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored values of those `keys` that are present."""
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._connection.execute(
                    f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk).fetchall()
                found.update((key, json.loads(value)) for key, value in rows)
        return found

    def set(self, key: str, value: Any) -> None:
        self.set_many([(key, value)])

    def set_many(self, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(key, canonical_json(value)) for key, value in items]
        with self._lock, self._connection:
            self._connection.executemany(
                "INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection.execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> "DiskCache":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def open_cache(cache: "DiskCache | str | os.PathLike | None") -> DiskCache | None:
    """A `DiskCache` from a path, an existing cache, or None (no caching)."""
    if cache is None or isinstance(cache, DiskCache):
        return cache
    return DiskCache(cache)


def files_fingerprint(paths: Iterable[str | os.PathLike], chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 over the names and contents of `paths` (sorted by name)."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.name.encode("utf-8") + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(chunk_bytes), b""):
                digest.update(block)
    return digest.hexdigest()


# ---- model fingerprints for cache keys -----------------------------------------------------
def parameters_fingerprint(model: Any) -> str:
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode("utf-8"))
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


#: files of a local model folder that decide its outputs besides the weights: the config and
#: the tokenizer (fast/slow tokenizer definitions, sentencepiece models, vocabularies)
MODEL_FOLDER_FILES = ("config.json", "generation_config.json", "tokenizer.json",
                      "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                      "merges.txt", "*.model", "vocab*.txt", "vocab*.json")
WEIGHT_FILES = ("*.safetensors", "*.bin")


def model_folder_files(folder: str | os.PathLike) -> list[Path]:
    """The weight, config and tokenizer files of a local model folder (empty without
    weights, so that a folder of other files is not mistaken for a model)."""
    folder = Path(folder)
    weights = {path for pattern in WEIGHT_FILES for path in folder.glob(pattern)}
    if not weights:
        return []
    others = {path for pattern in MODEL_FOLDER_FILES for path in folder.glob(pattern)}
    return sorted(path for path in weights | others if path.is_file())


def model_revision(model_id: str | None, model: Any, revision: str | None = None) -> str:
    """The explicit revision, a hash of a local folder's weight, config and tokenizer files,
    the hub commit, or a parameter hash (in that order of preference)."""
    if revision:
        return str(revision)
    if model_id and Path(model_id).is_dir():
        files = model_folder_files(model_id)
        if files:
            return "files:" + files_fingerprint(files)
    commit = hub_commit(model_id, None) if model_id else None
    return str(commit) if commit else "params:" + parameters_fingerprint(model)


def hub_commit(model_id: str, revision: str | None) -> str | None:
    """The hub commit `model_id` at `revision` resolves to in the local hub cache; None for a
    local folder or when unknown (transformers 5 no longer keeps it on the config)."""
    if Path(model_id).exists() or model_id == "in-memory":
        return None
    try:  # the local cache only: provenance never waits for the network
        from transformers.utils.hub import cached_file, extract_commit_hash

        return extract_commit_hash(cached_file(model_id, "config.json", revision=revision,
                                               local_files_only=True), None)
    except Exception:  # provenance is best effort; loading already succeeded
        return None
