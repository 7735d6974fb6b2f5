"""The one submission validator, used by `sumbench leaderboard submit --check` and the server.

Input: uploaded files as (name, bytes): JSON Lines prediction files, a run folder's
`results.json` (self-reported metadata, never trusted for scores), or `.tar.gz`/`.tgz`/`.zip`
archives of such files (`.tgz`/`.tar.gz`: gzip only). Archives are checked before anything is
read from them: regular files only (no links, devices or folders escaping the archive), no
absolute or `..` member paths, no two members of one name, member sizes (of any kind) and the
submission's files, plain and unpacked from every archive, under the instance's limit
(`max_bytes`), unpacking to at most MAX_UNPACK_RATIO times an archive's own size (beyond
MIN_RATIO_BYTES), and at most MEMBERS_PER_FILE members of any kind per allowed file, counted while
a tar listing is read (a zip listing's size is bounded before it is parsed;
`leaderboard.intake.archives`). Damaged, encrypted or unsupported members are refused by name;
members other than `.jsonl` and `results.json` are reported as ignored. Every JSON line must be
UTF-8, a JSON object and at most `max_line_bytes` long (scoring one huge prediction takes
memory far beyond its size: ROUGE-L's table grows with its length), and is parsed only when
its nesting, containers and values, counted from its bytes, fit a record's
(`leaderboard.intake.json_shape`); the records then go to the track's `check` against a manifest
(the server's, or one fetched from it by the client; without one, only the shape is checked),
one at a time on the server. Every problem is reported with its file, line and field
(`SubmissionErrors`).
"""
from __future__ import annotations

import codecs
import hashlib
import json
import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from leaderboard.intake.archives import (
    ARCHIVE_SUFFIXES,
    RESULTS_NAME,
    UNREAD_SUFFIXES,
    Limits,
    Upload,
    archive_reader,
)
from leaderboard.intake.json_shape import max_values, shape_problem
from leaderboard.tracks.base import ErrorCollector, Located, SubmissionErrors
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import DuplicateKey, duplicate_key_error, json_line_object, strict_loads


@dataclass(frozen=True)
class CheckedSubmission:
    checked: dict[str, list[dict]]        # part -> minimal records in manifest order
    n_records: int
    sha256: str                           # of the uploaded bytes, in order
    results: dict | None                  # a run folder's results.json, if one came along
    ignored: tuple[str, ...] = ()         # archive members that are not read (not .jsonl)
    not_hosted: int = 0                   # records of test items the board does not host


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
    readers = [archive_reader(upload.name) for upload in uploads]
    used = sum(len(u.data) for u, reader in zip(uploads, readers) if reader is None)
    files: list[Upload] = []
    for upload, reader in zip(uploads, readers):
        if reader is not None:  # all its members count, those not read too
            members, declared = reader(upload, limits, ignored, limits.max_bytes - used)
            used += declared
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
    text = raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw  # as json_line_object
    return len(text) - text.endswith(b"\r")


def numbered_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes without the newline) of each line, one at a time (a list of
    every line would cost far more memory than the file: 60 MiB of newlines are 63 million
    empty lines); nothing after a final newline."""
    start, number, end = 0, 1, len(data)
    while start < end:
        stop = data.find(b"\n", start)
        stop = end if stop < 0 else stop
        yield number, data[start:stop]
        start, number = stop + 1, number + 1


def located_records(files: Sequence[Upload], limits: Limits,
                    errors: ErrorCollector) -> Iterator[Located]:
    """(file, line, object) of every non-blank JSON line, one at a time; problems go to
    `errors`. Every line counts toward `max_records`, blank ones too. A line is parsed only
    once its size, nesting, containers and values are known to be within a record's
    (`leaderboard.intake.json_shape`)."""
    count, most_values = 0, max_values(limits.max_line_bytes)
    for upload in files:
        for number, raw in numbered_lines(upload.data):
            count += 1
            if count > limits.max_records:
                raise DataError(f"more than {limits.max_records} lines in one submission "
                                f"(records and blank lines)", path=upload.name, line=number)
            if not raw.strip():
                continue
            length = line_length(raw, number)
            if length > limits.max_line_bytes:  # never parsed, let alone scored
                errors.add(f"a line of {length} bytes, over this instance's limit of "
                           f"{limits.max_line_bytes} bytes per line", path=upload.name,
                           line=number)
                continue
            problem = shape_problem(raw, most_values)
            if problem:  # refused before it becomes Python objects
                errors.add(problem, path=upload.name, line=number)
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
    if manifest is None:  # the client's check: the records name the items (two passes)
        located = list(located_records(data_files, limits, errors))
        errors.raise_if_any()
        manifest = track.manifest_from_records(located, board)
    else:  # the server's: each record checked as it is read, never all held at once
        located = located_records(data_files, limits, errors)
    counted = Counted(located)
    try:
        checked = track.check(counted, manifest)
    except Exception as error:  # the reading's problems first, as if no check had run
        if isinstance(error, DataError) and not isinstance(error, SubmissionErrors):
            raise  # the reading's own refusal (more lines than max_records), as before
        for _ in counted:  # the lines the check did not draw, read for their problems
            pass
        errors.raise_if_any()
        raise
    errors.raise_if_any()
    answered = sum(len(records) for records in checked.values())
    return CheckedSubmission(checked, counted.count, uploads_sha256(uploads),
                             results[0] if results else None, tuple(ignored),
                             counted.count - answered)


class Counted:
    """An iterable that counts what has been drawn from it."""

    def __init__(self, items: Iterable) -> None:
        self.items, self.count = items, 0

    def __iter__(self):
        for item in self.items:
            self.count += 1
            yield item


def uploads_sha256(uploads: Sequence[Upload]) -> str:
    """sha256 over the uploads' own sha256 digests, in order (a submission's upload_sha256)."""
    digest = hashlib.sha256()
    for upload in uploads:
        digest.update(hashlib.sha256(upload.data).digest())
    return digest.hexdigest()


__all__ = ["ARCHIVE_SUFFIXES", "RESULTS_NAME", "CheckedSubmission", "Limits",
           "SubmissionErrors", "Upload", "expand", "located_records", "uploads_sha256",
           "validate_submission"]
