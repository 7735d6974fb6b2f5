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
