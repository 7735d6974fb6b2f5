"""One writer per output folder: a lock file beside the folder names its owner.

`output_lock(folder, command)` creates `.<name>.sumbench-lock` in the folder's parent holding
the owner (pid, host, process start time, command, time); a second process that wants the same
folder refuses with a message naming the owner. The lock is written to a spare file and
hard-linked into place, so it never exists empty (where hard links fail: O_EXCL creation, then
the write; an empty lock gets EMPTY_GRACE_SECONDS to be written).

A lock whose owner is gone is stale and replaced, with a note on stderr: on the same host,
when the pid is dead, a zombie, or now belongs to a process that started later. A process on
another host (a cluster's shared file system) cannot be asked, so the owner refreshes the lock
file's modification time every HEARTBEAT_SECONDS while it runs, and another host's lock not
refreshed for STALE_AFTER_SECONDS (a job killed with SIGKILL, a node that went down) is stale.
A stale lock is removed only by a process holding the breaker (`flock` on `<lock>.break`,
which the kernel lets go of when its holder dies), and only if the lock is still the very file
that was judged stale (device, inode, modification time, size and content): two processes
that found the same stale lock never both take the folder, nor remove a new owner's lock.

The lock sits beside the folder, not in it, so resuming, "folder not empty" checks and the
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
from collections.abc import Iterator
from pathlib import Path

from tasks.plumbing.errors import SumbenchError

LOCK_SUFFIX = ".sumbench-lock"
HEARTBEAT_SECONDS = 60.0
#: another host's lock not refreshed for this long is stale (ten heartbeats: a slow shared file
#: system or clocks a few minutes apart do not make a live owner look gone)
STALE_AFTER_SECONDS = 600.0
#: an empty lock younger than this is being written (file systems without hard links)
EMPTY_GRACE_SECONDS = 10.0
#: how long `acquire` keeps trying while other processes remove a stale lock
ACQUIRE_SECONDS = 15.0
#: a spare file (written, then linked as the lock) older than this was left by a killed process
SPARE_STALE_SECONDS = 60.0
_HAS_PROC = os.path.exists("/proc/self/stat")


class FolderInUseError(SumbenchError):
    """Another live process writes the same output folder."""


def lock_path(folder: str | os.PathLike) -> Path:
    """The lock file of an output folder (absolute, symlinks resolved)."""
    folder = Path(folder).expanduser().resolve()
    return folder.parent / f".{folder.name}{LOCK_SUFFIX}"


# ---- owners ---------------------------------------------------------------------------------
def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (Linux), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_field(fields: list[str] | None) -> str | None:
    """The process start time (clock ticks since boot) among `_proc_stat`'s fields."""
    return fields[19] if fields is not None and len(fields) > 19 else None


def _process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (Linux), or None elsewhere."""
    return _start_field(_proc_stat(pid))


def _seconds_since_refresh(path: Path) -> float | None:
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def _owner_alive(owner: dict, path: Path) -> bool:
    """Whether the owner recorded in a lock file still runs; on another host, whether it
    refreshed the lock within STALE_AFTER_SECONDS (a lock gone meanwhile holds no one)."""
    if owner.get("host") != socket.gethostname():
        age = _seconds_since_refresh(path)
        return age is not None and age < STALE_AFTER_SECONDS
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat(pid)  # read once: the state and the start time
    if fields is None:
        return not _HAS_PROC  # gone since (Linux), or no /proc to ask
    if fields[0] == "Z":  # a zombie has exited; its parent only has not reaped it
        return False
    started = owner.get("process_start")
    return started is None or _start_field(fields) in (None, started)


def _read_owner(path: Path) -> dict:
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _owner_record(command: str) -> dict:
    """This process as a lock's owner; `token` tells this taking of a lock from any other."""
    import uuid

    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
            "process_start": _process_start(os.getpid()),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "token": uuid.uuid4().hex}


def _identity(path: Path) -> tuple | None:
    """What tells one lock file from a later one at the same path (None: there is none)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size


# ---- creating and removing lock files -------------------------------------------------------
def _write_spare(spare: Path, owner: dict) -> None:
    spare.write_text(json.dumps(owner), encoding="utf-8")


def _create(path: Path, owner: dict) -> bool:
    """Create `path` holding `owner`, only if it does not exist: written to a spare file and
    linked into place; where hard links fail, O_EXCL creation and then the write."""
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


@contextlib.contextmanager
def _breaker(path: Path) -> Iterator[bool]:
    """Hold `<lock>.break` exclusively while a stale lock is removed: yields True when held
    (or where the file system has no flock), False when another process holds it. The holder
    removes the file before letting go, and a holder whose file was removed or replaced
    meanwhile yields False, so that only the current file's holder ever counts."""
    breaker = path.with_name(path.name + ".break")
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the identity check alone guards
        yield True
        return
    descriptor = os.open(breaker, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        except OSError as error:
            if error.errno not in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
                raise
            yield True  # no flock on this file system
            return
        opened = os.fstat(descriptor)
        current = _identity(breaker)
        if current is None or current[:2] != (opened.st_dev, opened.st_ino):
            yield False
            return
        try:
            yield True
        finally:
            with contextlib.suppress(FileNotFoundError):
                breaker.unlink()
    finally:
        os.close(descriptor)


def _remove_stale(path: Path, seen: dict, identity: tuple) -> None:
    """Remove the lock judged stale (`seen`, read from the file of `identity`) if it is still
    that file, while holding the breaker; returns at once when another process holds it."""
    with _breaker(path) as held:
        if not held:
            time.sleep(0.05)
            return
        if _identity(path) != identity or _read_owner(path) != seen:
            return  # removed or replaced since it was judged
        if seen and _owner_alive(seen, path):
            return
        print(f"sumbench: note: removing the stale lock {path} ({_gone(seen, path)})",
              file=sys.stderr)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# ---- taking and letting go ------------------------------------------------------------------
def acquire(folder: str | os.PathLike, command: str, owner: dict | None = None) -> Path:
    """Take the lock of `folder` for `command` (as `owner`, by default this process) or raise
    FolderInUseError naming the owner."""
    path, owner = lock_path(folder), owner or _owner_record(command)
    _sweep_spares(path)
    deadline = time.monotonic() + ACQUIRE_SECONDS
    try:
        while time.monotonic() < deadline:
            if _create(path, owner):
                return path
            identity, current = _identity(path), _read_owner(path)
            if identity is None:
                continue  # removed meanwhile: try again
            if current and _owner_alive(current, path):
                raise FolderInUseError(_in_use(folder, path, current))
            if not current and (_seconds_since_refresh(path) or 0.0) < EMPTY_GRACE_SECONDS:
                time.sleep(0.05)  # an owner may be writing it
                continue
            _remove_stale(path, current, identity)
    except BaseException:
        _release_if(path, owner)  # interrupted after this lock was linked in: let go of it
        raise
    raise FolderInUseError(f"cannot take the lock {path}: another process keeps taking it")


def _in_use(folder, path: Path, owner: dict) -> str:
    return (f"{Path(folder)} is in use by 'sumbench {owner.get('command', '?')}' (pid "
            f"{owner.get('pid')} on {owner.get('host')}, since {owner.get('since')}"
            f"{_refreshed(owner, path)}); wait for it to finish, or delete {path} if that "
            f"process is gone")


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


def _release_if(path: Path, owner: dict) -> None:
    """Drop the lock if it is the one taken as `owner` (its token)."""
    if _read_owner(path) == owner:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _unlocked_is_fine(folder: str | os.PathLike, error: OSError) -> bool:
    """A folder that exists and can be written, under a parent that cannot (a writable volume
    mounted under a read-only one): the command runs, without the lock."""
    return error.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and \
        Path(folder).is_dir() and os.access(folder, os.W_OK | os.X_OK)


def _acquire_in(parent: Path, folder, command: str, owner: dict) -> Path:
    """Make the lock's parent folder and take the lock; again when a sibling command removed
    the parent it had made in between (a failed command leaves nothing)."""
    for attempt in range(3):
        try:
            # mkdir's own error names the path at fault; FileExistsError is its answer when
            # a folder it found is removed before it checks it is a folder
            parent.mkdir(parents=True, exist_ok=True)
            return acquire(folder, command, owner)
        except (FileNotFoundError, FileExistsError):
            if attempt == 2 or any(p.exists() and not p.is_dir()
                                   for p in (parent, *parent.parents)):
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike, command: str,
                heartbeat_seconds: float = HEARTBEAT_SECONDS) -> Iterator[Path | None]:
    """Hold the lock of `folder` for the duration of the block, refreshing it every
    `heartbeat_seconds` (None: a writable folder under a parent where no lock file can be
    written runs unlocked, with a note). Parent folders made for the lock are removed again
    when the block leaves them empty (a failed command leaves nothing)."""
    parent, owner = lock_path(folder).parent, _owner_record(command)
    missing = [parent, *parent.parents]
    missing = missing[:next(i for i, p in enumerate(missing) if p.exists())]
    try:
        try:
            path = _acquire_in(parent, folder, command, owner)
        except OSError as error:
            if not _unlocked_is_fine(folder, error):  # name the folder, not the lock file
                what = "write the lock file beside" if Path(folder).exists() else "create"
                raise OSError(error.errno, f"cannot {what} {Path(folder).name} here "
                              f"({error.strerror})", str(parent)) from None
            print(f"sumbench: note: running without a lock on {folder}: its parent folder "
                  f"is not writable ({error.strerror})", file=sys.stderr)
            path = None
        except BaseException:
            _release_if(lock_path(folder), owner)  # interrupted as the lock was taken
            raise
        yield from _held(path, heartbeat_seconds)
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()


def _held(path: Path | None, heartbeat_seconds: float) -> Iterator[Path | None]:
    """Yield `path` with its heartbeat running; stop it and let go of the lock after, even
    when an interrupt comes in between."""
    heartbeat = None
    try:
        if path is not None:
            heartbeat = _Heartbeat(path, heartbeat_seconds)
        yield path
    finally:
        try:
            if heartbeat is not None:
                heartbeat.stop()
        finally:
            if path is not None:
                release(path)
