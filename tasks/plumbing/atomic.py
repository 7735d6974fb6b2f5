"""All-or-nothing writes: a file or folder appears whole at its path, or not at all.

`atomic_path(path)` yields a staging file name beside `path` and moves it into place on
success (the old file stays on failure); devices, pipes, sockets and links to a process's
open files (`/dev/stdout`) are not replaced but appended to from the staging file on success.
`atomic_directory(path)` does the same for a folder (and refuses devices and pipes); an error
while the folder is written names the file at its place in the output, not in the staging
folder. Staging files of killed writers are removed (`remove_stale_staging`).
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tasks.plumbing.errors import SumbenchError


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # restrictive for the instant the real mask is out
    os.umask(mask)
    return mask


def _file_mode(path: Path) -> int:
    """The mode `open(path, "w")` would leave: the existing file's, else 0o666 & ~umask."""
    try:
        existing = os.stat(path)
    except OSError:
        return 0o666 & ~current_umask()
    return stat.S_IMODE(existing.st_mode) if stat.S_ISREG(existing.st_mode) \
        else 0o666 & ~current_umask()


def _remove(path: Path) -> None:
    """Delete a file, link or folder tree if it is there (errors ignored)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_stale_staging(path: Path, suffix: str) -> list[Path]:
    """Remove the staging files/folders of `path` (`.NAME.PID.RANDOM<suffix>`) left by a
    killed process on this machine (its pid is gone); those of live writers stay."""
    removed = []
    for candidate in path.parent.glob(f".{glob_escape(path.name)}.*{suffix}"):
        middle = candidate.name[len(path.name) + 2:-len(suffix)]
        pid_text = middle.split(".", 1)[0]
        if pid_text.isdigit() and "." in middle and not _pid_alive(int(pid_text)):
            _remove(candidate)
            removed.append(candidate)
    return removed


def glob_escape(name: str) -> str:
    """`name` with glob metacharacters escaped."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


#: errors of a write that the system reports without a file name (full disk, quota, ...)
WRITE_FAULTS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EROFS})


#: paths that stand for a process's open files (`/dev/stdout` links to /proc/self/fd/1)
OPEN_FILE_LINKS = ("/proc/", "/dev/fd/", "/dev/stdout", "/dev/stderr")


def is_special_file(path: Path) -> bool:
    """Whether `path` is to be written in place, never replaced: a character or block device,
    a pipe or a socket (links followed), or a link to an open file of a process
    (`/dev/stdout` redirected to a file: replacing the link would break it)."""
    text = os.path.abspath(path)
    if text.startswith(OPEN_FILE_LINKS) or (
            path.is_symlink() and os.readlink(path).startswith(OPEN_FILE_LINKS)):
        return path.exists()
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or \
        stat.S_ISSOCK(mode)


def _written_in_place(path: Path) -> Iterator[str]:
    """A temporary file whose content is appended to `path` on success: a device or pipe is
    never replaced, and a redirected stdout (`>> log`) keeps what it holds."""
    fd, tmp = tempfile.mkstemp(prefix="sumbench-", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as written, open(path, "ab") as target:
            shutil.copyfileobj(written, target)
    finally:
        os.unlink(tmp)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary file path beside `path`; move it into place only on success.

    The file gets the mode a plain `open(path, "w")` would give (not mkstemp's 0600). A
    device, pipe or socket (`/dev/null`, `/dev/stdout`) is written in place: moving a file
    over it would replace the device itself (as root, `/dev/null` for every process).
    """
    path = Path(path)
    if is_special_file(path):
        yield from _written_in_place(path)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path, ".tmp")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                                   dir=path.parent)
    except OSError as error:  # name the file asked for, not the temporary one
        raise OSError(error.errno, f"cannot write {path.name} here ({error.strerror})",
                      str(path.parent)) from None
    try:
        os.fchmod(fd, _file_mode(path))
    finally:
        os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as error:  # a full disk names no file: name the one being written
        if error.filename is None and error.errno in WRITE_FAULTS:
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a staging directory; on success it replaces `path`, on failure it is removed.

    Bad input therefore never leaves a partial output folder behind, and a failed swap puts
    the previous folder back. The folder gets `mkdir`'s mode (0o777 & ~umask), not 0700.
    """
    path = Path(path)
    if is_special_file(path):  # never moved aside and replaced by a folder
        raise SumbenchError(f"{path} is a device, pipe or socket, not a folder; give a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path, ".partial")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.",
                                        suffix=".partial", dir=path.parent))
    except OSError as error:  # name the folder asked for, not the staging one
        raise OSError(error.errno, f"cannot create {path.name} here ({error.strerror})",
                      str(path.parent)) from None
    try:
        os.chmod(staging, 0o777 & ~current_umask())
        yield staging
        if path.exists():
            _swap_in(staging, path)
        else:
            os.replace(staging, path)
    except OSError as error:  # name the output, never the staging folder
        output_name = _output_name(error, staging, path)
        if output_name is None:
            raise
        raise OSError(error.errno, error.strerror, output_name) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _output_name(error: OSError, staging: Path, path: Path) -> str | None:
    """What an error while writing `staging` should name instead: the file it names at its
    place in `path`, or `path` for a write fault naming no file (a full disk); None when
    the error is about something else."""
    if error.filename is None:
        return str(path) if error.errno in WRITE_FAULTS else None
    named = Path(os.fsdecode(error.filename))
    return str(path / named.relative_to(staging)) if named.is_relative_to(staging) else None


def _swap_in(staging: Path, path: Path) -> None:
    """Replace the existing `path` by `staging`; if that fails, the old `path` is restored."""
    backup = path.with_name(f".{path.name}.old")
    _remove(backup)
    try:
        os.replace(path, backup)
    except OSError as error:  # name the output, not the internal backup beside it
        raise OSError(error.errno, f"cannot replace it ({error.strerror})", str(path)) from None
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(backup, path)
        raise
    _remove(backup)
