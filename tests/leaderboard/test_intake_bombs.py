"""Compressed and nested input that cost the server far more memory than its bytes: each is
refused while it is read, with memory bounded by the upload (tracemalloc counts every Python
allocation, the decompressors' output and parsed objects included)."""
from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile

import pytest

from leaderboard.intake.archives import Limits, Upload
from leaderboard.intake.json_shape import (
    MAX_CONTAINERS,
    MAX_DEPTH,
    json_shape,
    max_values,
    shape_problem,
)
from leaderboard.intake.validate import expand, validate_submission
from leaderboard.tracks import make_track
from tasks.plumbing.errors import DataError

from lb_helpers import lying_zip, nested_lists_line


def _peak(call) -> tuple[int, Exception]:
    tracemalloc.start()
    try:
        with pytest.raises((DataError, ValueError)) as caught:
            call()
        return tracemalloc.get_traced_memory()[1], caught.value
    finally:
        tracemalloc.stop()


DECLARED = b'{"a": 1}\n\n'  # ten bytes


@pytest.fixture(scope="module")
def abs_lines(usb_fixture_dir) -> bytes:
    from lb_helpers import minimal_lines

    return minimal_lines(usb_fixture_dir / "predictions" / "abstractive_summarization.jsonl")


def test_a_bzip2_member_is_refused_by_its_method_unread():
    """897 bytes of zip held 1 GiB of newlines in bzip2: `zipfile` unpacked the whole stream
    before cutting it to the declared 10 bytes (+1,970 MiB)."""
    bomb = lying_zip(zipfile.ZIP_BZIP2, b"\n" * (8 << 20), DECLARED)
    assert len(bomb) < 2_000
    peak, error = _peak(lambda: expand([Upload("bomb.zip", bomb)], Limits()))
    assert str(error) == ("bomb.zip: archive member 'predictions.jsonl' is compressed with "
                          "bzip2 (read: stored and deflate members)")
    assert peak < 1 << 20


@pytest.mark.parametrize("method", [zipfile.ZIP_LZMA, 99])
def test_other_methods_are_refused_naming_them(method):
    data = lying_zip(zipfile.ZIP_STORED, DECLARED, DECLARED)
    if method == zipfile.ZIP_LZMA:
        data = lying_zip(zipfile.ZIP_LZMA, DECLARED, DECLARED)
    else:
        patched = bytearray(data)
        for at in (patched.index(b"PK\x03\x04") + 8, patched.index(b"PK\x01\x02") + 10):
            struct.pack_into("<H", patched, at, method)
        data = bytes(patched)
    with pytest.raises(DataError, match="is compressed with (lzma|method 99) "):
        expand([Upload("m.zip", data)], Limits())


def test_a_deflate_stream_running_past_its_declared_size_is_refused_as_it_unpacks():
    """With deflate, 522 KB of upload cost 948 MiB: the member is now refused as corrupt at
    its first chunk past the declared size, never unpacked further."""
    bomb = lying_zip(zipfile.ZIP_DEFLATED, DECLARED + b"\n" * (48 << 20), DECLARED)
    assert len(bomb) < 60_000
    peak, error = _peak(lambda: expand([Upload("bomb.zip", bomb)], Limits()))
    assert str(error) == ("bomb.zip: archive member 'predictions.jsonl' cannot be read (its "
                          "data unpacks past its declared 10 bytes)")
    assert peak < 4 << 20


def test_honest_stored_and_deflate_members_read_exactly(abs_lines):
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        data = lying_zip(method, abs_lines, abs_lines)
        (member,) = expand([Upload("ok.zip", data)], Limits())
        assert member.name == "ok.zip:predictions.jsonl" and member.data == abs_lines


def test_a_member_shorter_than_declared_is_refused():
    data = lying_zip(zipfile.ZIP_DEFLATED, DECLARED[:4], DECLARED)
    with pytest.raises(DataError, match=r"cannot be read \(4 bytes where its header declares "
                                        r"10\)"):
        expand([Upload("short.zip", data)], Limits())


@pytest.mark.parametrize("text, depth, values", [
    (b"1", 0, 1), (b'"a[b,{c]"', 0, 1), (b"{}", 1, 1), (b"[]", 1, 1),
    (b'{"a": [1, 2, 3], "b": "x,y"}', 2, 6), (b"[[], [], []]", 2, 4),
    (b'{"a": "\\"[,"}', 1, 2), (b"[[[[1]]]]", 4, 5),
])
def test_a_line_s_shape_is_counted_without_parsing_it(text, depth, values):
    shape = json_shape(text)
    assert (shape.depth, shape.values) == (depth, values)
    parsed = json.loads(text)
    assert shape.containers == _containers(parsed)
    assert _values(parsed) == values
    assert json_shape(b"[ ]").values == 2  # white space in an empty list: counted over, never under


def _containers(value) -> int:
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else ()
    return isinstance(value, (list, dict)) + sum(_containers(item) for item in inner)


def _values(value) -> int:
    if isinstance(value, list):
        return 1 + sum(_values(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(_values(item) for item in value.values())
    return 1


def test_a_line_too_deep_too_many_containers_or_values_is_refused_by_its_shape():
    most = max_values(1 << 20)
    assert most == 131072
    assert shape_problem(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), most) == \
        f"a line nested {MAX_DEPTH + 1} deep (a record nests at most {MAX_DEPTH} deep)"
    assert shape_problem(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, most) is None
    lists = b"[" + b",".join([b"[]"] * MAX_CONTAINERS) + b"]"
    assert shape_problem(lists, most) == (f"a line of {MAX_CONTAINERS + 1} JSON arrays and "
                                          f"objects (a record opens at most {MAX_CONTAINERS})")
    assert shape_problem(lists[:1] + lists[4:], most) is None  # one list fewer
    many = b"[" + b",".join([b"0"] * 99) + b"]"
    assert shape_problem(many, 100) is None
    assert shape_problem(many, 99) == ("a line of 100 JSON values (at most 99: one per 8 "
                                       "bytes of this instance's line limit)")


def test_a_record_as_sumbench_predict_writes_it_passes_however_long_its_document():
    """A record carries its input lines, labels and outputs beside its prediction: a few
    lists, whatever their length."""
    lines = [f"Sentence {n} of a long document, as USB's documents hold them." for n in
             range(2000)]
    record = json.dumps({"task": "EXT", "id": "doc", "input_lines": lines,
                         "labels": [n % 2 for n in range(2000)],
                         "prediction": [0.25] * 2000}).encode()
    assert shape_problem(record, max_values(1 << 20)) is None


@pytest.mark.slow
def test_lines_of_empty_lists_are_refused_before_they_become_objects(usb_track_manifest):
    """60 lines of 1 MB holding 333,000 empty lists each cost +1,428 MiB as Python objects;
    each is refused from its shape, unparsed, one at a time."""
    track, manifest = usb_track_manifest
    line = nested_lists_line(1 << 20)
    upload = Upload("lists.jsonl", line * 20)
    peak, error = _peak(lambda: validate_submission(track, [upload], manifest, Limits(),
                                                    "all"))
    assert [(e.line, e.reason.split(" (")[0]) for e in error.errors][:2] == [
        (1, "a line of 349513 JSON arrays and objects"),
        (2, "a line of 349513 JSON arrays and objects")]
    assert peak < 16 << 20  # one line's counting at a time, never 20 lines of objects


@pytest.mark.slow
def test_the_server_reads_records_one_at_a_time(usb_track_manifest, usb_fixture_dir):
    """Checked against the board's manifest, no list of every parsed record is made: the
    records of a valid submission are drawn one by one as the track checks them."""
    from lb_helpers import fixture_uploads

    track, manifest = usb_track_manifest
    drawn, held = [], []
    original = track.check

    def check(located, manifest):
        held.append(isinstance(located, (list, tuple)))

        def counting():
            for entry in located:
                drawn.append(entry[1])
                yield entry
        return original(counting(), manifest)

    track.check = check
    uploads = fixture_uploads(usb_fixture_dir)
    result = validate_submission(track, uploads, manifest, Limits(), "all")
    assert held == [False] and result.n_records == len(drawn) > 0


@pytest.fixture(scope="module")
def usb_track_manifest(data_dir):
    track = make_track("usb")
    return track, track.manifest(track.load_gold(str(data_dir)), "all")
