"""The one submission validator, used by `sumbench leaderboard submit --check` and the server.

Input: uploaded files as (name, bytes): JSON Lines prediction files, a run folder's
`results.json` (self-reported metadata, never trusted for scores), or `.tar.gz`/`.tgz`/`.zip`
archives of such files (`.tgz`/`.tar.gz`: gzip only). Archives are checked before anything is
read from them: regular files only (no links, devices or folders escaping the archive), no
absolute or `..` member paths, no two members of one name, member sizes (of any kind) and
the submission's files, plain and unpacked from every archive, under the instance's limit
(`max_bytes`), and at most MEMBERS_PER_FILE members of any kind per allowed file, counted
while a tar listing is read (a zip listing's size is bounded before it is parsed). Damaged, encrypted or unsupported members are refused by name;
members other than `.jsonl` and `results.json` are reported as ignored. Every JSON line must
be UTF-8, a JSON object and at most `max_line_bytes` long (scoring one huge prediction takes
memory far beyond its size: ROUGE-L's table grows with its length); the records then go to
the track's `check` against a manifest (the server's, or one fetched from it by the client;
without one, only the shape is checked). Every problem is reported with its file, line and
field (`SubmissionErrors`).
"""
from __future__ import annotations

import hashlib
import io
import json
import posixpath
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from leaderboard.tracks.base import ErrorCollector, Located, SubmissionErrors
from tasks.errors import DataError
from tasks.io import DuplicateKey, duplicate_key_error, json_line_object, strict_loads

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
#: compressed or archive files that are not read (refused rather than read as JSON Lines)
UNREAD_SUFFIXES = (".tar", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tbz2", ".txz")
RESULTS_NAME = "results.json"
#: archive members of any kind (folders, files that are not read) allowed per allowed file
MEMBERS_PER_FILE = 16
#: what reading a damaged or unsupported archive member can raise
ARCHIVE_FAULTS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError,
                  NotImplementedError, RuntimeError, ValueError)


#: the longest archive member name read (real names are far shorter; a long one would be
#: repeated in every error about its lines)
MAX_MEMBER_NAME_CHARS = 1024
#: the largest tar extended header read (GNU long names, pax records): tarfile reads one
#: whole into memory before anything else can be checked
MAX_EXTENDED_HEADER_BYTES = 64 << 10
EXTENDED_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                         tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose extended headers over MAX_EXTENDED_HEADER_BYTES are refused before
    they are read (a GNU long name of a few GiB in a small gzip file)."""

    def _proc_member(self, archive):
        if self.type in EXTENDED_HEADER_TYPES and self.size > MAX_EXTENDED_HEADER_BYTES:
            raise tarfile.HeaderError(f"an extended header of {self.size} bytes (at most "
                                      f"{MAX_EXTENDED_HEADER_BYTES} are read)")
        return super()._proc_member(archive)


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 64 << 20
    max_records: int = 500_000
    max_files: int = 64
    max_line_bytes: int = 1 << 20

    @classmethod
    def of(cls, settings) -> "Limits":
        return cls(settings.max_upload_bytes, settings.max_records, settings.max_files,
                   settings.max_line_bytes)

    @property
    def max_members(self) -> int:
        """Members of one archive, of any kind, listed before it is refused unread."""
        return MEMBERS_PER_FILE * self.max_files


@dataclass(frozen=True)
class Upload:
    name: str
    data: bytes


@dataclass(frozen=True)
class CheckedSubmission:
    checked: dict[str, list[dict]]        # part -> minimal records in manifest order
    n_records: int
    sha256: str                           # of the uploaded bytes, in order
    results: dict | None                  # a run folder's results.json, if one came along
    ignored: tuple[str, ...] = ()         # archive members that are not read (not .jsonl)


def _safe_member_name(name: str) -> str | None:
    """The normalised member path, or None when it is absolute or leaves the archive."""
    if not name or name.startswith(("/", "\\")) or "\\" in name:
        return None
    normal = posixpath.normpath(name)
    if normal.startswith("../") or normal == ".." or posixpath.isabs(normal):
        return None
    return normal


def _wanted(name: str) -> bool:
    return name.endswith(".jsonl") or posixpath.basename(name) == RESULTS_NAME


def _archiver_litter(name: str) -> bool:
    """macOS's `__MACOSX/` folder and `._name` AppleDouble files: skipped, never reported."""
    parts = name.split("/")
    return "__MACOSX" in parts or parts[-1].startswith("._")


def _check_members(upload: Upload, members: Sequence[tuple[str, str, int]],
                   limits: Limits, room: int) -> None:
    """Refuse an archive before reading it: (name, kind "file" | "dir" | "other", size) of
    every member; absolute or escaping paths, links and special files, and sizes over the
    `room` the submission's other files leave are errors."""
    total, seen = 0, set()
    for name, kind, size in members:
        _check_name_length(upload, name)
        normal = _safe_member_name(name)
        if normal is None:
            raise DataError(f"archive member path {name!r} is absolute or leaves the archive",
                            path=upload.name)
        if kind == "dir":
            continue
        if normal in seen:
            raise DataError(f"the archive holds two members named {normal!r}", path=upload.name)
        seen.add(normal)
        if kind != "file":
            raise DataError(f"archive member {name!r} is a link or special file",
                            path=upload.name)
        total += size
        _check_room(upload, total, limits, room)


def _check_room(upload: Upload, unpacked: int, limits: Limits, room: int) -> None:
    """An archive's members may bring the submission's files to `max_bytes`, no further:
    `room` is what the files before it left."""
    if unpacked > room:
        raise DataError(f"archive unpacks to more than {limits.max_bytes} bytes"
                        if room == limits.max_bytes else
                        f"archive unpacks to more than the {room} bytes left of this "
                        f"instance's {limits.max_bytes} by the submission's other files",
                        path=upload.name)


def _check_name_length(upload: Upload, name: str) -> None:
    if len(name) > MAX_MEMBER_NAME_CHARS:
        raise DataError(f"an archive member name of {len(name)} characters (at most "
                        f"{MAX_MEMBER_NAME_CHARS})", path=upload.name)


def _tar_members(upload: Upload, limits: Limits, ignored: list[str],
                 room: int) -> Iterator[Upload]:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(upload.data), mode="r:gz",
                               tarinfo=BoundedTarInfo)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise DataError(f"not a readable gzip-compressed tar archive ({error})",
                        path=upload.name) from None
    with archive:
        members, declared = [], 0
        try:
            for member in archive:  # headers are read one at a time: stop at a limit before
                members.append(member)  # the next header (reaching it unpacks this member)
                _check_count(upload, len(members), limits)
                _check_name_length(upload, member.name)
                declared += member.size  # any kind: the reader skips an unknown type's
                _check_room(upload, declared, limits, room)  # data by unpacking it
        except DataError:
            raise
        except ARCHIVE_FAULTS as error:
            raise DataError(f"not a readable tar archive ({error})", path=upload.name) from None
        _check_members(upload, [(m.name, "dir" if m.isdir() else "file" if m.isfile()
                                 else "other", m.size) for m in members], limits, room)
        for member in members:
            if member.isfile() and _read_member(member.name, ignored):
                yield _member_upload(upload, member.name,
                                     lambda member=member: archive.extractfile(member).read())


def _check_count(upload: Upload, count: int, limits: Limits) -> None:
    if count > limits.max_members:
        raise DataError(f"the archive holds more than {limits.max_members} members "
                        f"({MEMBERS_PER_FILE} per allowed file)", path=upload.name)


def _read_member(name: str, ignored: list[str]) -> bool:
    """Whether a file member is read; one that is not (but archiver litter) is noted."""
    if _archiver_litter(name):
        return False
    if _wanted(name):
        return True
    ignored.append(name)
    return False


def _member_upload(upload: Upload, name: str, read) -> Upload:
    member = _safe_member_name(name)
    try:
        return Upload(f"{upload.name}:{member}", read())
    except ARCHIVE_FAULTS as error:
        raise DataError(f"archive member {member!r} cannot be read ({error})",
                        path=upload.name) from None


def _zip_kind(info: zipfile.ZipInfo) -> str:
    if info.is_dir():
        return "dir"
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the archiver recorded no type
    return "file" if kind in (0, stat.S_IFREG) else "other"


#: central directory bytes one zip member may take: its 46-byte header, a name of up to
#: MAX_MEMBER_NAME_CHARS and room for extra fields and a comment
CENTRAL_ENTRY_BYTES = 46 + MAX_MEMBER_NAME_CHARS + 1024


def central_directory_bytes(data: bytes) -> int | None:
    """The size a zip's end record gives its central directory, found as `zipfile` finds it
    (its `_EndRecData`); None where that cannot be read (ZipFile then says why)."""
    end_record = getattr(zipfile, "_EndRecData", None)
    try:
        record = end_record(io.BytesIO(data)) if end_record is not None else None
    except ARCHIVE_FAULTS + (struct.error,):
        return None
    return int(record[5]) if record else None  # zipfile._ECD_SIZE


def _zip_members(upload: Upload, limits: Limits, ignored: list[str],
                 room: int) -> Iterator[Upload]:
    listing = central_directory_bytes(upload.data)  # ZipFile reads every entry at once:
    if listing is not None and listing > limits.max_members * CENTRAL_ENTRY_BYTES:  # bound it
        raise DataError(f"the archive's listing is {listing} bytes, room for more than "
                        f"{limits.max_members} members ({MEMBERS_PER_FILE} per allowed file)",
                        path=upload.name)
    try:
        archive = zipfile.ZipFile(io.BytesIO(upload.data))
    except ARCHIVE_FAULTS as error:
        raise DataError(f"not a readable zip archive ({error})", path=upload.name) from None
    with archive:
        infos = archive.infolist()
        _check_count(upload, len(infos), limits)
        _check_members(upload, [(i.filename, _zip_kind(i), i.file_size) for i in infos], limits,
                       room)
        for info in infos:
            if info.is_dir() or not _read_member(info.filename, ignored):
                continue
            if info.flag_bits & 0x1:
                raise DataError(f"archive member {info.filename!r} is encrypted",
                                path=upload.name)
            read = _member_upload(upload, info.filename, lambda info=info: archive.read(info))
            if len(read.data) != info.file_size:
                raise DataError("archive member size does not match its header",
                                path=upload.name)
            yield read


def _archive_reader(name: str):
    lower = name.lower()
    return _tar_members if lower.endswith((".tar.gz", ".tgz")) else \
        _zip_members if lower.endswith(".zip") else None


def expand(uploads: Sequence[Upload], limits: Limits,
           ignored: list[str] | None = None) -> list[Upload]:
    """Plain files as they are, archives replaced by their JSONL / results.json members;
    archive members that are not read are appended to `ignored`. The files a submission
    holds, plain and unpacked, total at most `max_bytes` (each archive's members are checked
    against what is left before any is read)."""
    ignored = [] if ignored is None else ignored
    total = sum(len(upload.data) for upload in uploads)
    if total > limits.max_bytes:
        raise DataError(f"the upload is {total} bytes, over this instance's limit of "
                        f"{limits.max_bytes}")
    readers = [_archive_reader(upload.name) for upload in uploads]
    used = sum(len(u.data) for u, reader in zip(uploads, readers) if reader is None)
    files: list[Upload] = []
    for upload, reader in zip(uploads, readers):
        if reader is not None:
            members = list(reader(upload, limits, ignored, limits.max_bytes - used))
            used += sum(len(member.data) for member in members)
            files.extend(members)
        elif upload.name.lower().endswith(UNREAD_SUFFIXES):
            raise DataError(f"unsupported archive or compression (read: JSON Lines files, "
                            f"{', '.join(ARCHIVE_SUFFIXES)})", path=upload.name)
        else:
            files.append(upload)
        if len(files) > limits.max_files:
            raise DataError(f"more than {limits.max_files} files in one submission")
    if not files:
        shown = ", ".join(ignored[:5]) + (f" and {len(ignored) - 5} more" if len(ignored) > 5
                                          else "")
        raise DataError("no files in the submission" + (
            f": archives are read for .jsonl files and {RESULTS_NAME} only (found {shown}; "
            f"archives inside archives are not opened)" if ignored else ""))
    return files


def line_length(raw: bytes, number: int) -> int:
    """A line's bytes without its end (`\\r` of CRLF) and, on the first line, the byte order
    mark: the same text counts the same however the file was saved."""
    end = len(raw) - 1 if raw.endswith(b"\r") else len(raw)
    return end - (3 if number == 1 and raw.startswith(b"\xef\xbb\xbf") else 0)


def located_records(files: Sequence[Upload], limits: Limits,
                    errors: ErrorCollector) -> Iterator[Located]:
    """(file, line, object) of every non-blank JSON line; problems go to `errors`."""
    count = 0
    for upload in files:
        for number, raw in enumerate(upload.data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            count += 1
            if count > limits.max_records:
                raise DataError(f"more than {limits.max_records} records in one submission",
                                path=upload.name, line=number)
            length = line_length(raw, number)
            if length > limits.max_line_bytes:  # never parsed, let alone scored
                errors.add(f"a line of {length} bytes, over this instance's limit of "
                           f"{limits.max_line_bytes} bytes per line", path=upload.name,
                           line=number)
                continue
            try:
                record = json_line_object(raw, upload.name, number)
            except DataError as error:  # it names the file and line already
                errors.add_error(error)
                continue
            if record is not None:  # None: a line that only held the byte order mark
                yield upload.name, number, record


def _is_results(upload: Upload) -> bool:
    return posixpath.basename(upload.name.split(":")[-1]) == RESULTS_NAME


def read_results(upload: Upload) -> dict:
    try:
        results = strict_loads(upload.data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"unreadable results file ({error})", path=upload.name) from None
    except DuplicateKey as error:
        raise duplicate_key_error(error, upload.name) from None
    except RecursionError:
        raise DataError("unreadable results file (JSON nested too deeply)",
                        path=upload.name) from None
    if not isinstance(results, dict):
        raise DataError("expected a JSON object", path=upload.name)
    return results


def validate_submission(track, uploads: Sequence[Upload], manifest: Mapping | None,
                        limits: Limits, board: str) -> CheckedSubmission:
    """Check a submission; raises SubmissionErrors / DataError naming file, line, field.
    Without a manifest only the shape is checked (every key accepted once)."""
    ignored: list[str] = []
    files = expand(uploads, limits, ignored)
    results = [read_results(f) for f in files if _is_results(f)]
    data_files = [f for f in files if not _is_results(f)]
    errors = ErrorCollector()
    located = list(located_records(data_files, limits, errors))
    errors.raise_if_any()
    if manifest is None:
        manifest = track.manifest_from_records(located, board)
    checked = track.check(located, manifest)
    return CheckedSubmission(checked, len(located), uploads_sha256(uploads),
                             results[0] if results else None, tuple(ignored))


def uploads_sha256(uploads: Sequence[Upload]) -> str:
    """sha256 over the uploads' own sha256 digests, in order (a submission's upload_sha256)."""
    digest = hashlib.sha256()
    for upload in uploads:
        digest.update(hashlib.sha256(upload.data).digest())
    return digest.hexdigest()


__all__ = ["ARCHIVE_SUFFIXES", "CheckedSubmission", "Limits", "SubmissionErrors", "Upload",
           "expand", "located_records", "uploads_sha256", "validate_submission"]
