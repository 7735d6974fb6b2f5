"""What a copied model's files may point at, and a fingerprint of its weights alone.

Once the worker has copied a model's loaded files into its scratch folder, every field of
their JSON files that transformers or peft could read as a file or model reference (a key
ending in `_file`, `_files`, `_path`, `_dir`, `_spm` or `name_or_path`, `vocab` and `merges`,
at any depth, and the safetensors index's `weight_map`) must name a file of the copy by plain
name, or be empty; an adapter's `base_model_name_or_path` must be the copy of its base that
the worker fetched; and no other string of them (token text and templates aside; the token
maps of tokenizer.json and vocab.json are data) may look like a path: absolute, from a home
folder or a drive, or up a level.
Three fields the libraries only record and overwrite as they load (`_name_or_path`,
`name_or_path`, `special_tokens_map_file`) are removed from the copy. Anything else is refused
before loading, with the file and field named, whatever the reference points at.

The weights fingerprint is the sha256 over every tensor's name, dtype, shape and the sha256 of
its bytes, in name order, whatever the files they are sharded into: the same weights under
another name, with other files beside them or sharded otherwise give the same fingerprint.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from leaderboard.service.model_source import (
    ADAPTER_CONFIG,
    INDEX,
    MAX_JSON_BYTES,
    is_plain_name,
)
from leaderboard.service.nofollow import BLOCK, refuse

#: keys whose string values the libraries read as a file or model to load (transformers 5
#: also opens a tokenizer_config.json `vocab` or `merges` given as a string)
REFERENCE_KEY = re.compile(r"(_file|_files|_path|_dir|_spm|name_or_path)$|^(vocab|merges)$")
RECORDED_ONLY = frozenset({"_name_or_path", "name_or_path", "special_tokens_map_file"})
#: data the libraries parse themselves (token maps and merges inline, never paths): not read
DATA_FILES = frozenset({"tokenizer.json", "vocab.json"})
#: keys whose strings are token text or templates, where a "/" is text (e.g. "</s>")
TOKEN_TEXT_KEY = re.compile(r"(_token|_tokens|^content|^chat_template)$")
#: a string that names a place on a filesystem: absolute, home-relative, a drive, or up a level
PATH_LIKE = re.compile(r"^(/|~|\\|[A-Za-z]:[\\/])|(^|[\\/])\.\.([\\/]|$)")
BASE_KEY = "base_model_name_or_path"
#: the largest safetensors header read (the format itself caps it at 100 MB)
MAX_HEADER_BYTES = 100 << 20


def check_references(copy: Path, names: Iterable[str], base: Path | None = None) -> list[str]:
    """Check the copy's JSON files (and remove the recorded-only fields); the fields removed,
    as "file: field". A DataError names the first reference that leaves the copy."""
    names = sorted(names)
    removed: list[str] = []
    for name in (name for name in names if name.endswith(".json") and name not in DATA_FILES):
        path = copy / name
        if path.stat().st_size > MAX_JSON_BYTES:
            raise refuse(f"{name} is larger than {MAX_JSON_BYTES} bytes")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            cleaned = _Context(name, set(names), base, removed).clean(data, "")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise refuse(f"{name} is not valid JSON") from None
        except RecursionError:
            raise refuse(f"{name} is nested too deeply") from None
        if cleaned != data:
            path.write_text(json.dumps(cleaned, indent=2, ensure_ascii=False), encoding="utf-8")
    return removed


class _Context:
    def __init__(self, file: str, present: set[str], base: Path | None, removed: list[str]):
        self.file, self.present, self.base, self.removed = file, present, base, removed

    def clean(self, value, field: str):
        if isinstance(value, list):
            return [self.clean(item, f"{field}[{index}]") for index, item in enumerate(value)]
        if not isinstance(value, dict):
            self.check_value(value, field)
            return value
        kept = {}
        for key, item in value.items():
            where = f"{field}.{key}" if field else str(key)
            if key in RECORDED_ONLY:
                self.removed.append(f"{self.file}: {where}")
                continue
            if self.file == ADAPTER_CONFIG and where == BASE_KEY:
                self.check_base(item)
            elif (self.file == INDEX and where == "weight_map") or REFERENCE_KEY.search(str(key)):
                self.check_names(item, where)
            elif not TOKEN_TEXT_KEY.search(str(key)):
                item = self.clean(item, where)
            kept[key] = item
        return kept

    def check_value(self, value, where: str) -> None:
        """A string anywhere else must not name a place on a filesystem."""
        if isinstance(value, str) and PATH_LIKE.search(value):
            raise refuse(f"{self.file}: {where or 'a value'} names a place outside the model's "
                         f"own folder (paths are never followed)")

    def check_names(self, value, where: str) -> None:
        """Every string below `value` names a file of the copy."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.check_names(item, f"{where}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.check_names(item, f"{where}[{index}]")
        elif isinstance(value, str) and value and not (is_plain_name(value) and
                                                       value in self.present):
            raise refuse(f"{self.file}: {where} names a file outside the model's own folder "
                         f"(references out of the model are never followed)")

    def check_base(self, value) -> None:
        if self.base is None or value != str(self.base):
            raise refuse(f"{self.file}: {BASE_KEY} is not the base model the server fetched")


def weights_fingerprint(paths: Iterable[Path]) -> str:
    """sha256 over every tensor's (name, dtype, shape, sha256 of its bytes), in order."""
    tensors = sorted(entry for path in paths for entry in tensor_digests(path))
    return hashlib.sha256(json.dumps(tensors).encode()).hexdigest()


def tensor_digests(path: Path) -> list[list]:
    """[name, dtype, shape, sha256] of each tensor of a safetensors file."""
    bad = refuse(f"{path.name} is not a valid safetensors file")
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        if not 0 < size <= MAX_HEADER_BYTES:
            raise bad
        try:
            header = json.loads(handle.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise bad from None
        if not isinstance(header, dict):
            raise bad
        found = []
        for name, info in sorted(header.items()):
            if name == "__metadata__":
                continue
            start, end = _offsets(info, bad)
            handle.seek(8 + size + start)
            found.append([name, info.get("dtype"), info.get("shape"),
                          _hash_span(handle, end - start, bad)])
    return found


def _offsets(info, bad) -> tuple[int, int]:
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2 and
            all(isinstance(x, int) and not isinstance(x, bool) for x in offsets) and
            0 <= offsets[0] <= offsets[1]):
        raise bad
    return offsets[0], offsets[1]


def _hash_span(handle, length: int, bad) -> str:
    digest = hashlib.sha256()
    while length > 0:
        block = handle.read(min(BLOCK, length))
        if not block:
            raise bad
        digest.update(block)
        length -= len(block)
    return digest.hexdigest()
