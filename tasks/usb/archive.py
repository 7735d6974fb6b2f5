"""The processed archive of the Hugging Face dataset ``kundank/usb`` (``processed_data.tar.gz``),
downloaded once and extracted safely into ``$SUMBENCH_CACHE/usb/<revision>`` (default
``~/.cache/sumbench/usb/main``).

The cache is keyed by the revision *name*: a branch such as "main" (the default) is cached
as first downloaded and never looked up again until it is refreshed (`fetch_archive(
refresh=True)`, `sumbench data fetch --refresh`): the archive is downloaded again and its
sha256 compared with the one recorded in ``archive_info.json``; only a different archive is
extracted again (atomically: the old extraction stays until the new one is complete). Pass a
commit hash as the revision to pin the data.
"""
from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import file_sha256, write_json
from tasks.usb.layout import HOW_TO_GET_DATA, find_data_root

HUB_REPO_ID = "kundank/usb"
HUB_FILENAME = "processed_data.tar.gz"
CACHE_ENV = "SUMBENCH_CACHE"
ARCHIVE_INFO_FILE = "archive_info.json"
EXTRACTED_FOLDER = "extracted"

Downloader = Callable[..., str]


def default_cache_dir() -> Path:
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sumbench"
    return Path(root).expanduser() / "usb"


def _cache_key(revision: str | None) -> str:
    key = (revision or "main").replace("/", "_").replace("\\", "_")
    if key in ("", ".", ".."):
        raise DataError(f"invalid revision '{revision}'")
    return key


def _download(downloader: Downloader | None, revision: str | None, cache_root: Path) -> Path:
    if downloader is None:
        try:
            from huggingface_hub import hf_hub_download as downloader
        except ImportError as error:
            raise DataError(f"USB task data is not available: huggingface_hub cannot be "
                            f"imported ({error}). {HOW_TO_GET_DATA}") from None
    try:
        path = downloader(repo_id=HUB_REPO_ID, filename=HUB_FILENAME, repo_type="dataset",
                          revision=revision)
    except Exception as error:  # hub errors vary by version; all mean "no archive"
        reason = (str(error).strip().splitlines() or [""])[0][:200]
        raise DataError(
            f"USB task data is not available: nothing is cached under {cache_root} and "
            f"downloading {HUB_FILENAME} from the Hugging Face dataset {HUB_REPO_ID} failed "
            f"({type(error).__name__}: {reason}). {HOW_TO_GET_DATA}") from None
    if not Path(path).is_file():
        raise DataError("the downloader returned no file", path=str(path))
    return Path(path)


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    name = member.name
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"):
        raise DataError(f"unsafe archive member '{name}' (absolute path or '..'); refusing to "
                        f"extract", path=str(archive))
    if not (member.isfile() or member.isdir()):
        raise DataError(f"archive member '{name}' is a link or special file; refusing to "
                        f"extract", path=str(archive))


def release_info(folder: str | Path) -> dict | None:
    """The `archive_info.json` of the official release when `folder` lies in a `sumbench data
    fetch` extraction (it is written beside the `extracted/` folder), else None."""
    path = Path(folder).resolve()
    for parent in [path, *path.parents][:6]:
        if parent.name == EXTRACTED_FOLDER:
            info = _read_archive_info(parent.parent)
            return info if info is not None and info.get("repo_id") == HUB_REPO_ID else None
    return None


def extract_archive_safely(archive: str | Path, target: str | Path) -> None:
    """Extract a .tar(.gz) into `target`, all or nothing; unsafe members are rejected first."""
    archive, target = Path(archive), Path(target)
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, archive)
            with atomic_directory(target) as staging:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(staging, members=members, filter="data")
                else:  # members were checked above
                    tar.extractall(staging, members=members)
    except (tarfile.TarError, EOFError, OSError) as error:
        raise DataError(f"cannot read the archive ({error})", path=str(archive)) from None


#: what `fetch_archive` did, for people (FetchResult.message)
FETCH_MESSAGES = {
    "cached": "using the cached archive (sha256 {new}); --refresh checks the hub for a new one",
    "downloaded": "downloaded and extracted the archive (sha256 {new})",
    "unchanged": "the archive is unchanged (sha256 {new}); the cached data is kept",
    "updated": "the archive changed (sha256 {old} -> {new}); extracted it again",
    "repaired": "the cached extraction was damaged; extracted the archive (sha256 {new}) again",
}


@dataclass(frozen=True)
class FetchResult:
    """What `fetch_archive` did: `status` is one of FETCH_MESSAGES: "cached" (nothing
    downloaded), "downloaded" (first download), or after a refresh "unchanged" (same sha256,
    extraction kept), "updated" (a different archive, extracted again) or "repaired"."""
    data_dir: Path
    sha256: str | None
    status: str
    previous_sha256: str | None = None

    def message(self) -> str:
        return FETCH_MESSAGES[self.status].format(new=self.sha256, old=self.previous_sha256)


def _read_archive_info(target: Path) -> dict | None:
    try:
        info = json.loads((target / ARCHIVE_INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _hub_commit(archive: Path) -> str | None:
    """The commit of a hub-cache path (.../snapshots/<commit>/<file>), when it is one."""
    name = archive.parent.name
    return name if archive.parent.parent.name == "snapshots" and re.fullmatch(
        r"[0-9a-f]{40}", name) else None


def _extract_into_cache(archive: Path, target: Path, revision: str | None,
                        digest: str) -> None:
    """Extract `archive` into `target` (replacing it whole, or leaving it untouched)."""
    with atomic_directory(target) as staging:
        extract_archive_safely(archive, staging / EXTRACTED_FOLDER)
        find_data_root(staging / EXTRACTED_FOLDER)  # fail before caching a bad archive
        write_json(staging / ARCHIVE_INFO_FILE, {
            "repo_id": HUB_REPO_ID, "filename": HUB_FILENAME, "revision": revision,
            "commit": _hub_commit(archive), "sha256": digest,
            "files": _file_sizes(staging / EXTRACTED_FOLDER)})


def _file_sizes(folder: Path) -> dict[str, int]:
    """{relative POSIX path: size in bytes} of every file under `folder`."""
    return {path.relative_to(folder).as_posix(): path.stat().st_size
            for path in sorted(folder.rglob("*")) if path.is_file()}


def _cache_intact(target: Path, info: dict) -> bool:
    """Whether the extraction still holds every file it was extracted with, at its size
    (caches written before sizes were recorded: whether the data folder is there)."""
    if _extracted_root(target) is None:
        return False
    recorded = info.get("files")
    if not isinstance(recorded, dict):
        return True
    folder = target / EXTRACTED_FOLDER
    for relative, size in recorded.items():
        try:
            if (folder / relative).stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def _extracted_root(target: Path) -> Path | None:
    try:
        return find_data_root(target / EXTRACTED_FOLDER)
    except (DataError, OSError):
        return None


def fetch_archive(*, cache_dir: str | Path | None = None, revision: str | None = None,
                  downloader: Downloader | None = None, refresh: bool = False) -> FetchResult:
    """The cached hub archive's data folder, downloading it when absent; with `refresh`,
    download again and extract again only when its sha256 differs from the recorded one
    (or the extraction is damaged). See the module docstring."""
    cache_root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    target = cache_root / _cache_key(revision)
    info = _read_archive_info(target)
    if info is not None and not refresh and _cache_intact(target, info):
        return FetchResult(find_data_root(target / EXTRACTED_FOLDER), info.get("sha256"),
                           "cached")
    damaged = info is not None and not refresh
    archive = _download(downloader, revision, cache_root)
    digest = file_sha256(archive)
    previous = info.get("sha256") if info else None
    if previous == digest and not damaged and _cache_intact(target, info):
        return FetchResult(_extracted_root(target), digest, "unchanged", previous)
    _extract_into_cache(archive, target, revision, digest)
    status = ("downloaded" if previous is None else
              "repaired" if previous == digest or damaged else "updated")
    return FetchResult(find_data_root(target / EXTRACTED_FOLDER), digest, status, previous)


def fetch_processed_data(*, cache_dir: str | Path | None = None, revision: str | None = None,
                         downloader: Downloader | None = None, force: bool = False) -> Path:
    """Download (once) and extract the hub's processed archive; return its data folder.

    `downloader` is called as hf_hub_download(repo_id=, filename=, repo_type=, revision=)
    and returns a local file path; tests pass a function returning a local archive.
    `force`: refresh (download again, compare sha256, extract again when it changed).
    """
    return fetch_archive(cache_dir=cache_dir, revision=revision, downloader=downloader,
                         refresh=force).data_dir
