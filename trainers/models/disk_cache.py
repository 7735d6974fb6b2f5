"""A small on-disk key-value cache (SQLite file, JSON values) for model and API responses.

Keys are hashes of canonical JSON (`cache_key`), so any JSON-serialisable description of a
request (model id, revision, inputs, parameters) becomes a stable key. Each write is its own
transaction: an interrupted run keeps every answer it already stored and never a partial one.
`model_revision` fingerprints a model for such keys (explicit revision, a hash of a local
folder's weight, config and tokenizer files, hub commit, or a hash of the weights);
`weights_digest` and `tokenizer_digest` hash a loaded model's and tokenizer's content.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import SumbenchError

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

    def __enter__(self) -> DiskCache:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def open_cache(cache: DiskCache | str | os.PathLike | None) -> DiskCache | None:
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


# ---- model fingerprints -------------------------------------------------------------------
#: bytes hashed per update (copied to the CPU at a time for a tensor on an accelerator)
HASH_CHUNK_BYTES = 1 << 26
#: config entries that say where or with what a model was saved, not what it computes
CONFIG_LOAD_FIELDS = ("_name_or_path", "_commit_hash", "transformers_version",
                      "_from_model_config")


def weights_digest(model: Any) -> str:
    """SHA-256 of the model's content: every state_dict entry's name, dtype, shape and bytes
    (sorted by name). Independent of where the model was loaded from; any changed value (or
    dtype) changes it. See `tensor_blocks` for what is copied.

    Cost: about 0.5 s per GB of weights on one core (sha256 at 2.1 GB/s on an AMD EPYC with
    SHA instructions; CPUs without them hash sha256 several times slower): 1.6 s for an
    849M-parameter T5 of flan-t5-large's shape in float32 (3.4 GB), 0.8 s in bfloat16, so
    about 1.5 s for a 780M-parameter model in float32; 1 ms for a 276K-parameter tiny T5."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        header = [name, str(tensor.dtype).removeprefix("torch."), list(tensor.shape)]
        digest.update(canonical_json(header).encode("utf-8") + b"\n")
        for block in tensor_blocks(tensor):
            digest.update(block)
    return digest.hexdigest()


def tensor_blocks(tensor: Any, chunk_bytes: int = HASH_CHUNK_BYTES) -> Iterable[Any]:
    """A tensor's bytes in row-major order, as uint8 numpy arrays of at most `chunk_bytes`
    (any dtype, bfloat16 included): views of a contiguous CPU tensor, no copy; a
    non-contiguous one is copied once; chunks of one on another device are copied to the CPU
    one at a time."""
    import torch

    flat = tensor.detach().reshape(-1)  # a view when contiguous, else one copy
    step = max(1, chunk_bytes // flat.element_size())
    for start in range(0, flat.numel(), step):
        yield flat[start:start + step].cpu().view(torch.uint8).numpy()


def config_digest(model: Any) -> str:
    """SHA-256 of the model's config and generation config (eos ids, beam settings, ...),
    without CONFIG_LOAD_FIELDS (the folder it was loaded from, the saving version)."""
    parts = []
    for config in (getattr(model, "config", None), getattr(model, "generation_config", None)):
        values = config.to_dict() if config is not None else {}
        parts.append({key: value for key, value in values.items()
                      if key not in CONFIG_LOAD_FIELDS})
    return cache_key(json.loads(json.dumps(parts, default=str)))


#: tokenizer settings that change encoding or decoding besides the vocabulary and rules
TOKENIZER_SETTINGS = ("model_max_length", "padding_side", "truncation_side",
                      "clean_up_tokenization_spaces")


def tokenizer_digest(tokenizer: Any) -> str:
    """SHA-256 of what a tokenizer does, independent of the folder it came from: a fast
    tokenizer's full definition (`backend_tokenizer.to_str()`: normaliser, pre-tokeniser,
    model and vocabulary, added tokens, post-processor, decoder; without the truncation and
    padding state that encoding calls leave behind), else its class and sorted vocabulary;
    plus its special tokens and TOKENIZER_SETTINGS."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        rules: Any = json.loads(backend.to_str())
        rules.pop("truncation", None)
        rules.pop("padding", None)
    else:
        rules = {"class": type(tokenizer).__name__,
                 "vocab": sorted(tokenizer.get_vocab().items())}
    special = getattr(tokenizer, "special_tokens_map", {})
    content = {"rules": rules,
               "special": {key: [str(v) for v in value] if isinstance(value, (list, tuple))
                           else str(value) for key, value in special.items()},
               **{name: getattr(tokenizer, name, None) for name in TOKENIZER_SETTINGS}}
    return cache_key(content)


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
    return str(commit) if commit else "params:" + weights_digest(model)


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
