"""tasks.plumbing.atomic (through tasks.plumbing.io's writers too): atomic writes keep ordinary
permissions and
never lose the old output; tasks.plumbing.io's readers."""
from __future__ import annotations

import contextlib
import os
import stat
import threading

import pytest

import tasks.plumbing.io as io_module
from tasks.plumbing.atomic import atomic_directory, atomic_path, current_umask
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json, read_jsonl, write_json, write_jsonl


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_current_umask_reads_without_changing(mask):
    with umask(mask):
        assert current_umask() == mask
        assert current_umask() == mask  # still in force
        assert os.umask(mask) == mask


@pytest.mark.parametrize("mask,file_mode,dir_mode", [(0o022, 0o644, 0o755),
                                                     (0o027, 0o640, 0o750),
                                                     (0o002, 0o664, 0o775)])
def test_new_outputs_get_umask_modes(tmp_path, mask, file_mode, dir_mode):
    with umask(mask):
        write_jsonl(tmp_path / "a.jsonl", [{"x": 1}])
        write_json(tmp_path / "b.json", {"y": 2})
        with atomic_directory(tmp_path / "folder") as staging:
            (staging / "inner.txt").write_text("plain open()")
            (staging / "sub").mkdir()
            (staging / "sub" / "deep.txt").write_text("nested")
        (tmp_path / "plain").mkdir()
        (tmp_path / "plain.txt").write_text("reference")
    assert mode(tmp_path / "plain.txt") == file_mode and mode(tmp_path / "plain") == dir_mode
    assert mode(tmp_path / "a.jsonl") == file_mode == mode(tmp_path / "b.json")
    assert mode(tmp_path / "folder") == dir_mode  # mkdtemp alone would give 0700
    # what is written inside the staging folder already gets the ordinary modes
    assert mode(tmp_path / "folder" / "inner.txt") == file_mode
    assert mode(tmp_path / "folder" / "sub") == dir_mode
    assert mode(tmp_path / "folder" / "sub" / "deep.txt") == file_mode
    assert read_jsonl(tmp_path / "a.jsonl") == [{"x": 1}]


def test_rewriting_a_file_keeps_its_mode_like_open(tmp_path):
    target = tmp_path / "kept.json"
    with umask(0o022):
        write_json(target, {"v": 1})
        os.chmod(target, 0o600)
        write_json(target, {"v": 2})
        assert mode(target) == 0o600 and '"v": 2' in target.read_text()
        os.chmod(target, 0o664)
        with atomic_path(target) as tmp:
            assert mode(tmp) == 0o664  # set before the caller writes
            with open(tmp, "w") as handle:
                handle.write("new")
    assert mode(target) == 0o664 and target.read_text() == "new"


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "out") as staging:
            (staging / "half.txt").write_text("partial")
            raise RuntimeError("bad input")
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "f.txt"):
            raise RuntimeError("bad input")
    assert list(tmp_path.iterdir()) == []


def test_directory_replacement_swaps_and_cleans_up(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target) as staging:
        (staging / "v.txt").write_text("1")
    with atomic_directory(target) as staging:
        (staging / "v.txt").write_text("2")
    assert (target / "v.txt").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_failed_swap_restores_the_old_folder(tmp_path, monkeypatch):
    """If moving the staged folder in fails, the previous folder comes back in place."""
    target = tmp_path / "out"
    with atomic_directory(target) as staging:
        (staging / "v.txt").write_text("old")
    real_replace, calls = os.replace, []

    def failing_second_replace(src, dst):
        calls.append((os.fspath(src), os.fspath(dst)))
        if len(calls) == 2:  # 1: out -> .out.old, 2: staging -> out
            raise OSError("simulated rename failure")
        return real_replace(src, dst)

    monkeypatch.setattr(io_module.os, "replace", failing_second_replace)
    with pytest.raises(OSError, match="simulated"):
        with atomic_directory(target) as staging:
            (staging / "v.txt").write_text("new")
    monkeypatch.undo()
    assert len(calls) == 3 and calls[2] == (str(tmp_path / ".out.old"), str(target))
    assert (target / "v.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no backup, no staging


def test_a_folder_that_cannot_be_moved_aside_is_named_not_its_backup(tmp_path, monkeypatch):
    """An output folder that cannot be renamed (immutable, a mount point) used to be reported
    as 'out -> .out.old', naming an internal backup the user never made."""
    import errno

    target = tmp_path / "out"
    with atomic_directory(target) as staging:
        (staging / "v.txt").write_text("old")
    real_replace = os.replace

    def immutable(src, dst):
        if os.fspath(src) == str(target):
            raise PermissionError(errno.EPERM, "Operation not permitted", os.fspath(src),
                                  None, os.fspath(dst))
        return real_replace(src, dst)

    monkeypatch.setattr(io_module.os, "replace", immutable)
    with pytest.raises(OSError) as caught:
        with atomic_directory(target) as staging:
            (staging / "v.txt").write_text("new")
    assert (caught.value.errno, caught.value.filename, caught.value.filename2) == \
        (errno.EPERM, str(target), None)
    assert caught.value.strerror == "cannot replace it (Operation not permitted)"
    monkeypatch.undo()
    assert (target / "v.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replacing_a_file_by_a_folder_leaves_no_backup(tmp_path):
    target = tmp_path / "out"
    target.write_text("was a file")
    with atomic_directory(target) as staging:
        (staging / "v.txt").write_text("1")
    assert (target / "v.txt").read_text() == "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_devices_and_pipes_are_written_in_place_and_never_replaced(tmp_path):
    """`--out /dev/null` or `/dev/stdout`: moving a file over a device would replace it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    write_json(fifo, {"a": 1})
    reader.join(timeout=10)
    assert got == ['{\n "a": 1\n}\n'] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(SumbenchError, match="is a device, pipe or socket, not a folder"):
        with atomic_directory(fifo):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    redirected = tmp_path / "redirected.txt"  # `--out /dev/stdout` with stdout in a file
    with open(redirected, "w") as handle:  # `>> log`: what it holds stays
        handle.write("EARLIER\n")
        handle.flush()
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{handle.fileno()}")
        write_json(link, {"b": 2})
        assert link.is_symlink() and redirected.read_text() == 'EARLIER\n{\n "b": 2\n}\n'
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    except PermissionError:
        return  # not root: no device nodes
    write_json(device, {"a": 1})
    assert stat.S_ISCHR(os.stat(device).st_mode) and device.read_text() == ""


def test_read_json_returns_any_value_and_round_trips_write_json(tmp_path):
    write_json(tmp_path / "a.json", {"b": [1, 2.5, None], "a": "é"})
    assert read_json(tmp_path / "a.json") == {"a": "é", "b": [1, 2.5, None]}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_json(str(tmp_path / "list.json")) == [1, 2]
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf["\xef\xbb\xbf"]')  # a mark, then one inside
    assert read_json(tmp_path / "bom.json") == ["\ufeff"]


def test_read_json_errors_name_the_path_and_where(tmp_path):
    def error(path, **options) -> DataError:
        with pytest.raises(DataError) as caught:
            read_json(path, **options)
        return caught.value

    missing = error(tmp_path / "none.json", what="results file")
    assert str(missing) == f"{tmp_path / 'none.json'}: results file not found"
    (tmp_path / "bad.json").write_text('{\n "a": 1,\n "b": [1,,2]\n}')
    bad = error(tmp_path / "bad.json")
    assert (bad.path, bad.line) == (str(tmp_path / "bad.json"), 3)
    assert bad.reason == "malformed JSON (Expecting value at column 10)"
    (tmp_path / "latin1.json").write_bytes('{\n"a": "\u00e9"}'.encode("latin-1"))
    latin1 = error(tmp_path / "latin1.json")
    assert latin1.line == 2 and latin1.reason.startswith("not UTF-8 text (invalid")
    (tmp_path / "latin1.json").write_bytes(b"\xef\xbb\xbf" + '{\n"a": "\u00e9"}'.encode("latin-1"))
    assert error(tmp_path / "latin1.json").line == 2  # counted past the byte order mark
    (tmp_path / "twice.json").write_text('{"s": {"ex1": 0.5}, "t": {}, "s": {"ex1": 0.9}}')
    twice = error(tmp_path / "twice.json")
    assert (twice.field, twice.reason) == \
        ("s", "given twice in one JSON object (which one is meant is ambiguous)")
    (tmp_path / "ok.json").write_text('{"s": {"a": 1}, "t": {"a": 2}}')  # same key, two objects
    assert read_json(tmp_path / "ok.json") == {"s": {"a": 1}, "t": {"a": 2}}
    folder = error(tmp_path, what="spec file")
    assert folder.path == str(tmp_path) and folder.reason.startswith("cannot read the spec file")


def test_jsonl_lines_bom_nesting_surrogates_folders_and_pipes(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"b": "\\ud83d\\ude00 \\u2019"}\n')
    assert read_jsonl(path) == [{"a": 1}, {"b": "\U0001F600 \u2019"}]  # a pair is text
    cases = [(b'{"a": 1}\n\xef\xbb\xbf{"b": 2}\n', 2, None, "malformed JSON"),  # BOM: line 1
             (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 1, None,
              "JSON nested too deeply"),
             (b'{"a": 1}\n{"x": [{"y": "\\udc00"}]}\n', 2, "x", "escape that is not half"),
             (b'{"a": 1}\n{"b": 1, "c": [{"d": 2, "d": 2}]}\n', 2, "d", "given twice in one "
              "JSON object"),
             (b'{"a": 1, "b": 2, "a": 1}\n', 1, "a", "given twice")]
    for data, line, field, message in cases:
        path.write_bytes(data)
        with pytest.raises(DataError, match=message) as caught:
            read_jsonl(path)
        assert (caught.value.path, caught.value.line, caught.value.field) == \
            (str(path), line, field)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="expected a JSON Lines file, got a folder$"):
        read_jsonl(tmp_path / "empty")
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "fac.jsonl").write_text("{}\n")
    with pytest.raises(DataError) as caught:  # a run folder: where its predictions are
        read_jsonl(run)
    assert caught.value.reason == (f"expected a JSON Lines file, got a folder (its JSON Lines "
                                   f"files: {run}/predictions/*.jsonl)")
    path.write_text('{\n "a": 1\n}\n')  # an indented JSON document
    with pytest.raises(DataError, match="this looks like a JSON document, not JSON Lines"):
        read_jsonl(path)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)

    def write():  # a process substitution or /dev/stdin is a pipe, not a regular file
        with open(fifo, "wb") as handle:
            handle.write(b'{"a": 3}\n')

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert read_jsonl(fifo) == [{"a": 3}]
    writer.join(timeout=10)


def test_a_lone_surrogate_as_deep_as_json_allows_is_found_without_recursion():
    import sys

    from tasks.plumbing.io import json_line_object

    def nested(depth: int) -> bytes:
        return b'{"a": ' + b"[" * depth + b'"\\udc00"' + b"]" * depth + b"}"

    for depth in range(sys.getrecursionlimit(), 0, -1):  # the deepest the reader accepts
        with pytest.raises(DataError) as caught:
            json_line_object(nested(depth), "f.jsonl", 1)
        if caught.value.reason != "JSON nested too deeply":
            break
    assert depth > sys.getrecursionlimit() // 2
    assert caught.value.field == "a" and "not half of a pair" in caught.value.reason


def test_errors_inside_a_staged_folder_name_the_output_not_the_staging_folder(tmp_path):
    import errno

    target = tmp_path / "out"
    with pytest.raises(OSError) as caught:
        with atomic_directory(target) as staging:
            (staging / "sub").mkdir()
            raise OSError(errno.EACCES, "Permission denied", str(staging / "sub" / "f.json"))
    assert caught.value.filename == str(target / "sub" / "f.json")
    with pytest.raises(OSError) as caught:
        with atomic_directory(target):
            raise OSError(errno.ENOSPC, "No space left on device")  # a write names no file
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(target))
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    with pytest.raises(ConnectionRefusedError) as caught:
        with atomic_directory(target):
            raise refused  # not about the output: left as it is
    assert caught.value is refused
    assert list(tmp_path.iterdir()) == []


def _read_rows(path, counts, parse=float):
    return io_module.read_number_rows(
        path, counts, what="scores file", lines_for="items", parse=parse,
        count_error=lambda found, wanted: f"{found} values for {wanted}")


@pytest.mark.parametrize("text, counts, parse, message, line", [
    ("1\t2\n", [2, 1], float, "1 lines for 2 items", None),
    ("1\tx\n", [2], float, "expected TAB-separated numbers", 1),
    ("1\n1\t2\t3\n", [1, 2], float, "3 values for 2", 2),
    ("1\t0.5\n", [2], int, "expected TAB-separated numbers", 1),
    ("\n", [1], float, "0 values for 1", 1),
])
def test_number_rows_name_the_line_at_fault(tmp_path, text, counts, parse, message, line):
    path = tmp_path / "scores.txt"
    path.write_text(text)
    with pytest.raises(DataError, match=message) as caught:
        _read_rows(path, counts, parse)
    assert caught.value.line == line and str(path) in str(caught.value)


def test_number_rows_read_tabs_signs_and_empty_lines(tmp_path):
    path = tmp_path / "scores.txt"
    path.write_text("\ufeff1\t-2.5\n\n+3\n")
    assert _read_rows(path, [2, 0, 1]) == [[1.0, -2.5], [], [3.0]]
    with pytest.raises(DataError, match="scores file not found"):
        _read_rows(tmp_path / "missing.txt", [1])
