"""Reading a submitted model's folder without ever following a link.

A folder is opened component by component from the model root's file descriptor, each with
`O_NOFOLLOW`, so a link anywhere on the way is refused rather than followed; a file is opened
the same way from its folder's descriptor, checked on that descriptor (`fstat`: a regular file
with one name, so neither a link, a device nor a hard link to a file elsewhere) and read from
it. What is checked is what is read: swapping a file for a link between listing and reading
makes the read fail, it never reads the link's target. Names, entries and bytes are bounded.
Every error is a one-line DataError (field `evaluate`) that names the file relative to the
model folder as the participant named it, never a path of the server.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import DataError

#: the flag that refuses a link where a name is opened (tests take it away to show the race)
NO_FOLLOW = os.O_NOFOLLOW
#: the longest name of one path component, and of a whole SOURCE (characters)
MAX_NAME_BYTES = 255
MAX_SOURCE_CHARS = 512
BLOCK = 1 << 20


def before_open(name: str) -> None:
    """Called just before each file is opened (a seam for the tests' race; does nothing)."""


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str        # "file", "folder", "link" or "other"
    size: int        # logical bytes (a sparse file counts in full)
    disk: int        # bytes it occupies on disk
    changed: tuple[int, int] = (0, 0)  # inode and ctime: new whenever it is written or moved


def refuse(message: str) -> DataError:
    return DataError(message, field="evaluate")


def check_source_name(source: str) -> list[str]:
    """The components of a folder SOURCE, checked by form alone (no filesystem call): a
    relative name without `.`/`..`, of bounded length."""
    if len(source) > MAX_SOURCE_CHARS:
        raise refuse(f"a model name holds at most {MAX_SOURCE_CHARS} characters "
                     f"(this one: {len(source)})")
    if source.startswith(("/", "~")):
        raise refuse("a model folder is named relative to the model root, without '..'")
    parts = [part for part in source.split("/") if part]
    if any(part in (".", "..") for part in parts) or "\\" in source:
        raise refuse("a model folder is named relative to the model root, without '..'")
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in parts):
        raise refuse(f"a part of the model name is longer than {MAX_NAME_BYTES} bytes")
    return parts


class Folder:
    """An open folder (its descriptor); `shown` is how errors name it."""

    def __init__(self, descriptor: int, shown: str):
        self.descriptor, self.shown = descriptor, shown

    @classmethod
    def under(cls, root: str | Path, source: str) -> Folder | None:
        """The folder SOURCE names under `root`, every component opened without following a
        link; None when there is no such folder; a DataError when a component is a link or
        not a folder."""
        parts = check_source_name(source)
        try:
            current = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            raise refuse("this instance's model root cannot be read") from None
        for part in parts:
            try:
                following = os.open(part, os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW |
                                    os.O_CLOEXEC, dir_fd=current)
            except OSError as error:
                os.close(current)
                if error.errno == errno.ENOENT:
                    return None
                raise refuse(f"{source!r} is not a folder under the model root (links are "
                             f"never followed)") from None
            os.close(current)
            current = following
        return cls(current, source)

    @classmethod
    def at(cls, path: str | Path, shown: str) -> Folder:
        """A folder the server made itself (a hub download in its scratch folder)."""
        return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), shown)

    def child(self, name: str) -> Folder:
        """The sub-folder `name` of this folder, opened without following a link (a link or
        anything but a folder is a DataError naming it)."""
        if not name or "/" in name or name in (".", ".."):
            raise refuse(f"{name!r} is not a folder of the model folder")
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | NO_FOLLOW | os.O_CLOEXEC,
                                 dir_fd=self.descriptor)
        except OSError:
            raise refuse(f"{self.shown}/{name} is not a folder (links are never "
                         f"followed)") from None
        return Folder(descriptor, f"{self.shown}/{name}")

    def close(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def entries(self, max_entries: int) -> list[Entry]:
        """The folder's own entries (hidden ones left out), at most `max_entries`, never
        followed; listing stops as soon as there are more."""
        found = []
        with os.scandir(self.descriptor) as listing:
            for item in listing:
                if item.name.startswith("."):
                    continue
                if len(found) == max_entries:
                    raise refuse(f"the model folder holds more than {max_entries} files "
                                 f"(this instance's limit)")
                found.append(_entry(item))
        return sorted(found, key=lambda entry: entry.name)

    def open_file(self, name: str) -> int:
        """A descriptor of the plain file `name` of this folder (opened without following a
        link, checked on the descriptor)."""
        if "/" in name or name in (".", ".."):
            raise refuse(f"{name!r} is not a file of the model folder")
        before_open(name)
        try:
            descriptor = os.open(name, os.O_RDONLY | NO_FOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                 dir_fd=self.descriptor)
        except OSError as error:
            reason = "is a link: links are never followed" if error.errno == errno.ELOOP \
                else "cannot be read"
            raise refuse(f"{name} {reason}") from None
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(descriptor)
            raise refuse(f"{name} is not a plain file (links, hard links and devices are "
                         f"never read)")
        return descriptor

    def read_bytes(self, name: str, limit: int, *, cut: bool = False) -> bytes:
        """The file's bytes; past `limit`, its first `limit` bytes (`cut`) or a DataError."""
        with os.fdopen(self.open_file(name), "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit and not cut:
            raise refuse(f"{name} is larger than {limit} bytes")
        return data[:limit]

    def copy(self, name: str, target: Path, budget: Callable[[int], None]) -> str:
        """Copy the file to `target` as it is read; its sha256. `budget(n)` is told of every
        block read (it raises when the model's limit is passed, however the file grows)."""
        digest = hashlib.sha256()
        with os.fdopen(self.open_file(name), "rb") as source, open(target, "wb") as out:
            for block in iter(lambda: source.read(BLOCK), b""):
                budget(len(block))
                digest.update(block)
                out.write(block)
        return digest.hexdigest()


def _entry(item: os.DirEntry) -> Entry:
    if item.is_symlink():
        return Entry(item.name, "link", 0, 0)
    info = item.stat(follow_symlinks=False)
    kind = "file" if stat.S_ISREG(info.st_mode) else \
        "folder" if stat.S_ISDIR(info.st_mode) else "other"
    return Entry(item.name, kind, info.st_size, info.st_blocks * 512,
                 (info.st_ino, info.st_ctime_ns))
