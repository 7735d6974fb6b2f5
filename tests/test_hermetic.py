"""The suite runs the same on any machine: every Python tool it starts is this environment's
(`sys.executable -m ...`), never `python3`, `pip` or a console script found on PATH, and no
environment it makes sees the base interpreter's packages (`--system-site-packages`). `.ci/run`
also checks, before the tests, that `python3` and `pip` on PATH are the CI venv's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: a command whose first word is a Python tool found on PATH, or a venv that sees the base
#: interpreter's packages
FROM_PATH = re.compile(r"""(?:subprocess\.(?:run|Popen|call|check_call|check_output)"""
                       r"""|create_subprocess_exec|os\.exec\w*)\(\s*[\[(]?\s*"""
                       r"""["'](?:python[\d.]*|pip\d?|pytest|sumbench|mkdocs|ruff|lm_eval|lm-eval"""
                       r"""|alembic|uvicorn|playwright)["']|--system-site-packages""")


def offending_calls(text: str) -> list[str]:
    return [" ".join(found.group(0).split()) for found in FROM_PATH.finditer(text)]


@pytest.mark.parametrize("line, caught", [
    ('subprocess.run(["python3", "-m", "pip", "install", "x"])', True),
    ("subprocess.run(['pip', 'install', 'x'])", True),
    ('subprocess.Popen(["sumbench", "score", path])', True),
    ('subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root)])', True),
    ('subprocess.run((  "mkdocs", "build"))', True),
    ('subprocess.check_output(\n    ["pytest", "-q"])', True),
    ('asyncio.create_subprocess_exec("uvicorn", "app")', True),
    ('subprocess.run([sys.executable, "-m", "mkdocs", "build"])', False),
    ('subprocess.run([str(venv / "bin" / "python"), "-m", "benchmark"])', False),
    ('monkeypatch.setattr(sys, "argv", ["sumbench", *argv])', False),
    ('pytest.importorskip("lm_eval", reason="lm-eval is not installed")', False),
])
def test_the_check_catches_tools_from_path(line, caught):
    assert bool(offending_calls(line)) is caught


def test_no_test_or_benchmark_starts_a_python_tool_from_path():
    found = [f"{path.relative_to(REPO)}: {call}"
             for folder in ("tests", "bench") for path in sorted((REPO / folder).rglob("*.py"))
             if path.name != Path(__file__).name
             for call in offending_calls(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_the_session_end_check_finds_a_process_whose_parent_is_gone():
    """A process a test starts and leaves (here a grandchild whose parent exited, so init
    holds it) carries the session's marker and is named by the check; once stopped it is not."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from helpers import left_behind, processes_started_here

    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc to look for processes in")
    before = processes_started_here()
    started = subprocess.run(
        [sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable,"
         " '-c', 'import time; time.sleep(300)'], stdout=subprocess.DEVNULL, stderr="
         "subprocess.DEVNULL).pid)"], capture_output=True, text=True, check=True, timeout=60)
    orphan = int(started.stdout)
    try:
        found = left_behind(grace=0.5)
        assert orphan in found and "time.sleep(300)" in found[orphan]
    finally:
        os.kill(orphan, signal.SIGKILL)
    deadline = time.monotonic() + 10  # until it is reaped (others of this worker may run on)
    while orphan in processes_started_here() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert orphan not in processes_started_here()
    assert set(processes_started_here()) <= set(before)


def functions_of(module: Path) -> dict[str, bool]:
    """{name: whether `-m "not slow"` keeps it} of a module's test functions: kept unless it
    or the module (`pytestmark`) carries the slow mark."""
    import ast

    tree = ast.parse(module.read_text(encoding="utf-8"))
    module_slow = any(isinstance(node, ast.Assign) and "mark.slow" in ast.unparse(node.value)
                      and any(getattr(target, "id", "") == "pytestmark"
                              for target in node.targets) for node in tree.body)
    return {node.name: not module_slow and not any("mark.slow" in ast.unparse(decorator)
                                                   for decorator in node.decorator_list)
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_the_quick_loop_touches_every_package():
    """`pytest -m "not slow"` (the development loop) still runs tests of every package, and
    leaves some of each out (so the mark is seen where it is written)."""
    for package in ("benchmark", "leaderboard", "trainers", "tasks"):
        kept = [kept for module in sorted((REPO / "tests" / package).glob("test_*.py"))
                for kept in functions_of(module).values()]
        assert kept.count(True) >= 10 and kept.count(False) >= 1, (package, kept.count(True),
                                                                    kept.count(False))


def test_the_shared_service_modules_run_as_one_unit_and_the_longest_start_first():
    from scheduling import (
        LONGEST_FIRST,
        SHARED_SERVICE_MODULES,
        SHARED_SERVICES_GROUP,
        next_unit,
        unit_of,
        unlisted_service_modules,
    )

    assert unit_of("tests/leaderboard/test_leaderboard_live.py::test_x[a::b]") == \
        SHARED_SERVICES_GROUP == unit_of("tests/benchmark/test_viewer.py::test_y")
    assert unit_of("tests/tasks/test_io.py::test_z[p]") == "tests/tasks/test_io.py"
    assert all((REPO / module).is_file() for module in SHARED_SERVICE_MODULES)
    assert all(unit == SHARED_SERVICES_GROUP or (REPO / unit).is_file()
               for unit in LONGEST_FIRST)
    waiting = {"tests/tasks/test_io.py": {}, LONGEST_FIRST[2]: {}, LONGEST_FIRST[1]: {}}
    assert next_unit(waiting) == LONGEST_FIRST[1]
    assert next_unit({"tests/tasks/test_io.py": {}}) is None
    assert unlisted_service_modules([
        ("tests/tasks/test_new.py", ["tmp_path", "postgres_server"]),
        ("tests/leaderboard/test_leaderboard_live.py", ["postgres_server"]),
        ("tests/tasks/test_io.py", ["tmp_path"])]) == ["tests/tasks/test_new.py"]


def test_a_folder_built_once_per_run_is_built_once_and_a_failed_build_again(tmp_path_factory):
    """Workers asking at once get one build (the others wait on the lock); a build that
    raised leaves nothing that passes for built."""
    import threading

    from helpers import built_once_per_run

    builds, started = [], threading.Barrier(3)

    def build(folder: Path) -> None:
        builds.append(folder)
        (folder / "made").write_text(str(len(builds)))

    def ask(into: list) -> None:
        started.wait()
        into.append(built_once_per_run(tmp_path_factory, "hermetic-probe", build))

    tmp_path_factory.getbasetemp()  # made once per process, before the threads ask
    answers: list[Path] = []
    threads = [threading.Thread(target=ask, args=(answers,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(set(answers)) == 1
    assert (answers[0] / "made").read_text() == "1"

    def broken(folder: Path) -> None:
        (folder / "half").write_text("")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError):
        built_once_per_run(tmp_path_factory, "hermetic-broken", broken)
    again = built_once_per_run(tmp_path_factory, "hermetic-broken", build)
    assert sorted(p.name for p in again.iterdir()) == [".built", "made"]


def test_processes_the_tests_start_keep_compiled_modules_outside_the_checkout():
    """Compiled modules are cached for every process (none is told not to write them), and
    never into the checkout when the environment asked for none there."""
    import os
    import subprocess
    import sys

    probe = "import sys; print(sys.dont_write_bytecode, sys.pycache_prefix)"
    answer = subprocess.run([sys.executable, "-c", probe], env=os.environ, check=True,
                            capture_output=True, text=True).stdout.split()
    assert answer[0] == "False"
    if answer[1] != "None":  # the environment asked for no bytecode: a cache outside
        repo = Path(__file__).resolve().parent.parent
        assert not Path(answer[1]).resolve().is_relative_to(repo), answer
