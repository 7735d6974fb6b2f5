"""Where a submitted model comes from, and whether the server may load it.

A SOURCE is a folder under the instance's model root (`serve`/`worker --model-root DIR`: a
lab's shared storage) or a hub model id. A folder name is relative, holds no `..`, and neither
it nor any file in it (links included) leads out of the root. A model is loaded from
safetensors files only (a pickle can run code), never with its own code, and its files may
hold at most `max_model_bytes`. The worker copies what it checked into its own scratch folder
(`copy_checked`) and loads that copy, so the files it loads are the files it hashed, whatever
happens to the shared folder meanwhile. The content digest is the sha256 over the files'
relative paths and their own sha256, in path order (hidden files such as `.cache/` left out):
the same files anywhere give the same digest.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from tasks.errors import DataError

#: a hub model id: `name` or `owner/name`
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
#: weight formats that unpickle (can run code when loaded): never loaded here
PICKLED = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
#: the files fetched of a hub model: configuration, tokenizer, safetensors weights, card
HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.md", "*.tiktoken"]


@dataclass(frozen=True)
class ModelSource:
    """A resolved SOURCE: `kind` "folder" (an absolute path inside the model root) or "hub"."""
    kind: str
    name: str                 # as submitted
    path: str | None = None   # the folder (kind "folder")
    revision: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def resolve_source(source: str, model_root: str | None, revision: str | None = None
                   ) -> ModelSource:
    """The folder under `model_root` that SOURCE names, else the hub model it names; a
    DataError (field `evaluate`) for anything else."""
    if not isinstance(source, str) or not source.strip() or "\0" in source:
        raise DataError("name a model: a folder under the model root or a hub model id",
                        field="evaluate")
    source = source.strip()
    if model_root is not None:
        folder = folder_under(source, model_root)
        if folder is not None:
            return ModelSource("folder", source, str(folder), revision)
    if HUB_ID.match(source) and ".." not in source:
        return ModelSource("hub", source, None, revision)
    where = "a folder under this instance's model root" if model_root else \
        "a folder (this instance has no model root)"
    raise DataError(f"{source!r} is neither {where} nor a hub model id (owner/name)",
                    field="evaluate")


def folder_under(source: str, model_root: str) -> Path | None:
    """The folder `source` names under the root, or None when there is none; a DataError
    when the name would lead out of the root."""
    parts = Path(source).parts
    if Path(source).is_absolute() or ".." in parts or source.startswith("~"):
        raise DataError("a model folder is named relative to the model root, without '..'",
                        field="evaluate")
    root = Path(model_root).resolve()
    folder = (root / source)
    if not folder.is_dir():
        return None
    resolved = folder.resolve()
    if not is_inside(resolved, root):
        raise DataError(f"{source!r} leads out of the model root (a link)", field="evaluate")
    return resolved


def is_inside(path: Path, root: Path) -> bool:
    return os.path.commonpath([str(path), str(root)]) == str(root)


def model_files(folder: Path, root: Path | None = None) -> list[Path]:
    """The folder's files (hidden ones left out), checked: no link out of `root` (or the
    folder), safetensors weights present, no pickled weights."""
    bound = (root or folder).resolve()
    files = sorted(path for path in folder.rglob("*") if path.is_file() and not any(
        part.startswith(".") for part in path.relative_to(folder).parts))
    for path in files:
        if not is_inside(path.resolve(), bound):
            raise DataError(f"{path.relative_to(folder)} links out of the model root",
                            field="evaluate")
    pickled = [path.name for path in files if path.suffix.lower() in PICKLED]
    if pickled:
        raise DataError(f"pickled weights ({', '.join(pickled[:3])}) are never loaded here: "
                        f"save the model with safetensors", field="evaluate")
    if not any(path.suffix == ".safetensors" for path in files):
        raise DataError("no safetensors weights in the model folder", field="evaluate")
    return files


def check_size(files: list[Path], max_bytes: int) -> None:
    total = sum(path.stat().st_size for path in files)
    if total > max_bytes:
        raise DataError(f"the model's files hold {total} bytes, over this instance's limit of "
                        f"{max_bytes}", field="evaluate")


def content_digest(folder: Path, files: list[Path], max_bytes: int,
                   copy_to: Path | None = None, root: Path | None = None) -> str:
    """sha256 over (relative path, file sha256) in path order; a DataError when the files
    hold more than `max_bytes`. With `copy_to`, each file is copied there as it is read (the
    digest is of the copy), after checking once more that it does not lead out of `root`."""
    check_size(files, max_bytes)
    digest = hashlib.sha256()
    for path in files:
        relative = path.relative_to(folder)
        if root is not None and not is_inside(path.resolve(), root.resolve()):
            raise DataError(f"{relative} links out of the model root", field="evaluate")
        file_digest = hashlib.sha256()
        target = None
        if copy_to is not None:
            (copy_to / relative).parent.mkdir(parents=True, exist_ok=True)
            target = open(copy_to / relative, "wb")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                file_digest.update(block)
                if target is not None:
                    target.write(block)
        if target is not None:
            target.close()
        digest.update(json.dumps([relative.as_posix(), file_digest.hexdigest()]).encode())
    return digest.hexdigest()


def hub_size(name: str, revision: str | None) -> int:
    """The bytes of the files a hub model would be fetched with (`HUB_PATTERNS`)."""
    import fnmatch

    from huggingface_hub import HfApi

    info = HfApi().model_info(name, revision=revision, files_metadata=True, token=False)
    return sum(sibling.size or 0 for sibling in info.siblings or ()
               if any(fnmatch.fnmatch(sibling.rfilename.split("/")[-1], pattern)
                      for pattern in HUB_PATTERNS))


def model_card(folder: Path, limit: int = 20_000) -> str | None:
    """The model folder's README.md (its card), at most `limit` characters."""
    path = folder / "README.md"
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")[:limit]
