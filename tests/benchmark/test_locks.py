"""One run per output folder: a second process on the same `--out` refuses, stale locks
(a dead owner, another host's owner that stopped refreshing, leftovers of file systems without
links) are replaced exactly once however many processes race, and a killed process's staging
folders are removed by the next writer."""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import sumbench

PRED = "factuality_classification.jsonl"
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def live_lock(out, command: str):
    """The lock of `out` held by another live process (its pid) for the block."""
    from tasks.plumbing.locks import _process_start, lock_path

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock_path(out).write_text(json.dumps({
            "pid": owner.pid, "host": socket.gethostname(), "command": command,
            "process_start": _process_start(owner.pid), "since": "2026-11-24T10:00:00"}))
        yield owner.pid
    finally:
        owner.kill()
        owner.wait()


def test_a_second_process_on_the_same_out_refuses_and_a_stale_lock_is_replaced(
        workspace, tmp_path, capsys):
    from tasks.plumbing.locks import lock_path

    out = tmp_path / "run"
    with live_lock(out, "predict") as owner:
        code, _, err = sumbench(capsys, "predict", "--model", workspace["model"], "--tasks",
                                "FAC", "--data", workspace["data"], "--out", out)
        assert code == 2 and not out.exists()
        assert (f"sumbench predict: error: {out} is in use by 'sumbench predict' (pid "
                f"{owner} on {socket.gethostname()}, since 2026-11-24T10:00:00)") in err
    # the owner is gone: its lock is stale, replaced with a note, and released at the end
    code, _, err = sumbench(capsys, "predict", "--model", tmp_path / "no-model", "--tasks",
                            "FAC", "--data", workspace["data"], "--out", out)
    assert code == 2 and f"removing the stale lock {lock_path(out)}" in err
    assert "does not exist" in err and not lock_path(out).exists()


def test_a_writable_out_under_a_read_only_parent_runs_without_the_lock(tmp_path, capsys,
                                                                        monkeypatch):
    """A writable volume mounted under a read-only folder (the lock file cannot be written
    beside it): the command runs unlocked, with a note; a folder that does not exist yet is
    still an error naming it."""
    import errno as errnos

    import tasks.plumbing.locks as locks

    def read_only(folder, command, owner=None):
        raise OSError(errnos.EROFS, "Read-only file system", str(locks.lock_path(folder)))

    monkeypatch.setattr(locks, "acquire", read_only)
    mounted = tmp_path / "volume"
    mounted.mkdir()
    with locks.output_lock(mounted, "experiment fractions") as held:
        assert held is None
    assert (f"sumbench: note: running without a lock on {mounted}: its parent folder is not "
            f"writable (Read-only file system)") in capsys.readouterr().err
    with pytest.raises(OSError) as caught:
        with locks.output_lock(tmp_path / "new", "baseline"):
            pass
    assert caught.value.strerror == "cannot create new here (Read-only file system)"
    assert caught.value.filename == str(tmp_path)


def test_another_hosts_lock_is_stale_once_its_owner_stops_refreshing_it(tmp_path, capsys):
    """A lock from another host (a cluster's shared file system) cannot be checked by pid: it
    counts as alive while its owner refreshes it, and is replaced once it has not been
    refreshed for STALE_AFTER_SECONDS (a job killed with SIGKILL used to block the folder until
    someone deleted the lock by hand)."""
    import tasks.plumbing.locks as locks

    out = tmp_path / "run"
    path = locks.lock_path(out)
    path.write_text(json.dumps({"pid": 4242, "host": "node-7", "command": "train",
                                "since": "2026-11-25T10:00:00"}))
    now = time.time()
    os.utime(path, (now - 30, now - 30))
    with pytest.raises(locks.FolderInUseError) as caught:
        with locks.output_lock(out, "predict"):
            pass
    message = re.sub(r"refreshed 3\d s ago", "refreshed 3x s ago", str(caught.value))
    assert (f"{out} is in use by 'sumbench train' (pid 4242 on node-7, since "
            f"2026-11-25T10:00:00; refreshed 3x s ago, stale after 600 s without)") in message
    stale = now - locks.STALE_AFTER_SECONDS - 5
    os.utime(path, (stale, stale))
    with locks.output_lock(out, "predict", heartbeat_seconds=0.05) as held:
        note = re.sub(r"for 6[01]\d s", "for 6xx s", capsys.readouterr().err)
        assert f"removing the stale lock {path} (owner pid 4242 on node-7 has not refreshed " \
               f"it for 6xx s)" in note
        assert json.loads(held.read_text())["pid"] == os.getpid()
        os.utime(held, (stale, stale))  # the heartbeat refreshes it again
        deadline = time.monotonic() + 10
        while time.time() - held.stat().st_mtime > 60 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert time.time() - held.stat().st_mtime < 60
    assert not path.exists()
    beats = [t for t in threading.enumerate() if t.name == "sumbench-lock-heartbeat"]
    assert beats == []  # stopped with the lock


def test_a_stale_lock_is_removed_only_while_it_is_still_the_stale_one(tmp_path, capsys):
    """Two processes that both found the same stale lock: the slower one used to remove the
    lock the faster one had just taken, and both held the folder. Removal now happens while
    holding the breaker (flock) and only if the lock is still the file judged stale; a
    process releases only its own lock (same pid on another host, or an earlier process of
    the pid, is not it)."""
    import fcntl

    import tasks.plumbing.locks as locks

    path = locks.lock_path(tmp_path / "run")
    stale = {"pid": 4242, "host": "node-7", "command": "train", "since": "2026-11-25"}
    fresh = {"pid": 4243, "host": "node-8", "command": "train", "since": "2026-11-25"}
    old = time.time() - locks.STALE_AFTER_SECONDS - 60
    path.write_text(json.dumps(stale))
    os.utime(path, (old, old))
    judged = locks._identity(path)
    path.unlink()
    path.write_text(json.dumps(fresh))  # taken by another process since it was judged
    locks._remove_stale(path, stale, judged)
    assert json.loads(path.read_text()) == fresh
    path.write_text(json.dumps(stale))
    os.utime(path, (old, old))
    judged = locks._identity(path)
    breaker = path.with_name(path.name + ".break")
    holder = os.open(breaker, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is removing it: this one waits
    locks._remove_stale(path, stale, judged)
    assert path.exists()
    os.close(holder)  # as when that process dies: the kernel lets go of the breaker
    locks._remove_stale(path, stale, judged)
    assert not path.exists() and not breaker.exists()
    assert "owner pid 4242 on node-7 has not refreshed it" in capsys.readouterr().err
    mine = {"pid": os.getpid(), "host": "node-9", "command": "train"}
    path.write_text(json.dumps(mine))
    locks.release(path)  # the same pid on another host is another process
    assert path.exists()
    path.write_text(json.dumps({**mine, "host": socket.gethostname(), "process_start": "1"}))
    locks.release(path)  # an earlier process of this pid
    assert path.exists()
    assert locks._create(path, {"pid": 1}) is False  # and creation never replaces a lock
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no spare files


def test_locks_on_file_systems_without_links_or_with_leftovers(tmp_path, monkeypatch, capsys):
    """Hard links missing (ENOSYS on sshfs), a parent that cannot be written holding a live
    lock, a breaker and a spare file left by killed processes, and an empty lock whose owner
    is still writing it (file systems without hard links)."""
    import errno as errnos

    import tasks.plumbing.locks as locks

    def no_links(source, target):
        raise OSError(errnos.ENOSYS, "Function not implemented")

    out = tmp_path / "run"
    path = locks.lock_path(out)
    with monkeypatch.context() as patched:
        patched.setattr(locks.os, "link", no_links)
        with locks.output_lock(out, "train") as held:
            assert json.loads(held.read_text())["command"] == "train"
    assert not path.exists()

    live = {**locks._owner_record("slow writer")}  # this process, as another taking

    def lock_appears_then_no_room(spare, owner):  # another process made the lock meanwhile
        path.write_text(json.dumps(live))
        raise PermissionError(errnos.EACCES, "Permission denied", str(spare))
    with monkeypatch.context() as patched:
        patched.setattr(locks, "_write_spare", lock_appears_then_no_room)
        with pytest.raises(locks.FolderInUseError, match="in use by 'sumbench slow writer'"):
            locks.acquire(out, "train")
    path.unlink()

    dead = _dead_pid()
    old = time.time() - 3600
    path.write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    breaker = path.with_name(path.name + ".break")
    breaker.write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    spare = path.with_name(f"{path.name}.node-3.77.88.new")
    spare.write_text("{}")
    os.utime(spare, (old, old))
    started = time.monotonic()
    with locks.output_lock(out, "train"):
        assert time.monotonic() - started < 5  # no waiting for the breaker to age
        assert not breaker.exists() and not spare.exists()
    assert "removing the stale lock" in capsys.readouterr().err

    monkeypatch.setattr(locks, "EMPTY_GRACE_SECONDS", 2.0)
    path.write_text("")  # created, its owner not written yet
    threading.Timer(0.3, lambda: path.write_text(json.dumps(live))).start()
    with pytest.raises(locks.FolderInUseError, match="in use by 'sumbench slow writer'"):
        locks.acquire(out, "train")
    path.write_text("")
    old = time.time() - 60
    os.utime(path, (old, old))  # an empty lock nobody wrote for a minute is stale
    assert locks.acquire(out, "train") == path
    locks.release(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


RACER = """
import json, os, sys, time
from pathlib import Path
from tasks.plumbing.locks import FolderInUseError, output_lock
out, start = Path(sys.argv[1]), Path(sys.argv[2])
(out.parent / "ready" / str(os.getpid())).touch()
while not start.exists():
    time.sleep(0.001)
try:
    with output_lock(out, "race"):
        holders = out.parent / "holders"
        mine = holders / str(os.getpid())
        mine.touch()
        time.sleep(0.3)
        others = [p.name for p in holders.iterdir() if p != mine]
        mine.unlink()
        print(json.dumps({"held": True, "others": others}))
except FolderInUseError:
    print(json.dumps({"held": False}))
"""


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


STALE_LOCKS = {  # what a racer finds where the lock is, all of it left long ago
    "another host's": lambda: json.dumps({"pid": 4242, "host": "node-7", "command": "train"}),
    "a dead process's": lambda: json.dumps({"pid": _dead_pid(), "host": socket.gethostname()}),
    "a damaged": lambda: "{not json",
    "an empty": lambda: "",
}


@pytest.mark.parametrize("kind", sorted(STALE_LOCKS))
@pytest.mark.slow
def test_processes_racing_for_a_stale_lock_never_hold_it_together(tmp_path, kind):
    """Eight processes find the same stale lock at once (a requeued cluster array): whoever
    takes the folder holds it alone. Five rounds per kind (a damaged or empty lock let two
    processes in about one round in 40)."""
    import tasks.plumbing.locks as locks

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for round_number in range(5):
        root = tmp_path / str(round_number)
        (root / "holders").mkdir(parents=True)
        (root / "ready").mkdir()
        out, start = root / "run", root / "start"
        path = locks.lock_path(out)
        path.write_text(STALE_LOCKS[kind]())
        old = time.time() - locks.STALE_AFTER_SECONDS - 60
        os.utime(path, (old, old))
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(start)],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True) for _ in range(8)]
        deadline = time.monotonic() + 60
        while len(list((root / "ready").iterdir())) < len(racers):  # all at the start line
            assert time.monotonic() < deadline, "the racers did not start"
            time.sleep(0.01)
        start.touch()
        results = []
        for racer in racers:
            stdout, stderr = racer.communicate(timeout=120)
            assert racer.returncode == 0, stderr
            results.append(json.loads(stdout))
        held = [result for result in results if result["held"]]
        assert held and all(result["others"] == [] for result in held), (kind, results)
        assert sorted(p.name for p in root.iterdir()) == ["holders", "ready", "start"]


def test_a_zombie_owner_an_interrupt_and_a_vanishing_parent(tmp_path, monkeypatch):
    """A killed owner its parent has not reaped (a container without init) counted as alive;
    an interrupt right after the lock was linked in left it behind; a sibling command that
    removed the parent folder it had made, between this one's mkdir and its lock, failed
    this one."""
    import tasks.plumbing.locks as locks

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = locks._process_start(child.pid)
    deadline = time.monotonic() + 30
    while (locks._proc_stat(child.pid) or ["?"])[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # exited, not reaped: a zombie
    owner = {"pid": child.pid, "host": socket.gethostname(), "process_start": started}
    assert not locks._owner_alive(owner, tmp_path / "none")
    child.wait()

    out = tmp_path / "run"
    real_link = os.link

    def link_then_interrupt(source, target):
        real_link(source, target)
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(locks.os, "link", link_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            with locks.output_lock(out, "train"):
                pass
    assert not locks.lock_path(out).exists()

    deep = tmp_path / "new" / "deeper" / "out0"
    real_acquire, calls = locks.acquire, []

    def sibling_cleans_up_first(folder, command, owner=None):
        calls.append(folder)
        if len(calls) == 1:
            (tmp_path / "new" / "deeper").rmdir()  # as the sibling's failed command does
        return real_acquire(folder, command, owner)

    monkeypatch.setattr(locks, "acquire", sibling_cleans_up_first)
    with locks.output_lock(deep, "train") as held:
        assert held.exists() and len(calls) == 2
    monkeypatch.undo()

    real_mkdir, made = Path.mkdir, []

    def removed_while_checked(self, *args, **kwargs):  # what mkdir says in that race
        made.append(self)
        if len(made) == 1:
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", removed_while_checked)
    with locks.output_lock(tmp_path / "other" / "out1", "train") as held:
        assert held.exists() and len(made) >= 2


def test_baseline_and_experiments_hold_their_out_folder_too(workspace, tmp_path, capsys):
    """Two `baseline` runs on one --out both exited 0 with one output silently replaced, and
    two experiments on one folder ran each other's jobs; `experiment job` (many at once on a
    cluster) takes no lock."""
    out = tmp_path / "shared-out"
    with live_lock(out, "experiment fractions") as owner:
        for argv in (("baseline", "--data", workspace["data"], "--tasks", "abs", "--out", out),
                     ("experiment", "fractions", "--data", workspace["data"], "--model", "m",
                      "--fractions", "0.5", "--plan", "--out", out),
                     ("experiment", "collect", out)):
            code, _, err = sumbench(capsys, *argv)
            assert code == 2 and not out.exists(), argv
            assert f"{out} is in use by 'sumbench experiment fractions' (pid {owner}" in err
        code, _, err = sumbench(capsys, "experiment", "job", out, "1")
        assert code == 2 and "in use" not in err  # refused for its missing plan instead


def test_stale_staging_folders_of_a_killed_process_are_removed(tmp_path):
    from tasks.plumbing.atomic import atomic_directory

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.{dead.pid}.abc123.partial"
    live = tmp_path / f".out.{os.getpid()}.def456.partial"
    stale.mkdir()
    live.mkdir()
    with atomic_directory(tmp_path / "out") as staging:
        (staging / "x").write_text("x")
    assert not stale.exists() and live.exists()  # a live writer's staging folder stays
    assert (tmp_path / "out" / "x").read_text() == "x"


# ---------------------------------------------------------------- resource limits, signals


def test_the_demo_locks_its_default_out_folder_too(tmp_path, monkeypatch, capsys):
    """`sumbench demo` without --out writes ./sumbench-demo: that folder is checked and locked
    like a given one (a second demo there is refused before it starts)."""
    from benchmark.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sumbench-demo").write_text("not a folder")
    assert main(["demo"]) == 2
    assert "--out sumbench-demo is a file; give a folder" in capsys.readouterr().err
    (tmp_path / "sumbench-demo").unlink()
    with live_lock(tmp_path / "sumbench-demo", "demo") as pid:
        assert main(["demo"]) == 2
    assert f"pid {pid}" in capsys.readouterr().err
