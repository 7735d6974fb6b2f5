"""The submission validator's file handling: UTF-8, JSON objects, limits, and archives
checked before anything is read from them (member paths, links, sizes, counts)."""
from __future__ import annotations

import io
import stat
import tarfile
import zipfile

import pytest

from leaderboard.intake.validate import Limits, Upload, expand, validate_submission
from leaderboard.tracks import SubmissionErrors, make_track
from tasks.plumbing.errors import DataError

from lb_helpers import minimal_lines, newline_archive


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
    twice = _tar([_file("run/predictions/abs.jsonl", abs_lines),
                  _file("run/results.json", b'{"spec": {"seed": 3, "seed": 4}}')])
    with pytest.raises(DataError) as caught:
        validate_submission(make_track("usb"), [Upload("run.tar.gz", twice)], None, Limits(),
                            "all")
    assert caught.value.field == "seed" and "given twice" in caught.value.reason
    assert caught.value.path.endswith("results.json")


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
    with pytest.raises(DataError, match="not a readable gzip-compressed tar archive"):
        expand([Upload("junk.tgz", b"not gzip at all")], Limits())


def test_long_names_and_declared_sizes_are_refused_before_they_are_read():
    import gzip

    def gnu_tar(name: str) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
            info, data = _file(name, b"{}\n")
            archive.addfile(info, io.BytesIO(data))
        return gzip.compress(buffer.getvalue())

    huge = gnu_tar("a" * (1 << 20) + ".jsonl")  # a 1 MiB long-name header: never read whole
    with pytest.raises(DataError) as caught:
        expand([Upload("long.tgz", huge)], Limits())
    assert str(caught.value) == ("long.tgz: not a readable gzip-compressed tar archive (an "
                                 "extended header of 1048583 bytes (at most 65536 are read))")
    with pytest.raises(DataError) as caught:  # a long name that is read is still refused
        expand([Upload("name.tgz", gnu_tar("b" * 2000 + ".jsonl"))], Limits())
    assert str(caught.value) == ("name.tgz: an archive member name of 2006 characters (at "
                                 "most 1024)")
    buffer = io.BytesIO()  # a member declared over the limit, cut short after its header:
    with tarfile.open(fileobj=buffer, mode="w") as archive:  # refused before the next header
        info, data = _file("a.jsonl", b"x" * 5000)
        archive.addfile(info, io.BytesIO(data))
    cut = gzip.compress(buffer.getvalue()[:1024])
    with pytest.raises(DataError, match="unpacks to more than 1000 bytes"):
        expand([Upload("cut.tgz", cut)], Limits(max_bytes=1000))


def test_unpacked_bytes_are_limited_across_archives_and_odd_members_count():
    """Each archive under the limit alone, over it together: the later one is refused before
    it is read (12 zips of 64 MiB of spaces each came from under 1 MB sent). A member of a
    type the tar reader does not know is passed over by unpacking its data, so its declared
    size counts before the next header is read (a 4 GiB one took 15 s to refuse)."""
    limits = Limits(max_bytes=1000)
    part = _zip({"p.jsonl": b" " * 600})
    assert [u.name for u in expand([Upload("a.zip", part)], limits)] == ["a.zip:p.jsonl"]
    with pytest.raises(DataError) as caught:
        expand([Upload("a.zip", part), Upload("b.zip", part)], limits)
    assert str(caught.value) == ("b.zip: archive unpacks to more than the 400 bytes left of "
                                 "this instance's 1000 by the submission's other files")
    with pytest.raises(DataError, match="more than the 500 bytes left"):  # plain files count
        expand([Upload("b.zip", part), Upload("plain.jsonl", b" " * 500)], limits)
    with_log = _zip({"log.txt": b" " * 600, "x.jsonl": b"{}\n"})  # members not read count
    with pytest.raises(DataError, match="more than the 397 bytes left"):
        expand([Upload("a.zip", with_log), Upload("b.zip", with_log)], limits)
    odd, _ = _file("odd", b"")
    odd.type, odd.size = b"Z", 5000
    with pytest.raises(DataError) as caught:
        expand([Upload("odd.tgz", _tar([(odd, b"\0" * 5000)]))], limits)
    assert str(caught.value) == "odd.tgz: archive unpacks to more than 1000 bytes"


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_a_zip_listing_too_long_for_the_member_limit_is_refused_before_it_is_parsed(
        monkeypatch):
    """ZipFile makes an object for every listed member at once (300,000 empty members in
    25 MB took 165 MB and 1.6 s before they could be counted), so the listing's size, as
    the end record gives it, is bounded first."""
    import leaderboard.intake.archives as archives

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(2000):
            archive.writestr(zipfile.ZipInfo(f"{i}"), b"")
    data = buffer.getvalue()
    listing = archives.central_directory_bytes(data)
    assert listing == sum(46 + len(str(i)) for i in range(2000))
    assert archives.central_directory_bytes(b"not a zip") is None
    damaged = data[:-10] + (0xFFFFFF).to_bytes(4, "little") + data[-6:]  # its listing size
    with monkeypatch.context() as patched:
        patched.setattr(archives.zipfile, "ZipFile", lambda *_: pytest.fail("parsed"))
        with pytest.raises(DataError) as caught:
            expand([Upload("many.zip", data)], Limits(max_files=1))  # 16 members
        assert str(caught.value) == (f"many.zip: the archive's listing is {listing} bytes, "
                                     f"room for more than 16 members (16 per allowed file)")
        with pytest.raises(DataError) as caught:
            expand([Upload("bad.zip", damaged)], Limits())
        assert str(caught.value) == (f"bad.zip: not a readable zip archive (its end record "
                                     f"gives a 16777215-byte listing in a {len(data)}-byte "
                                     f"file)")


@pytest.mark.slow
def test_members_are_counted_while_listed_not_after():
    """A tiny archive of many empty members is refused at the limit (16 per allowed file),
    without listing the rest; folders and files that are not read count too."""
    limits = Limits(max_files=2)
    many = _tar([_file(f"junk/{i}.txt", b"") for i in range(10_000)])
    with pytest.raises(DataError) as caught:
        expand([Upload("many.tgz", many)], limits)
    assert str(caught.value) == ("many.tgz: the archive holds more than 32 members (16 per "
                                 "allowed file)")
    with pytest.raises(DataError, match="holds more than 32 members"):
        expand([Upload("many.zip", _zip({f"{i}.txt": b"" for i in range(33)}))], limits)
    with pytest.raises(DataError, match="not a readable gzip-compressed tar archive"):
        expand([Upload("xz.tgz", _xz_tar())], limits)  # .tgz means gzip, whatever r:* takes


def _xz_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        info, data = _file("a.jsonl", b"{}\n")
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _damaged_zips(abs_lines: bytes) -> dict[str, tuple[bytes, str]]:
    good = _zip({"abs.jsonl": abs_lines})
    header = good.index(b"PK\x03\x04")
    crc = bytearray(good)
    crc[good.index(b"PK\x01\x02") + 16] ^= 0xFF  # the CRC-32 the central directory records
    body = bytearray(good)
    body[header + 30 + len("abs.jsonl") + 5] ^= 0xFF  # inside the deflate stream
    method = bytearray(good)
    central = good.index(b"PK\x01\x02")
    for offset in (header + 8, central + 10):  # compression method 99 (AES), both headers
        method[offset:offset + 2] = (99).to_bytes(2, "little")
    encrypted = bytearray(good)
    for offset in (header + 6, central + 8):  # general-purpose flag bit 0: encrypted
        encrypted[offset] |= 1
    return {"crc.zip": (bytes(crc), "cannot be read"), "body.zip": (bytes(body), "cannot be read"),
            "method.zip": (bytes(method), "compressed with method 99"),
            "encrypted.zip": (bytes(encrypted), "is encrypted")}


def test_damaged_archives_are_rejected_naming_the_member(abs_lines):
    for name, (data, message) in _damaged_zips(abs_lines).items():
        with pytest.raises(DataError, match=message) as caught:
            expand([Upload(name, data)], Limits())
        assert caught.value.path == name and "abs.jsonl" in str(caught.value)
    whole = _tar([_file("abs.jsonl", abs_lines)])
    with pytest.raises(DataError, match="not a readable tar archive|cannot be read"):
        expand([Upload("cut.tgz", whole[:len(whole) // 2])], Limits())


def test_members_that_are_not_read_are_named_and_litter_is_skipped(abs_lines):
    ignored = []
    files = expand([Upload("run.zip", _zip({
        "preds/abs.jsonl": abs_lines, "preds/ext.JSONL": b"{}\n", "notes.json": b"{}",
        "__MACOSX/preds/._abs.jsonl": b"\x00\x05\x16\x07", "preds/._x.jsonl": b"\x00"}))],
        Limits(), ignored)
    assert [f.name for f in files] == ["run.zip:preds/abs.jsonl"]
    assert ignored == ["preds/ext.JSONL", "notes.json"]
    result = validate_submission(make_track("usb"), [Upload("run.zip", _zip({
        "abs.jsonl": abs_lines, "extra.json": b"{}"}))], None, Limits(), "all")
    assert result.ignored == ("extra.json",)
    nested = _zip({"inner.zip": _zip({"abs.jsonl": abs_lines})})
    with pytest.raises(DataError, match="found inner.zip; archives inside archives are not "
                                        "opened"):
        expand([Upload("outer.zip", nested)], Limits())


def test_unread_formats_oversized_uploads_and_twin_members_are_refused(abs_lines):
    for name in ("preds.tar", "abs.jsonl.gz", "run.tar.xz"):
        with pytest.raises(DataError, match="unsupported archive or compression") as caught:
            expand([Upload(name, b"\x1f\x8b whatever")], Limits())
        assert caught.value.path == name
    with pytest.raises(DataError, match="the upload is 3000 bytes, over this instance's "
                                        "limit of 2000"):
        expand([Upload("a.jsonl", b"x" * 1500), Upload("b.jsonl", b"x" * 1500)],
               Limits(max_bytes=2000))
    twins = _tar([_file("abs.jsonl", abs_lines), _file("./abs.jsonl", abs_lines)])
    with pytest.raises(DataError, match="two members named 'abs.jsonl'"):
        expand([Upload("twins.tgz", twins)], Limits())


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
                        (4, None, "malformed JSON"),
                        (5, None, "a line of 100001 JSON arrays and objects"),
                        (6, "task", "a \\ud800-\\udfff escape that is not half of a pair "
                                    "is not text")]


def test_a_byte_order_mark_before_the_first_line_is_skipped(abs_lines):
    for data in (b"\xef\xbb\xbf" + abs_lines, b"\xef\xbb\xbf\n" + abs_lines):
        checked = validate_submission(make_track("usb"), [Upload("bom.jsonl", data)], None,
                                      Limits(), "all").checked
        assert len(checked["abstractive_summarization"]) == len(abs_lines.splitlines())


def test_record_limit_and_empty_submissions(abs_lines):
    with pytest.raises(DataError, match="more than 2 lines in one submission"):
        validate_submission(make_track("usb"), [Upload("a.jsonl", abs_lines)], None,
                            Limits(max_records=2), "all")
    with pytest.raises(SubmissionErrors, match="holds no prediction records"):
        validate_submission(make_track("usb"), [Upload("empty.jsonl", b"\n\n")], None,
                            Limits(), "all")
    with pytest.raises(DataError, match="no files"):
        expand([], Limits())


def test_a_line_over_the_line_limit_is_refused_unread(abs_lines):
    """Scoring one huge prediction takes memory far beyond its size (a 50 MB FIX prediction:
    about 1.7 GB, ROUGE-L's table), so a line over `max_line_bytes` is refused by file and
    line, never parsed; a line of exactly the limit is read."""
    first, *rest = abs_lines.splitlines(keepends=True)
    longest = max(len(line.rstrip(b"\n")) for line in abs_lines.splitlines())
    assert Limits().max_line_bytes == 1 << 20
    checked = validate_submission(make_track("usb"), [Upload("a.jsonl", abs_lines)], None,
                                  Limits(max_line_bytes=longest), "all").checked
    assert len(checked["abstractive_summarization"]) == len(rest) + 1
    huge = first.replace(b'"prediction": "', b'"prediction": "' + b"word " * 300_000, 1)
    with pytest.raises(SubmissionErrors) as caught:
        validate_submission(make_track("usb"), [Upload("a.jsonl", b"".join([*rest, huge]))],
                            None, Limits(), "all")
    assert caught.value.to_list() == [{
        "file": "a.jsonl", "line": len(rest) + 1, "field": None,
        "message": f"a line of {len(huge) - 1} bytes, over this instance's limit of 1048576 "
                   f"bytes per line"}]
    crlf = abs_lines.replace(b"\n", b"\r\n")  # the line's text counts, not how it was saved
    bom_first = b"\xef\xbb\xbf" + first.replace(b"\n", b"\r\n")  # one line, with a BOM
    for data, limit in ((crlf, longest), (bom_first, len(first) - 1)):
        for size, accepted in ((limit, True), (limit - 1, False)):
            try:
                validate_submission(make_track("usb"), [Upload("crlf.jsonl", data)], None,
                                    Limits(max_line_bytes=size), "all")
            except SubmissionErrors as error:
                assert not accepted and f"a line of {limit} bytes" in str(error)
            else:
                assert accepted


def test_check_applies_the_limits_and_length_rule_the_server_states(abs_lines):
    """`submit --check --server` validates with the instance's limits (from its manifest),
    not the defaults; what a manifest does not state (or states wrongly) is the default."""
    from leaderboard.client import check, stated_validation

    assert stated_validation(None) == (Limits(), True)
    stated = {"validation": {"limits": {"max_line_bytes": 100, "max_files": True, "odd": 3,
                                        "max_records": -1}, "strict_lengths": False}}
    assert stated_validation(stated) == (Limits(max_line_bytes=100), False)
    assert stated_validation({"validation": "yes"}) == (Limits(), True)
    with pytest.raises(SubmissionErrors, match="over this instance's limit of 100 bytes"):
        check([Upload("a.jsonl", abs_lines)], "usb", "all", stated)


def test_the_line_limit_is_an_instance_setting():
    from leaderboard.service.settings import InstanceSettings
    from tasks.plumbing.errors import SumbenchError

    settings = InstanceSettings().with_changes({"max_line_bytes": "4096"})
    assert Limits.of(settings).max_line_bytes == 4096 == settings.to_dict()["max_line_bytes"]
    assert InstanceSettings.from_dict({}).max_line_bytes == 1 << 20  # older instances
    with pytest.raises(SumbenchError, match="max_line_bytes must be a positive integer"):
        InstanceSettings().with_changes({"max_line_bytes": "0"})


def test_at_most_twenty_errors_are_listed_and_the_rest_counted():
    data = b"".join(b"[]\n" for _ in range(25))
    with pytest.raises(SubmissionErrors) as caught:
        validate_submission(make_track("usb"), [Upload("x.jsonl", data)], None, Limits(),
                            "all")
    assert len(caught.value.to_list()) == 20 and caught.value.more == 5
    assert "(and 24 more problem(s))" in str(caught.value)


def test_past_the_twentieth_every_problem_of_the_track_check_is_still_counted(data_dir):
    """Problems past MAX_ERRORS are counted without their messages being built: unreadable
    ids, unknown items and duplicates alike, each once."""
    import json

    track = make_track("usb")
    manifest = track.manifest(track.load_gold(str(data_dir)), "all")
    item = manifest["parts"]["factuality_classification"][0]
    bad_ids = [{"task": "FAC", "id": 7, "summ_idx": 0, "summary_sent": "x", "prediction": [1.0]}
               for _ in range(21)]
    unknown = [{"task": "FAC", "id": f"doc{n}", "summ_idx": 0, "summary_sent": "x",
                "prediction": [1.0]} for n in range(3)]
    twins = [{"task": "FAC", "id": item["id"], "summ_idx": item["summ_idx"],
              "summary_sent": "unknown text", "prediction": [1.0]}] * 2
    lines = [json.dumps(record).encode() + b"\n" for record in bad_ids + unknown + twins]
    with pytest.raises(SubmissionErrors) as caught:
        validate_submission(track, [Upload("x.jsonl", b"".join(lines))], manifest, Limits(),
                            "all")
    listed = caught.value.to_list()
    assert len(listed) == 20 and {error["field"] for error in listed} == {"id"}
    assert listed[0]["message"] == "expected a string, got integer"
    # 21 + 3 + 2 rejected lines, and the part's items they leave missing (one problem)
    assert caught.value.more == 21 + 3 + 2 + 1 - 20


@pytest.mark.parametrize("value", ["doc", "", 0, 2 ** 63 - 1, 2 ** 63, -1, True, None, 1.0,
                                   [], "missing"])
def test_readable_ids_are_exactly_those_the_checks_accept(value):
    from leaderboard.tracks.base import ErrorCollector, check_id_types, ids_readable

    for field in ("id", "summ_idx"):
        record = {} if value == "missing" else {field: value}
        collector = ErrorCollector()
        accepted = check_id_types(collector, ("f", 1, record), (field,))
        assert ids_readable(record, (field,)) is accepted is (not collector.errors)


@pytest.mark.parametrize("data, lines", [
    (b"", []), (b"\n", [(1, b"")]), (b"a", [(1, b"a")]), (b"a\n", [(1, b"a")]),
    (b"a\r\nb", [(1, b"a\r"), (2, b"b")]),
    (b"\n\na\n\n", [(1, b""), (2, b""), (3, b"a"), (4, b"")]),
])
def test_lines_are_read_one_at_a_time_as_split_numbers_them(data, lines):
    from leaderboard.intake.validate import numbered_lines

    assert list(numbered_lines(data)) == lines
    expected = list(enumerate(data.split(b"\n"), start=1))
    assert lines == (expected[:-1] if data.endswith(b"\n") or not data else expected)


def _peak_bytes(call) -> tuple[int, DataError]:
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(DataError) as caught:
            call()
        return tracemalloc.get_traced_memory()[1], caught.value
    finally:
        tracemalloc.stop()


def test_blank_lines_and_unpacking_cost_no_more_memory_than_their_bytes():
    """A 61 KB archive of 60 MiB of newlines cost the server 550 MiB (every line a bytes
    object, blank lines counted toward nothing): it is refused from its header, and a plain
    file of newlines at the line limit, without a list of its lines."""
    bomb = newline_archive(60 << 20)
    assert len(bomb) < 80_000
    peak, error = _peak_bytes(lambda: validate_submission(
        make_track("usb"), [Upload("bomb.tgz", bomb)], None, Limits(), "all"))
    assert "unpacks to more than 100 times its own" in str(error) and peak < 8 << 20
    newlines = b"\n" * (8 << 20)
    peak, error = _peak_bytes(lambda: validate_submission(
        make_track("usb"), [Upload("blank.jsonl", newlines)], None, Limits(), "all"))
    assert str(error).startswith("blank.jsonl:500001: more than 500000 lines")
    assert peak < 4 << 20  # the 8 MiB file itself was allocated before


def test_an_archive_may_unpack_a_hundredfold_and_small_ones_as_they_like(abs_lines):
    from leaderboard.intake.archives import MIN_RATIO_BYTES

    small = newline_archive(MIN_RATIO_BYTES)  # over 100 times, but small: read
    assert len(expand([Upload("small.tgz", small)], Limits())[0].data) == MIN_RATIO_BYTES
    with pytest.raises(DataError, match="unpacks to more than 100 times"):
        expand([Upload("big.tgz", newline_archive(MIN_RATIO_BYTES + 1))], Limits())
