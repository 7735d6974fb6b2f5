"""The package layers read top-down: benchmark -> leaderboard -> trainers -> tasks.

Every import statement of every module (at module level, inside functions and under
TYPE_CHECKING alike) is read from the source: a module may import its own package and the
packages below it, never one above, and no chain of imports between our modules may lead
back to where it started.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: top to bottom; a package may import the ones after it
LAYERS = ("benchmark", "leaderboard", "trainers", "tasks")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for layer in LAYERS
            for path in sorted((REPO / layer).rglob("*.py"))}


def imported_names(path: Path, name: str) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, node.lineno))
            # `from pkg import module` imports the submodule too
            found.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)
    return found


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {our module it imports: line}."""
    modules = package_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = {}
        for target, line in imported_names(path, name):
            if target in modules and target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def layer_of(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    return [f"{source} (line {line}) imports {target}"
            for source, edges in sorted(graph.items())
            for target, line in sorted(edges.items())
            if layer_of(target) < layer_of(source)]


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}   # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_walker_sees_every_package():
    graph = import_graph()
    assert {name.split(".")[0] for name in graph} == set(LAYERS)
    assert "tasks.scoring" in graph and "tasks.provenance" in graph


def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_no_import_cycles_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_scoring_is_importable_without_the_benchmark_layer():
    from tasks.scoring import score_files, score_records  # noqa: F401
    graph = import_graph()
    reachable, todo = set(), ["tasks.scoring"]
    while todo:
        module = todo.pop()
        if module not in reachable:
            reachable.add(module)
            todo.extend(graph.get(module, {}))
    assert not any(module.split(".")[0] != "tasks" for module in reachable)


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}, ["a", "b", "c", "a"]),
    ({"a": {"b": 1}, "b": {}}, None),
])
def test_cycle_finder_on_known_graphs(edges, expected):
    assert find_cycle(edges) == expected


def test_upward_import_is_reported():
    graph = {"tasks.x": {"benchmark.run": 3}, "benchmark.run": {"tasks.x": 1}}
    assert upward_imports(graph) == ["tasks.x (line 3) imports benchmark.run"]


def test_the_house_rules_of_ruff_hold():
    """`ruff check` (configured in pyproject.toml: pycodestyle, pyflakes, import order,
    bugbear, pyupgrade; lines of 100) finds nothing in the repository."""
    completed = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                                "--output-format", "concise", "."], cwd=REPO,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-1000:]
