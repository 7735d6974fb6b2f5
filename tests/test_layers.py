"""The package layers read top-down: benchmark -> leaderboard -> trainers -> tasks, and each
package's rooms have floors of their own (`FLOORS`).

Every import statement of every module (at module level, inside functions and under
TYPE_CHECKING alike) is read from the source: a module may import its own package and the
packages below it, never one above, and no chain of imports between our modules may lead
back to where it started.
"""
from __future__ import annotations

import ast
import json
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


#: package -> its rooms, bottom first: a module may import its own room and the ones listed
#: before it; rooms on one floor (a tuple) may not import each other. A module belongs to the
#: longest prefix named here; the package's own __init__ is its top room.
FLOORS = {
    "tasks": (("tasks.plumbing",), ("tasks.metrics",),
              ("tasks.base", "tasks.validation", "tasks.identity", "tasks.windowed", "tasks"),
              ("tasks.units",),
              ("tasks.usb", "tasks.qapyramid"),
              ("tasks.scoring", "tasks.gold", "tasks.item_values", "tasks.item_view")),
    "trainers": (("trainers.models",), ("trainers.inference",), ("trainers.fewshot",),
                 ("trainers.finetuning",), ("trainers.encoders",), ("trainers.bridges",),
                 ("trainers",)),  # the package's own module: an old name kept one release
    "leaderboard": (("leaderboard",), ("leaderboard.evaluators",),
                    ("leaderboard.ranking", "leaderboard.card", "leaderboard.charts",
                     "leaderboard.published", "leaderboard.meta_eval"),
                    ("leaderboard.meta_eval_unjudged", "leaderboard.meta_eval_datasets"),
                    ("leaderboard.meta_eval_stats",),
                    ("leaderboard.tracks",), ("leaderboard.intake",),
                    ("leaderboard.client", "leaderboard.service")),
}
#: rooms that share a floor but must stay apart (the client runs without the web service)
APART = {"tasks.usb": "tasks.qapyramid", "leaderboard.client": "leaderboard.service"}


def room_of(module: str) -> tuple[int, str] | None:
    """(floor, room) of a module of a package with floors; None for other packages."""
    floors = FLOORS.get(module.split(".")[0])
    if floors is None:
        return None
    found = [(len(room), floor, room) for floor, rooms in enumerate(floors) for room in rooms
             if module == room or module.startswith(room + ".")]
    _, floor, room = max(found)
    return floor, room


def floor_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    """Imports inside a package that go up a floor or across rooms kept apart."""
    found = []
    for source, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            if source.split(".")[0] != target.split(".")[0] or room_of(source) is None:
                continue
            (source_floor, source_room), (target_floor, target_room) = (room_of(source),
                                                                       room_of(target))
            apart = {APART.get(source_room), APART.get(target_room)}
            if target_floor > source_floor or (source_room != target_room and
                                               {source_room, target_room} & apart):
                found.append(f"{source} (line {line}) imports {target}")
    return found


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


@pytest.mark.slow
def test_the_walker_sees_every_package():
    graph = import_graph()
    assert {name.split(".")[0] for name in graph} == set(LAYERS)
    assert "tasks.scoring" in graph and "tasks.plumbing.provenance" in graph


@pytest.mark.slow
def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


@pytest.mark.slow
def test_every_module_of_a_package_with_floors_has_a_room():
    graph = import_graph()
    assert all(room_of(module) is not None for module in graph
               if module.split(".")[0] in FLOORS)
    assert room_of("tasks.plumbing.io") == (0, "tasks.plumbing")
    assert room_of("tasks") == (2, "tasks")
    assert room_of("leaderboard.service.app") == (7, "leaderboard.service")
    assert room_of("leaderboard.meta_eval_stats") == (4, "leaderboard.meta_eval_stats")


@pytest.mark.slow
def test_no_module_imports_a_higher_floor_of_its_package():
    assert floor_violations(import_graph()) == []


@pytest.mark.parametrize("edges, expected", [
    ({"tasks.plumbing.io": {"tasks.usb.loaders": 7}},
     ["tasks.plumbing.io (line 7) imports tasks.usb.loaders"]),
    ({"tasks.metrics.qa": {"tasks.qapyramid.units": 36}},
     ["tasks.metrics.qa (line 36) imports tasks.qapyramid.units"]),
    ({"leaderboard.client": {"leaderboard.service.validate": 16}},
     ["leaderboard.client (line 16) imports leaderboard.service.validate"]),
    ({"tasks.usb.loaders": {"tasks.qapyramid.units": 3}},
     ["tasks.usb.loaders (line 3) imports tasks.qapyramid.units"]),
    ({"trainers.models.tiny": {"trainers.inference.predict": 1}},
     ["trainers.models.tiny (line 1) imports trainers.inference.predict"]),
    ({"tasks.usb.loaders": {"tasks.plumbing.io": 3, "tasks.metrics.rouge": 4},
      "leaderboard.service.app": {"leaderboard.intake.validate": 2}}, []),
])
def test_floor_violations_are_reported(edges, expected):
    assert floor_violations(edges) == expected


#: libraries too heavy to load before they are used
HEAVY = ("torch", "transformers", "peft", "datasets", "matplotlib")
#: own-module imports kept inside functions, each for a reason (module: the imported modules)
LAZY_OWN_IMPORTS = {
    # a track's module loads when the track is first made: summaries and evaluators tracks
    # bring ROUGE and NLTK, which a usb board and a client never need
    "leaderboard.tracks": {"leaderboard.tracks.usb", "leaderboard.tracks.summaries",
                           "leaderboard.tracks.evaluators"},
}


def own_imports_inside_functions() -> list[str]:
    """Imports of our own modules that sit inside a function, outside `LAZY_OWN_IMPORTS`."""
    found = []
    for name, path in package_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and not node.level:
                    targets = [node.module or ""]
                elif isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                else:
                    continue
                for target in targets:
                    if target.split(".")[0] in LAYERS and \
                            target not in LAZY_OWN_IMPORTS.get(name, ()):
                        found.append(f"{name} (line {node.lineno}) imports {target}")
    return sorted(set(found))


@pytest.mark.slow
def test_our_own_modules_are_imported_at_module_top():
    assert own_imports_inside_functions() == []


#: what a participant's leaderboard commands do without: the web stack, the database library
#: and NLTK (which the scoring tracks load)
WEB = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "nltk", *HEAVY)


def _probe_output(code: str, *args: str) -> list[str]:
    """The stdout lines of `code` run by this interpreter in the repository (WEB defined);
    the run must succeed."""
    completed = subprocess.run([sys.executable, "-c", f"WEB = {WEB!r}\n{code}", *args],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout.strip().splitlines()


#: runs `--help` of every command and subcommand in one process (the parsers' tree walked,
#: each path once): [words, exit status, whether it printed a usage line], then the heavy
#: libraries imported by then
EVERY_HELP = """
import argparse, contextlib, io, json, sys
import benchmark.cli as cli

def paths(parser, prefix=()):
    found, seen = [prefix], set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    found += paths(child, (*prefix, name))
    return found

for words in paths(cli.build_parser()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = cli.main([*words, "--help"])
        except SystemExit as exit:
            code = exit.code
        except Exception as error:
            code = repr(error)[:300]
    print(json.dumps([" ".join(words), code, out.getvalue().startswith("usage:")]))
print(json.dumps(sorted(name for name in ("torch", "transformers", "datasets")
                        if name in sys.modules)))
"""


@pytest.mark.slow
def test_every_command_and_subcommand_prints_its_help_without_heavy_libraries():
    """`sumbench units --help` crashed on a bare `%` in a help string (argparse formats help
    with %): every command's and subcommand's `--help` exits 0 with a usage line, and none
    imports torch, transformers or datasets."""
    lines = [json.loads(line) for line in _probe_output(EVERY_HELP)]
    helps, heavy = lines[:-1], lines[-1]
    failed = [words for words, code, usage in helps if code not in (0, None) or not usage]
    assert len(helps) > 40 and not failed, failed
    assert {"units", "units ngrams", "questeval", "leaderboard init"} <= {w for w, _, _ in helps}
    assert not {"torch", "transformers", "datasets"} & set(heavy), heavy


@pytest.mark.parametrize("code", [
    "import benchmark.cli",
    "import benchmark.cli as cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass",
    "import benchmark.cli as cli\ntry:\n    cli.main(['tasks', '--help'])\n"
    "except SystemExit:\n    pass",
])
@pytest.mark.slow
def test_the_command_line_starts_without_heavy_libraries(code):
    """`sumbench --help` (and a command's --help) import no torch, transformers, peft,
    datasets or matplotlib: those load only where a model, a dataset or a chart is made."""
    probe = f"{code}\nimport sys\nprint(sorted(set({HEAVY!r}) & set(sys.modules)))"
    assert _probe_output(probe)[-1] == "[]"


@pytest.mark.slow
def test_the_leaderboard_server_starts_without_nltk_or_models():
    """The app a server (and each of its workers) imports loads no NLTK (1.5 s, through
    rouge-score) and no model library: ROUGE loads when a ROUGE scorer is made."""
    probe = ("import leaderboard.service.app\nimport sys\n"
             f"print(sorted(set({(*HEAVY, 'nltk', 'rouge_score')!r}) & set(sys.modules)))")
    assert _probe_output(probe)[-1] == "[]"


LEADERBOARD_HELP_PROBE = """
import sys
import benchmark.cli as cli
from benchmark.commands.leaderboard import SUBCOMMANDS
for words in [["leaderboard", "--help"]] + [["leaderboard", name, "--help"]
                                            for name in SUBCOMMANDS]:
    try:
        cli.main(words)
    except SystemExit:
        pass
print("loaded:", sorted(set(WEB) & set(sys.modules)))
"""

#: `submit` and `status` against a server in the probe's own process, which notes what is
#: loaded when the first request arrives
LEADERBOARD_CLIENT_PROBE = """
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
seen = []
class Answer(BaseHTTPRequestHandler):
    def _reply(self):
        seen.append(sorted(set(WEB) & set(sys.modules)))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"id": 1, "status": "queued"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _reply
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"
open(sys.argv[1], "w").write('{"id": "a", "prediction": 1}\\n')
import benchmark.cli as cli
submitted = cli.main(["leaderboard", "submit", sys.argv[1], "--server", url, "--token", "t",
                      "--name", "probe"])
shown = cli.main(["leaderboard", "status", "1", "--server", url])
server.shutdown()
print("codes:", submitted, shown)
print("loaded:", seen)
"""


@pytest.mark.slow
def test_every_leaderboard_help_starts_without_the_web_stack():
    """`sumbench leaderboard --help` and each subcommand's --help (serve's and init's too)
    import no web framework, database library or NLTK: the group's table names the module
    that runs a subcommand, imported only when it runs."""
    assert _probe_output(LEADERBOARD_HELP_PROBE)[-1] == "loaded: []"


@pytest.mark.slow
def test_submit_and_status_reach_the_server_without_the_web_stack(tmp_path):
    lines = _probe_output(LEADERBOARD_CLIENT_PROBE, str(tmp_path / "p.jsonl"))
    assert lines[-2:] == ["codes: 0 0", "loaded: [[], []]"]


def test_the_leaderboard_table_names_each_subcommands_handler():
    """Every subcommand's handler resolves to a function of the module the table names, and
    the hosting ones (which open the database) are not in the client's module."""
    import importlib

    from benchmark.commands.leaderboard import CLIENT, SUBCOMMANDS

    for name, (_, module, function, _) in SUBCOMMANDS.items():
        assert callable(getattr(importlib.import_module(module), function)), name
    assert sorted(name for name, row in SUBCOMMANDS.items() if row[1] == CLIENT) == [
        "inputs", "status", "submit"]


@pytest.mark.slow
def test_no_import_cycles_between_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.slow
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


@pytest.mark.parametrize("old, new, names", [
    ("tasks.errors", "tasks.plumbing.errors", ("DataError", "SumbenchError", "did_you_mean")),
    ("trainers.lm_eval_bridge", "trainers.bridges.lm_eval_harness",
     ("aggregate", "doc_to_target", "doc_to_text", "process_results")),
])
def test_an_old_module_name_works_one_more_release_and_says_so(old, new, names):
    """Plug-ins written against `tasks.errors` and lm-eval folders exported with
    `trainers.lm_eval_bridge` in their utils.py still import, with a DeprecationWarning."""
    probe = (f"import warnings\nwarnings.simplefilter('always')\n"
             f"with warnings.catch_warnings(record=True) as caught:\n"
             f"    import {old} as old, {new} as new\n"
             f"assert all(getattr(old, name) is getattr(new, name) for name in {names!r})\n"
             f"print([str(item.message) for item in caught if "
             f"item.category is DeprecationWarning])")
    completed = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert f"{old} is renamed {new}" in completed.stdout
