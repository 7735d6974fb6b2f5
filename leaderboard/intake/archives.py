"""Reading submitted archives safely: `.tar.gz`/`.tgz` (gzip only) and `.zip` files are
checked before anything is read from them (see `leaderboard.intake.validate`), and the
submission's size limits (`Limits`) with the uploaded files (`Upload`) they apply to."""
from __future__ import annotations

import io
import posixpath
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from tasks.plumbing.errors import DataError

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
#: compressed or archive files that are not read (refused rather than read as JSON Lines)
UNREAD_SUFFIXES = (".tar", ".gz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tbz2", ".txz")
RESULTS_NAME = "results.json"
#: archive members of any kind (folders, files that are not read) allowed per allowed file
MEMBERS_PER_FILE = 16
#: the most an archive may unpack to, as a multiple of its own size, once it unpacks to more
#: than MIN_RATIO_BYTES (prediction files compress ten to thirty times; a 61 KB archive of
#: 60 MiB of newlines, a thousand)
MAX_UNPACK_RATIO = 100
MIN_RATIO_BYTES = 4 << 20
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
    def of(cls, settings) -> Limits:
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
                   limits: Limits, room: int) -> int:
    """Refuse an archive before reading it: (name, kind "file" | "dir" | "other", size) of
    every member; absolute or escaping paths, links and special files, and sizes over the
    `room` the submission's other files leave are errors. Returns the files' bytes."""
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
    return total


def _check_room(upload: Upload, unpacked: int, limits: Limits, room: int) -> None:
    """An archive's members may bring the submission's files to `max_bytes`, no further
    (`room` is what the files before it left), and unpack to at most MAX_UNPACK_RATIO times
    the archive's size (beyond MIN_RATIO_BYTES)."""
    if unpacked > max(MIN_RATIO_BYTES, MAX_UNPACK_RATIO * len(upload.data)):
        raise DataError(f"archive unpacks to more than {MAX_UNPACK_RATIO} times its own "
                        f"{len(upload.data)} bytes (beyond {MIN_RATIO_BYTES} bytes, an archive "
                        f"may not)", path=upload.name)
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
                 room: int) -> tuple[list[Upload], int]:
    """(the members read, the bytes every member declares)."""
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
        return [_member_upload(upload, member.name,
                               lambda member=member: archive.extractfile(member).read())
                for member in members
                if member.isfile() and _read_member(member.name, ignored)], declared


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
                 room: int) -> tuple[list[Upload], int]:
    """(the members read, the bytes every member declares)."""
    _check_listing(upload, limits)
    try:
        archive = zipfile.ZipFile(io.BytesIO(upload.data))
    except ARCHIVE_FAULTS as error:
        raise DataError(f"not a readable zip archive ({error})", path=upload.name) from None
    with archive:
        infos = archive.infolist()
        _check_count(upload, len(infos), limits)
        declared = _check_members(upload, [(i.filename, _zip_kind(i), i.file_size)
                                           for i in infos], limits, room)
        for info in infos:
            if not info.is_dir():
                _check_zip_method(upload, info)
        read = []
        for info in infos:
            if info.is_dir() or not _read_member(info.filename, ignored):
                continue
            if info.flag_bits & 0x1:
                raise DataError(f"archive member {info.filename!r} is encrypted",
                                path=upload.name)
            read.append(_member_upload(upload, info.filename,
                                       lambda info=info: _zip_member_bytes(upload, info)))
        return read, declared


#: the compression methods a zip member may use; `zipfile` unpacks a bzip2 or lzma stream
#: whole before it cuts it to the declared size (an 897-byte bzip2 member, 1 GiB of newlines)
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
ZIP_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma", 9: "deflate64",
                    93: "zstandard", 95: "xz", 98: "ppmd", 97: "wavpack", 6: "implode"}
#: the most one step of unpacking a deflate member produces
INFLATE_CHUNK_BYTES = 1 << 20
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader


def _check_zip_method(upload: Upload, info: zipfile.ZipInfo) -> None:
    if info.compress_type not in ZIP_METHODS:
        method = ZIP_METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
        raise DataError(f"archive member {info.filename!r} is compressed with {method} "
                        f"(read: {' and '.join(ZIP_METHODS.values())} members)",
                        path=upload.name)


def _zip_stream(upload: Upload, info: zipfile.ZipInfo) -> bytes:
    """A member's compressed bytes, found through its local header (as `zipfile` does)."""
    start = info.header_offset
    header = upload.data[start:start + LOCAL_HEADER.size]
    if len(header) < LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("no local header where the listing points")
    fields = LOCAL_HEADER.unpack(header)
    start += LOCAL_HEADER.size + fields[10] + fields[11]  # the name and the extra field
    stream = upload.data[start:start + info.compress_size]
    if len(stream) < info.compress_size:
        raise zipfile.BadZipFile("the member's data is cut short")
    return stream


def _zip_member_bytes(upload: Upload, info: zipfile.ZipInfo) -> bytes:
    """A stored or deflate member's bytes (`_zip_members` checked every member's method
    first), unpacked a chunk at a time: a stream that runs past the member's declared size is
    refused as corrupt as soon as it does, so no member ever unpacks to more than the size the
    limits were checked against."""
    stream = _zip_stream(upload, info)
    if info.compress_type == zipfile.ZIP_STORED:
        data = stream
    else:
        pieces, produced = [], 0
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        while not inflater.eof:
            piece = inflater.decompress(stream, INFLATE_CHUNK_BYTES)
            stream = inflater.unconsumed_tail
            produced += len(piece)
            if produced > info.file_size:
                raise zipfile.BadZipFile(f"its data unpacks past its declared "
                                         f"{info.file_size} bytes")
            if not piece and not stream:
                raise zipfile.BadZipFile("its deflate stream ends early")
            pieces.append(piece)
        data = b"".join(pieces)
    if len(data) != info.file_size:
        raise zipfile.BadZipFile(f"{len(data)} bytes where its header declares "
                                 f"{info.file_size}")
    if zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile("its CRC-32 does not match")
    return data


def _check_listing(upload: Upload, limits: Limits) -> None:
    """ZipFile parses every listed entry at once: a listing too long for `max_members`
    entries is refused first (one longer than the file is damaged)."""
    listing = central_directory_bytes(upload.data)
    if listing is not None and listing > len(upload.data):
        raise DataError(f"not a readable zip archive (its end record gives a {listing}-byte "
                        f"listing in a {len(upload.data)}-byte file)", path=upload.name)
    if listing is not None and listing > limits.max_members * CENTRAL_ENTRY_BYTES:
        raise DataError(f"the archive's listing is {listing} bytes, room for more than "
                        f"{limits.max_members} members ({MEMBERS_PER_FILE} per allowed file)",
                        path=upload.name)


def archive_reader(name: str):
    """The reader of an archive name (`(upload, limits, ignored, room) -> (members read,
    bytes declared)`), or None for a plain file."""
    lower = name.lower()
    return _tar_members if lower.endswith((".tar.gz", ".tgz")) else \
        _zip_members if lower.endswith(".zip") else None
