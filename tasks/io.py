"""JSON and JSON Lines reading with precise error locations, and all-or-nothing writes."""
from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from tasks.errors import DataError, SumbenchError, json_type

#: a JSON escape of a UTF-16 surrogate (\ud800-\udfff)
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class DuplicateKey(ValueError):
    """A name given twice in one JSON object (json.loads would keep the last silently)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return record


_STRICT_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def strict_loads(text: str) -> Any:
    """`json.loads(text)` that refuses a name given twice in an object (DuplicateKey): RFC
    8259 leaves its meaning open, and "the last one wins" would score a value the file also
    contradicts."""
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _STRICT_DECODER.decode(text)


def duplicate_key_error(error: DuplicateKey, path: str, line: int | None = None) -> DataError:
    return DataError("given twice in one JSON object (which one is meant is ambiguous)",
                     path=path, line=line, field=error.key)


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line number, object) for each non-blank line; errors name file and line
    (`json_line_object`)."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"expected a JSON Lines file, got a folder{_folder_hint(path)}",
                        path=str(path))
    if not path.exists():
        raise DataError("file not found", path=str(path))
    with path.open("rb") as handle:
        for line_number, raw_line in enumerate(handle, start=1):
            record = json_line_object(raw_line, str(path), line_number)
            if record is not None:
                yield line_number, record


def _folder_hint(folder: Path) -> str:
    """Where the JSON Lines files of a folder given instead of a file are, if it has any."""
    for place in (folder / "predictions", folder):
        if place.is_dir() and any(place.glob("*.jsonl")):
            return f" (its JSON Lines files: {place}/*.jsonl)"
    return ""


def json_line_object(raw_line: bytes, path: str, line_number: int) -> dict | None:
    """The JSON object of one line (None for a blank line); a UTF-8 byte order mark before
    the first line is skipped."""
    if line_number == 1:
        raw_line = raw_line.removeprefix(codecs.BOM_UTF8)
    try:
        line = raw_line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"not UTF-8 text ({error.reason} at byte {error.start + 1} of "
                        "the line)", path=path, line=line_number) from None
    if not line.strip():
        return None
    try:
        record = strict_loads(line)
    except json.JSONDecodeError as error:
        document = line_number == 1 and line.strip() in ("{", "[")  # an indented JSON file
        raise DataError(f"malformed JSON ({json_error_text(error)})" + (
            "; this looks like a JSON document, not JSON Lines (one object per line)"
            if document else ""), path=path, line=line_number) from None
    except DuplicateKey as error:
        raise duplicate_key_error(error, path, line_number) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", path=path, line=line_number) from None
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {json_type(record)}",
                        path=path, line=line_number)
    if SURROGATE_ESCAPE.search(line):  # valid UTF-8 holds a lone surrogate only as an escape
        for field, value in record.items():
            if has_lone_surrogate(value):
                raise DataError("a \\ud800-\\udfff escape that is not half of a pair is not "
                                "text", path=path, line=line_number, field=field)
    return record


def json_error_text(error: json.JSONDecodeError) -> str:
    """The parser's message and column ("Invalid control character at" ends in "at")."""
    return f"{error.msg.removesuffix(' at')} at column {error.colno}"


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere in `value` holds a lone surrogate (walked without recursion:
    json.loads accepts nesting as deep as the recursion limit)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def refuse_non_file(path: Path, what: str) -> None:
    """A DataError naming `path` when something other than a regular file stands there (a
    folder, a device); nothing when it is a file or absent."""
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "a special file"
        raise DataError(f"expected {what}, got {kind}", path=str(path))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return [record for _, record in iter_jsonl(path)]


def read_text(path: str | os.PathLike, *, what: str = "file") -> str:
    """The text of a UTF-8 file, a leading byte order mark skipped. A missing file ("<what>
    not found"), an unreadable one or bytes that are not UTF-8 (with their line) is a
    DataError naming the path."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} not found", path=str(path))
    try:
        data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text ({error.reason})", path=str(path), line=line) from None
    except OSError as error:
        raise DataError(f"cannot read the {what} ({error.strerror or error})",
                        path=str(path)) from None


def read_json(path: str | os.PathLike, *, what: str = "file") -> Any:
    """The content of a JSON file: `read_text`'s errors, and malformed JSON as a DataError
    naming the path, line and column."""
    text = read_text(path, what=what)
    try:
        return strict_loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"malformed JSON ({json_error_text(error)})",
                        path=str(Path(path)), line=error.lineno) from None
    except DuplicateKey as error:
        raise duplicate_key_error(error, str(Path(path))) from None
    except RecursionError:
        raise DataError("JSON nested too deeply", path=str(Path(path))) from None


def dumps_record(record: dict) -> str:
    """One JSON line as the official release writes it: json.dumps defaults, raw UTF-8."""
    return json.dumps(record, ensure_ascii=False)


def file_sha256(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_bytes), b""):
            digest.update(block)
    return digest.hexdigest()


def json_text(obj: Any) -> str:
    """A result document as JSON: indent 1, sorted keys, raw UTF-8; NaN/inf is an error."""
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False, ensure_ascii=False)


def write_jsonl(path: str | os.PathLike, records: Iterable[dict]) -> None:
    """Write records atomically: the file appears whole or not at all."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(dumps_record(record) + "\n")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(obj, handle, indent=1, sort_keys=True)
            handle.write("\n")


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
    os.replace(path, backup)
    try:
        os.replace(staging, path)
    except BaseException:
        os.replace(backup, path)
        raise
    _remove(backup)


def check_distinct_files(paths: Sequence[str | os.PathLike]) -> None:
    """A file given twice (by any name) is an error naming both: its records would otherwise
    be reported as duplicates of themselves. Paths that cannot be read are left to the
    reader, which names them."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            continue
        key = (status.st_dev, status.st_ino)
        if key in seen:
            same = "" if os.fspath(path) == seen[key] else f" (as {seen[key]})"
            raise SumbenchError(f"prediction file {os.fspath(path)} is given twice{same}")
        seen[key] = os.fspath(path)
