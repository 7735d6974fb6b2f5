"""Plain helpers several test modules share (fixtures live in conftest.py)."""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

#: the variable through which the processes a test session starts carry its pid (conftest.py)
OWNER_VARIABLE = "SUMBENCH_TEST_OWNER"


def files_under(folder: Path) -> dict[str, bytes]:
    """{relative POSIX path: bytes} of every file below `folder`."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sumbench(capsys, *args) -> tuple[int, str, str]:
    """Run `sumbench ARGS...` in-process: (exit code, stdout, stderr) of this call alone."""
    from benchmark.cli import main

    capsys.readouterr()
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def model_weights(folder: Path) -> dict:
    """{name: tensor} of a saved model folder (model.safetensors)."""
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def assert_same_weights(first: dict, second: dict) -> None:
    """The same tensor names, and every tensor equal bit for bit."""
    import torch

    assert first.keys() == second.keys()
    different = [name for name in first if not torch.equal(first[name], second[name])]
    assert not different, f"weights differ: {different[:5]}"


#: AllenNLP-style SRL frames of three sentences (words and BIO tags per verb), as `sumbench
#: stus --frames` reads them
SRL_FRAMES = {
    "Mr. Lee founded Acme in 1990.": {
        "words": ["Mr.", "Lee", "founded", "Acme", "in", "1990", "."],
        "verbs": [{"tags": ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "B-ARGM-TMP", "I-ARGM-TMP",
                            "O"]}]},
    "It grew fast.": {"words": ["It", "grew", "fast", "."],
                      "verbs": [{"tags": ["B-ARG1", "B-V", "B-ARGM-MNR", "O"]}]},
    "Sales rose.": {"words": ["Sales", "rose", "."], "verbs": [{"tags": ["B-ARG1", "B-V", "O"]}]},
}


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a browser test saves its screenshot `name`: under $SUMBENCH_SCREENSHOTS when set
    (the docs' images: `SUMBENCH_SCREENSHOTS=docs/img pytest -k browser_or_viewer`), else in
    the test's own folder."""
    folder = Path(os.environ.get("SUMBENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


#: Debian's Chromium, which the browser tests drive through Playwright
CHROMIUM = Path("/usr/bin/chromium")


#: how the tests run Chromium: headless, no sandbox (tests run as root), no GPU, no background
#: traffic
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--no-default-browser-check")


@contextlib.contextmanager
def chromium_process(timeout: float = 60.0):
    """Debian's Chromium in a process group of its own with DevTools on a free 127.0.0.1 port
    and a throwaway profile; yields the DevTools endpoint (http://127.0.0.1:PORT) and stops
    the whole group afterwards."""
    import shutil
    import signal
    import subprocess
    import tempfile

    profile = tempfile.mkdtemp(prefix="sumbench-chromium-")
    process = subprocess.Popen(
        [str(CHROMIUM), *CHROMIUM_FLAGS, "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        port_file = Path(profile) / "DevToolsActivePort"  # Chromium writes its port here
        deadline = time.monotonic() + timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not open DevTools (exit {process.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(profile, ignore_errors=True)


def connect_chromium(playwright, endpoint: str):
    """The session's Chromium (conftest `chromium`) for one test: the caller makes its own
    context (`new_context`) and closes the connection, which closes the contexts it made."""
    return playwright.chromium.connect_over_cdp(endpoint)


def processes_started_here() -> dict[int, str]:
    """{pid: command line} of the live processes (not zombies) that carry this process's
    OWNER_VARIABLE, other than this process itself."""
    me, marker = os.getpid(), f"{OWNER_VARIABLE}={os.getpid()}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # exited, waiting for its parent to read the status
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = command[:300]
    return found


def left_behind(grace: float = 10.0) -> dict[int, str]:
    """`processes_started_here()` once those still stopping have had `grace` seconds."""
    deadline = time.monotonic() + grace
    while (alive := processes_started_here()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def built_once_per_run(tmp_path_factory, name: str, build) -> Path:
    """The folder `build(folder)` fills, built once per test run even across xdist workers
    (the first worker to ask builds it under a file lock, the others wait for it and read
    it). What it holds is read-only to the tests: a test writes to folders of its own."""
    import fcntl
    import shutil

    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # every worker's folder lies in the run's
    folder = run / f"built-once-{name}"
    with open(run / f"built-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():  # none yet, or a build that failed
            staging = run / f"built-once-{name}.staging"
            for leftover in (folder, staging):
                shutil.rmtree(leftover, ignore_errors=True)
            staging.mkdir()
            build(staging)
            (staging / ".built").touch()
            staging.rename(folder)
    return folder


def recorded_models(tmp_path_factory, data_folder: str, builder: str) -> Path:
    """The tiny models that `tests/data/<data_folder>/record.py` recorded an official
    package's outputs on, rebuilt by that script's seeded `builder(folder)` once per run: the
    repository keeps no weights, and the rebuild is the recording's models byte for byte (the
    caller's random state is left as it was)."""
    import torch

    script = Path(__file__).resolve().parent / "data" / data_folder / "record.py"

    def build(folder: Path) -> None:
        module = load_script(script, f"record_{data_folder}")
        with torch.random.fork_rng(devices=[]):
            getattr(module, builder)(folder)

    return built_once_per_run(tmp_path_factory, f"recorded-{data_folder}", build)


def load_script(path: Path, name: str):
    """A script of the repository that is not a package module (.ci/, bench/, recording
    scripts), loaded as a module named `name`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def official_or_skip(folder: Path | None, require_env: str, reason: str) -> Path:
    """`folder`, where an official package the tests compare with is installed; without it
    the test skips with `reason` (how to install it), or fails where CI requires the package
    (`require_env` set)."""
    import pytest

    if folder is not None:
        return folder
    if os.environ.get(require_env):
        pytest.fail(reason)
    pytest.skip(reason)
