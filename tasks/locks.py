"""One writer per output folder: a lock file beside the folder names its owner.

`output_lock(folder, command)` creates `.<name>.sumbench-lock` in the folder's parent with
O_EXCL and writes the owner (pid, host, process start time, command, time) into it; a second
process that wants the same folder refuses with a message naming the owner. A lock whose owner
is gone (same host, and the pid is dead or now belongs to a process that started later) is
stale: it is replaced, with a note on stderr. The owner's liveness cannot be checked from
another host (a cluster's shared file system), so the owner refreshes the lock file's
modification time every `HEARTBEAT_SECONDS` while it runs, and another host's lock not
refreshed for `STALE_AFTER_SECONDS` (a job killed with SIGKILL, a node that went down) is stale
too. The lock sits beside the folder, not in it, so resuming, "folder not empty" checks and the
files a run writes never see it.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from tasks.errors import SumbenchError

LOCK_SUFFIX = ".sumbench-lock"
HEARTBEAT_SECONDS = 60.0
#: another host's lock not refreshed for this long is stale (ten heartbeats: a slow shared file
#: system or clocks a few minutes apart do not make a live owner look gone)
STALE_AFTER_SECONDS = 600.0


class FolderInUseError(SumbenchError):
    """Another live process writes the same output folder."""


def lock_path(folder: str | os.PathLike) -> Path:
    """The lock file of an output folder (absolute, symlinks resolved)."""
    folder = Path(folder).expanduser().resolve()
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


def _process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (Linux), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def _seconds_since_refresh(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def _owner_alive(owner: dict, path: Path) -> bool:
    """Whether the owner recorded in a lock file still runs; on another host, whether it
    refreshed the lock within STALE_AFTER_SECONDS."""
    if owner.get("host") != socket.gethostname():
        age = _seconds_since_refresh(path)
        return age is None or age < STALE_AFTER_SECONDS
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = owner.get("process_start")
    return started is None or _process_start(pid) in (None, started)


def _read_owner(path: Path) -> dict:
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return owner if isinstance(owner, dict) else {}


#: a breaker lock older than this was left by a process killed while removing a stale lock
BREAKER_STALE_SECONDS = 10.0
#: an empty lock younger than this is being written (file systems without hard links)
EMPTY_GRACE_SECONDS = 10.0
#: how long `acquire` keeps trying while other processes remove a stale lock
ACQUIRE_SECONDS = 15.0
#: a spare file (written, then linked as the lock) older than this was left by a killed process
SPARE_STALE_SECONDS = 60.0


def _owner_record(command: str) -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "process_start": _process_start(os.getpid()),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _write_spare(spare: Path, owner: dict) -> None:
    spare.write_text(json.dumps(owner), encoding="utf-8")


def _create(path: Path, owner: dict) -> bool:
    """Create `path` holding `owner`, only if it does not exist. The content is written to a
    spare file first and linked into place, so the lock is never seen empty; where hard links
    are not supported, O_EXCL creation and then the write (`acquire` gives an empty lock
    EMPTY_GRACE_SECONDS to be written)."""
    if os.path.lexists(path):
        return False
    spare = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}."
                           f"{threading.get_ident()}.new")
    try:
        try:
            _write_spare(spare, owner)
        except OSError:
            if os.path.lexists(path):  # a parent we cannot write, and a lock in it
                return False
            raise
        try:
            os.link(spare, path)
            return True
        except FileExistsError:
            return False
        except OSError:  # no hard links here (vfat, some FUSE and SMB mounts, sshfs)
            pass
    finally:
        with contextlib.suppress(OSError):
            spare.unlink()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(owner, handle)
    return True


def _sweep_spares(path: Path) -> None:
    """Remove spare files of `path` that a killed process left (they live microseconds)."""
    with contextlib.suppress(OSError):
        for spare in path.parent.glob(f"{path.name}.*.new"):
            age = _seconds_since_refresh(spare)
            if age is not None and age > SPARE_STALE_SECONDS:
                with contextlib.suppress(OSError):
                    spare.unlink()


def _breaker_abandoned(breaker: Path) -> bool:
    holder, age = _read_owner(breaker), _seconds_since_refresh(breaker)
    if holder.get("host") == socket.gethostname() and not _owner_alive(holder, breaker):
        return True  # its process is gone
    return age is not None and age > BREAKER_STALE_SECONDS


def _remove_stale(path: Path, seen: dict) -> None:
    """Remove the lock `seen` as stale, under a breaker lock (`<lock>.break`) so that two
    processes never both remove a lock and one of them the other's new one: the lock is read
    again under it and removed only if it is still the stale one. Returns at once when
    another process is removing it (the caller tries again); removes a breaker whose process
    is gone or that is older than BREAKER_STALE_SECONDS."""
    breaker = path.with_name(path.name + ".break")
    if not _create(breaker, _owner_record("remove a stale lock")):
        if _breaker_abandoned(breaker):
            with contextlib.suppress(FileNotFoundError):
                breaker.unlink()
        else:
            time.sleep(0.05)
        return
    try:
        current = _read_owner(path)
        if current == seen and not (current and _owner_alive(current, path)):
            print(f"sumbench: note: removing the stale lock {path} ({_gone(current, path)})",
                  file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    finally:
        with contextlib.suppress(FileNotFoundError):
            breaker.unlink()


def acquire(folder: str | os.PathLike, command: str) -> Path:
    """Take the lock of `folder` for `command` or raise FolderInUseError naming the owner."""
    path, owner = lock_path(folder), _owner_record(command)
    _sweep_spares(path)
    deadline = time.monotonic() + ACQUIRE_SECONDS
    while time.monotonic() < deadline:
        if _create(path, owner):
            return path
        current = _read_owner(path)
        if current and _owner_alive(current, path):
            raise FolderInUseError(
                f"{Path(folder)} is in use by 'sumbench {current.get('command', '?')}' "
                f"(pid {current.get('pid')} on {current.get('host')}, since "
                f"{current.get('since')}{_refreshed(current, path)}); wait for it to finish, "
                f"or delete {path} if that process is gone")
        if not current and (_seconds_since_refresh(path) or 0.0) < EMPTY_GRACE_SECONDS:
            time.sleep(0.05)  # an owner may be writing it
            continue
        _remove_stale(path, current)
    raise FolderInUseError(f"cannot take the lock {path}: another process keeps taking it")


def _refreshed(owner: dict, path: Path) -> str:
    age = _seconds_since_refresh(path)
    if owner.get("host") == socket.gethostname() or age is None:
        return ""
    return f"; refreshed {age:.0f} s ago, stale after {STALE_AFTER_SECONDS:.0f} s without"


def _gone(owner: dict, path: Path) -> str:
    pid, host = owner.get("pid", "?"), owner.get("host")
    if host and host != socket.gethostname():
        age = _seconds_since_refresh(path) or 0.0
        return f"owner pid {pid} on {host} has not refreshed it for {age:.0f} s"
    return f"owner pid {pid} is gone"


class _Heartbeat:
    """Refreshes a held lock's modification time every `interval` seconds until stopped."""

    def __init__(self, path: Path, interval: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(path, interval),
                                        name="sumbench-lock-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self, path: Path, interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(OSError):  # a lock deleted by hand: nothing to refresh
                os.utime(path)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def release(path: Path) -> None:
    """Drop a lock this process holds (a lock owned by someone else, on another host or by an
    earlier process of the same pid, is left alone)."""
    owner = _read_owner(path)
    if (owner.get("pid"), owner.get("host"), owner.get("process_start")) == \
            (os.getpid(), socket.gethostname(), _process_start(os.getpid())):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _unlocked_is_fine(folder: str | os.PathLike, error: OSError) -> bool:
    """A folder that exists and can be written, under a parent that cannot (a writable volume
    mounted under a read-only one): the command runs, without the lock."""
    return error.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and \
        Path(folder).is_dir() and os.access(folder, os.W_OK | os.X_OK)


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike, command: str,
                heartbeat_seconds: float = HEARTBEAT_SECONDS) -> Iterator[Path | None]:
    """Hold the lock of `folder` for the duration of the block, refreshing it every
    `heartbeat_seconds` (None: a writable folder under a parent where no lock file can be
    written runs unlocked, with a note). Parent folders made for the lock are removed again
    when the block leaves them empty (a failed command leaves nothing)."""
    parent = lock_path(folder).parent
    missing = [parent, *parent.parents]
    missing = missing[:next(i for i, p in enumerate(missing) if p.exists())]
    try:
        parent.mkdir(parents=True, exist_ok=True)  # its own error names the path at fault
        try:
            path = acquire(folder, command)
        except OSError as error:
            if not _unlocked_is_fine(folder, error):  # name the folder, not the lock file
                what = "write the lock file beside" if Path(folder).exists() else "create"
                raise OSError(error.errno, f"cannot {what} {Path(folder).name} here "
                              f"({error.strerror})", str(parent)) from None
            print(f"sumbench: note: running without a lock on {folder}: its parent folder "
                  f"is not writable ({error.strerror})", file=sys.stderr)
            path = None
        heartbeat = None if path is None else _Heartbeat(path, heartbeat_seconds)
        try:
            yield path
        finally:
            if heartbeat is not None:
                heartbeat.stop()
                release(path)
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()
