"""The submission validator's file handling: UTF-8, JSON objects, limits, and archives
checked before anything is read from them (member paths, links, sizes, counts)."""
from __future__ import annotations

import io
import stat
import tarfile
import zipfile

import pytest

from lb_helpers import minimal_lines
from leaderboard.service.validate import Limits, Upload, expand, validate_submission
from leaderboard.tracks import SubmissionErrors, make_track
from tasks.errors import DataError


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.fixture(scope="module")
def abs_lines(usb_fixture_dir) -> bytes:
    return minimal_lines(usb_fixture_dir / "predictions" / "abstractive_summarization.jsonl")


def test_a_run_folder_archive_is_read_with_its_results_json(abs_lines):
    data = _tar([_file("run/predictions/abs.jsonl", abs_lines),
                 _file("run/results.json", b'{"spec": {"model": "m", "seed": 3}}'),
                 _file("run/train/log.txt", b"ignored")])
    result = validate_submission(make_track("usb"), [Upload("run.tar.gz", data)], None,
                                 Limits(), "all")
    assert list(result.checked) == ["abstractive_summarization"]
    assert result.results == {"spec": {"model": "m", "seed": 3}}


@pytest.mark.parametrize("members, message", [
    ([_link("run/abs.jsonl", "/etc/passwd")], "is a link or special file"),
    ([_link("run/abs.jsonl", "other", tarfile.LNKTYPE)], "is a link or special file"),
    ([_file("../escape.jsonl", b"{}\n")], "leaves the archive"),
    ([_file("/abs/path.jsonl", b"{}\n")], "is absolute or leaves"),
    ([_file("a/../../b.jsonl", b"{}\n")], "leaves the archive"),
])
def test_hostile_tar_members_are_refused(members, message):
    with pytest.raises(DataError, match=message) as caught:
        expand([Upload("evil.tgz", _tar(members))], Limits())
    assert caught.value.path == "evil.tgz"


def test_archive_sizes_and_counts_are_limited_before_reading():
    big = _tar([_file("a.jsonl", b"x" * 5000)])
    with pytest.raises(DataError, match="unpacks to more than 1000 bytes"):
        expand([Upload("big.tar.gz", big)], Limits(max_bytes=1000))
    many = _tar([_file(f"p{i}.jsonl", b"{}\n") for i in range(5)])
    with pytest.raises(DataError, match="more than 3 files"):
        expand([Upload("many.tar.gz", many)], Limits(max_files=3))
    with pytest.raises(DataError, match="not a readable tar archive"):
        expand([Upload("junk.tgz", b"not gzip at all")], Limits())


def test_zip_members_are_checked_too(abs_lines):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("preds/abs.jsonl", abs_lines)
    assert [u.name for u in expand([Upload("ok.zip", buffer.getvalue())], Limits())] == [
        "ok.zip:preds/abs.jsonl"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        link = zipfile.ZipInfo("link.jsonl")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(DataError, match="link or special file"):
        expand([Upload("evil.zip", buffer.getvalue())], Limits())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../../x.jsonl", b"{}\n")
    with pytest.raises(DataError, match="leaves the archive"):
        expand([Upload("slip.zip", buffer.getvalue())], Limits())


def test_bad_bytes_and_json_are_reported_per_line(abs_lines):
    data = (b'\xef\xbb\xbf{"task": "ABS"}\n\xff\xfe bad\n[1, 2]\n{not json\n'
            + b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b'}\n{"task": "x\\udc00"}\n')
    with pytest.raises(SubmissionErrors) as caught:
        validate_submission(make_track("usb"), [Upload("bad.jsonl", data)], None, Limits(),
                            "all")
    problems = [(e["line"], e["field"], e["message"].split(" (")[0])
                for e in caught.value.to_list()]
    assert problems == [(2, None, "not UTF-8 text"),
                        (3, None, "expected a JSON object, got array"),
                        (4, None, "malformed JSON"), (5, None, "JSON nested too deeply"),
                        (6, "task", "a \\ud800-\\udfff escape that is not half of a pair "
                                    "is not text")]


def test_a_byte_order_mark_before_the_first_line_is_skipped(abs_lines):
    for data in (b"\xef\xbb\xbf" + abs_lines, b"\xef\xbb\xbf\n" + abs_lines):
        checked = validate_submission(make_track("usb"), [Upload("bom.jsonl", data)], None,
                                      Limits(), "all").checked
        assert len(checked["abstractive_summarization"]) == len(abs_lines.splitlines())


def test_record_limit_and_empty_submissions(abs_lines):
    with pytest.raises(DataError, match="more than 2 records"):
        validate_submission(make_track("usb"), [Upload("a.jsonl", abs_lines)], None,
                            Limits(max_records=2), "all")
    with pytest.raises(SubmissionErrors, match="holds no prediction records"):
        validate_submission(make_track("usb"), [Upload("empty.jsonl", b"\n\n")], None,
                            Limits(), "all")
    with pytest.raises(DataError, match="no files"):
        expand([], Limits())


def test_at_most_twenty_errors_are_listed_and_the_rest_counted():
    data = b"".join(b"[]\n" for _ in range(25))
    with pytest.raises(SubmissionErrors) as caught:
        validate_submission(make_track("usb"), [Upload("x.jsonl", data)], None, Limits(),
                            "all")
    assert len(caught.value.to_list()) == 20 and caught.value.more == 5
    assert "(and 24 more problem(s))" in str(caught.value)
