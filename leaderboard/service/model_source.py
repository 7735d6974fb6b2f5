"""Where a submitted model comes from, which of its files the server loads, and the limits.

A SOURCE is a folder under the instance's model root (`serve`/`worker --model-root DIR`: a
lab's shared storage) or a hub model id. A folder name is relative, holds no `..`, and is
opened without following links (leaderboard.service.nofollow). A model is loaded from
safetensors files only (a pickle can run code), never with its own code.

The server loads exactly the folder's *loaded files*: its configuration (`config.json`,
`generation_config.json`, `adapter_config.json`), tokenizer files (`LOADED_NAMES`) and
safetensors weights (`model.safetensors`, or the shards its `model.safetensors.index.json`
lists by plain name, and `adapter_model.safetensors`), all in the folder itself. Anything else
in the folder (other files, sub-folders, hidden files) is neither read nor copied, so it does
not change the model or its digest. Limits: at most `max_model_files` entries in the folder,
and the loaded files at most `max_model_bytes`, counted by logical size (a sparse file in full)
and by the bytes they occupy on disk.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass

from leaderboard.service.nofollow import Entry, Folder, check_source_name, refuse
from tasks.plumbing.errors import DataError

#: a hub model id: `name` or `owner/name`
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
#: weight formats that unpickle (can run code when loaded): never loaded here
PICKLED = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
#: the files fetched of a hub model: configuration, tokenizer, safetensors weights, card
HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.md", "*.tiktoken", "*.spm",
                "*.jinja"]
INDEX = "model.safetensors.index.json"
ADAPTER_CONFIG = "adapter_config.json"
CARD = "README.md"
#: the files of a folder that transformers and peft load (weights listed by an index too)
LOADED_NAMES = frozenset({
    "config.json", "generation_config.json", ADAPTER_CONFIG, INDEX, "model.safetensors",
    "adapter_model.safetensors", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "spiece.model", "sentencepiece.bpe.model",
    "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt", "source.spm", "target.spm",
    "chat_template.jinja", "chat_template.json"})
#: the most bytes of a JSON file of the model the server reads to plan or check it (a large
#: vocabulary's tokenizer.json holds tens of megabytes)
MAX_JSON_BYTES = 64 << 20
CARD_CHARACTERS = 20_000


@dataclass(frozen=True)
class ModelSource:
    """A resolved SOURCE: `kind` "folder" (under the model root) or "hub"."""
    kind: str
    name: str                 # as submitted
    revision: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ModelLimits:
    max_bytes: int
    max_files: int


@dataclass(frozen=True)
class ModelPlan:
    """The loaded files of a folder (names, in order), and a key of their listing that
    changes whenever one of them is written, replaced or renamed (size, inode, ctime)."""
    files: tuple[str, ...]
    listing_key: str
    has_card: bool


def resolve_source(source: str, model_root: str | None, revision: str | None = None
                   ) -> ModelSource:
    """SOURCE as a folder under `model_root` when there is one, else as a hub model id; a
    DataError (field `evaluate`) for anything else."""
    if not isinstance(source, str) or not source.strip() or "\0" in source:
        raise refuse("name a model: a folder under the model root or a hub model id")
    source = source.strip()
    check_source_name(source)
    if model_root is not None:
        folder = Folder.under(model_root, source)
        if folder is not None:
            folder.close()
            return ModelSource("folder", source, revision)
    if HUB_ID.match(source) and ".." not in source:
        return ModelSource("hub", source, revision)
    where = "a folder under this instance's model root" if model_root else \
        "a folder (this instance has no model root)"
    raise refuse(f"{source!r} is neither {where} nor a hub model id (owner/name)")


def open_source(source: str, model_root: str | None) -> Folder:
    folder = Folder.under(model_root, source) if model_root is not None else None
    if folder is None:
        raise refuse(f"{source!r} is not a folder under the model root")
    return folder


def plan_folder(folder: Folder, limits: ModelLimits,
                loaded_names: frozenset[str] = LOADED_NAMES) -> ModelPlan:
    """The folder's loaded files (`loaded_names` and the index's shards), checked: plain
    files (no link, hard link or device), no pickled weights, safetensors weights present,
    the index's shards named plainly, within the limits."""
    entries = {entry.name: entry for entry in folder.entries(limits.max_files)}
    pickled = [name for name in entries if name.lower().endswith(PICKLED)]
    if pickled:
        raise refuse(f"pickled weights ({', '.join(pickled[:3])}) are never loaded here: "
                     f"save the model with safetensors")
    names = sorted(name for name in entries if name in loaded_names)
    for name in [*names, *([CARD] if CARD in entries else [])]:
        plain_entry(entries[name])
    if INDEX in names:
        names = sorted({*names, *index_shards(folder, entries)})
    if not any(name.endswith(".safetensors") for name in names):
        raise refuse("no safetensors weights in the model folder")
    chosen = [entries[name] for name in names]
    for what, total in (("hold", sum(e.size for e in chosen)),
                        ("occupy on disk", sum(e.disk for e in chosen))):
        if total > limits.max_bytes:
            raise refuse(f"the model's files {what} {total} bytes, over this instance's "
                         f"limit of {limits.max_bytes}")
    return ModelPlan(tuple(names), listing_key(chosen), CARD in entries)


def listing_key(entries: list[Entry]) -> str:
    """A key that changes when any of the entries is written, replaced or renamed."""
    key = json.dumps([[entry.name, entry.size, entry.changed] for entry in entries])
    return hashlib.sha256(key.encode()).hexdigest()


def plain_entry(entry: Entry) -> None:
    if entry.kind == "link":
        raise refuse(f"{entry.name} is a link: links are never followed")
    if entry.kind != "file":
        raise refuse(f"{entry.name} is not a plain file")


def index_shards(folder: Folder, entries: dict[str, Entry]) -> list[str]:
    """The shards `model.safetensors.index.json` lists: plain names of safetensors files of
    the folder itself, else a DataError naming the field (whatever the name points at)."""
    index = read_json(folder, INDEX)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise refuse(f"{INDEX}: weight_map is not a map of tensor names to files")
    if not all(isinstance(shard, str) for shard in weight_map.values()):
        raise refuse(f"{INDEX}: weight_map names a file that is not a safetensors file of "
                     f"the model folder")
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if not (is_plain_name(shard) and shard.endswith(".safetensors") and shard in entries):
            raise refuse(f"{INDEX}: weight_map names a file that is not a safetensors file "
                         f"of the model folder")
        plain_entry(entries[shard])
    return shards


def is_plain_name(name: str) -> bool:
    """A file name of the folder itself: no folder part, not hidden, no `..`."""
    return bool(name) and "/" not in name and "\\" not in name and "\0" not in name and \
        not name.startswith(".") and len(name.encode("utf-8", "surrogatepass")) <= 255


def read_json(folder: Folder, name: str):
    try:
        return json.loads(folder.read_bytes(name, MAX_JSON_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise refuse(f"{name} is not valid JSON") from None
    except RecursionError:
        raise refuse(f"{name} is nested too deeply") from None


def model_card(folder: Folder) -> str | None:
    """The model folder's README.md (its card), at most CARD_CHARACTERS characters."""
    head = folder.read_bytes(CARD, 4 * CARD_CHARACTERS, cut=True)
    return head.decode("utf-8", errors="replace")[:CARD_CHARACTERS]


def hub_size(name: str, revision: str | None) -> int:
    """The bytes of the files a hub model would be fetched with (`HUB_PATTERNS`)."""
    import fnmatch

    from huggingface_hub import HfApi

    info = HfApi().model_info(name, revision=revision, files_metadata=True, token=False)
    return sum(sibling.size or 0 for sibling in info.siblings or ()
               if any(fnmatch.fnmatch(sibling.rfilename.split("/")[-1], pattern)
                      for pattern in HUB_PATTERNS))


def check_hub_size(name: str, revision: str | None, limits: ModelLimits) -> None:
    size = hub_size(name, revision)
    if size > limits.max_bytes:
        raise DataError(f"the model's files hold {size} bytes, over this instance's limit of "
                        f"{limits.max_bytes}", field="evaluate")
