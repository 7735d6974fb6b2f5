"""Plug-ins from installed packages: the package of docs/adding-a-task.md, built from the code
on that page, installed in a throwaway virtual environment, and run through `sumbench tasks`,
`score` and `run` with a tiny model; a package whose plug-ins are broken or clash is named
in one warning line each and skipped; presence backends and evaluators plug in too."""
from __future__ import annotations

import json
import random
import re
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "adding-a-task.md"
BLOCK = re.compile(r'```\w+ title="([^"]+)"\n(.*?)```', re.S)
#: an untrained tiny T5 never stops on its own: short outputs (validation during training
#: too), greedy test predictions; every step of the run still happens
QUICK_DECODING = ("--num-beams", "1", "--max-new-tokens", "8", "--set", "max_output_tokens=8")


def page_files(page: Path = PAGE) -> dict[str, str]:
    """The files of the page's package: each code block with a `title` is one."""
    return dict(BLOCK.findall(page.read_text(encoding="utf-8")))


def install(venv: Path, package: Path) -> None:
    """Build the package's wheel with this environment's own interpreter and setuptools, then
    install that wheel in `venv` (nothing of the base interpreter's takes part)."""
    dist = package.parent / f"{package.name}-dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(dist),
                    str(package)], check=True, capture_output=True, text=True, timeout=300)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-index", "--disable-pip-version-check", *map(str, dist.glob("*.whl"))],
                   check=True, capture_output=True, text=True, timeout=300)


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A virtual environment that sees exactly this one's packages (sumbench among them), not
    the base interpreter's, and holds the page's package on top."""
    root = tmp_path_factory.mktemp("plugins")
    venv = isolated_venv(root / "venv")
    install(venv, write_package(root / "sumbench-titles", page_files()))
    return venv


def isolated_venv(folder: Path) -> Path:
    """A venv without the base interpreter's site-packages; a .pth file adds this
    environment's own (their .pth files, sumbench's editable install among them, too)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=300)
    purelib = subprocess.run([str(folder / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = "; ".join(f"site.addsitedir({path!r})" for path in site.getsitepackages())
    (Path(purelib) / "sumbench_test_environment.pth").write_text(f"import site; {ours}\n")
    seen = subprocess.run([str(folder / "bin" / "python"), "-c", "import sys; print(sys.path)"],
                          check=True, capture_output=True, text=True).stdout
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    assert base["purelib"] not in seen, "the plug-in venv sees the base interpreter's packages"
    return folder


def sumbench_in(venv: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "benchmark", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def title_data(root: Path) -> Path:
    rng = random.Random(0)
    words = "river bridge mayor storm school team cup city council festival".split()
    for split, count in (("train", 12), ("validation", 4), ("test", 4)):
        path = root / "data" / "all" / "title_generation" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        records = []
        for index in range(count):
            a, b = rng.sample(words, 2)
            records.append({"id": f"{split}-{index}", "title": f"{a} and {b}",
                            "text": f"The {a} and the {b} were in the news. All about the {a}."})
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return root / "data"


@pytest.mark.slow
def test_the_pages_task_package_works_end_to_end(venv, tmp_path, usb_tokenizer):
    from trainers.models.tiny import build_tiny_t5

    listed = sumbench_in(venv, "tasks", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    task = next(row for row in json.loads(listed.stdout) if row["name"] == "title_generation")
    assert (task["source"], task["aliases"], task["main_metric"]) == (
        "sumbench-titles", ["title"], "token_f1")
    data = title_data(tmp_path)
    tests = [json.loads(line) for line in (data / "all" / "title_generation" / "test.jsonl")
             .read_text().splitlines()]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({
        "task": "TITLE", "id": record["id"], "title": record["title"],
        "prediction": record["title"].upper() if index % 2 else "a river"})
        + "\n" for index, record in enumerate(tests)))
    scored = sumbench_in(venv, "score", predictions, "--bootstrap", "50", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)["title_generation"]
    assert (result["exactmatch"], result["n_records"]) == (0.5, 4)
    build_tiny_t5(usb_tokenizer, save_dir=tmp_path / "tiny")
    run = sumbench_in(venv, "run", "--model", tmp_path / "tiny", "--tasks", "title_generation",
                      "--data", data, "--mode", "finetune", "--max-steps", "2",
                      "--batch-size", "4", "--device", "cpu", "--out", tmp_path / "run",
                      *QUICK_DECODING, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["scores"]["title_generation"]["n_records"] == 4
    assert (tmp_path / "run" / "predictions" / "title_generation.jsonl").is_file()


BROKEN = {
    "pyproject.toml": textwrap.dedent('''\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "sumbench-odds"
        version = "0.1.0"

        [project.entry-points."sumbench.tasks"]
        missing_module = "sumbench_no_such_module:Task"
        abstractive_summarization = "sumbench_odds:Clash"
        not_a_task = "sumbench_odds:length_ratio"

        [project.entry-points."sumbench.evaluators"]
        summary_words = "sumbench_odds:summary_words"

        [project.entry-points."sumbench.presence_backends"]
        every-word = "sumbench_odds:EveryWord"

        [tool.setuptools]
        packages = ["sumbench_odds"]
        '''),
    "sumbench_odds/__init__.py": textwrap.dedent('''\
        import re

        from leaderboard.evaluators.pyramid.presence import PresenceBackend, PresenceResult
        from tasks.usb.abstractive import AbstractiveSummarization


        class Clash(AbstractiveSummarization):
            """Takes a built-in task's name."""


        def length_ratio(summaries, references):
            return [len(s) / max(len(r), 1) for s, r in zip(summaries, references)]


        def summary_words(summaries, references):
            return [float(len(summary.split())) for summary in summaries]


        class EveryWord(PresenceBackend):
            """Present when every word of the unit is in the summary."""
            name = "every-word"
            use = "label"

            def fingerprint(self):
                return "every-word"

            def score_iter(self, pairs):
                for summary, unit, *_ in pairs:
                    words = [set(re.findall(r"\\w+", text.lower())) for text in (unit, summary)]
                    found = words[0] <= words[1]
                    yield PresenceResult(float(found), int(found))
        '''),
}


@pytest.mark.slow
def test_broken_or_clashing_plug_ins_are_one_warning_each_and_the_rest_runs(venv, tmp_path):
    from lb_helpers import write_pyramid_folder

    install(venv, write_package(tmp_path / "sumbench-odds", BROKEN))
    listed = sumbench_in(venv, "tasks", cwd=tmp_path)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    warnings = [line for line in listed.stderr.splitlines() if line.startswith("sumbench:")]
    assert len(warnings) == 3, listed.stderr
    assert any("'missing_module' of package 'sumbench-odds' (ModuleNotFoundError" in line
               for line in warnings)
    assert any("'abstractive_summarization' of package 'sumbench-odds' (DuplicateNameError"
               in line for line in warnings)
    assert any("'not_a_task'" in line and "expected a Task class" in line for line in warnings)
    assert "source: sumbench-titles" in listed.stdout
    assert "abstractive_summarization [ABS]" in listed.stdout  # the built-in one stays
    folder = write_pyramid_folder(tmp_path / "set")
    meta = sumbench_in(venv, "meta-eval", "--pyramid", folder, "--metric", "summary_words",
                       cwd=tmp_path)
    assert meta.returncode == 0, meta.stderr
    pyramid = sumbench_in(venv, "pyramid", "--pyramid", folder, "--units", "scus", "--presence",
                          "every-word", cwd=tmp_path)
    assert pyramid.returncode == 0, pyramid.stderr
    assert json.loads(pyramid.stdout) == {"alpha": 1.0, "beta": pytest.approx(2 / 3),
                                          "gamma": pytest.approx(1 / 3)}


# ---- plug-ins named by path (--plugins, SUMBENCH_PLUGINS) ------------------------------------
def sumbench(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "benchmark", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_the_pages_task_file_loads_with_plugins_and_runs_end_to_end(tmp_path, usb_tokenizer):
    """No packaging: the page's titles.py, named by --plugins (a relative path) and by
    SUMBENCH_PLUGINS, is listed, scores known values and runs fine-tune -> predict -> score."""
    from trainers.models.tiny import build_tiny_t5

    (tmp_path / "titles.py").write_text(page_files()["titles.py"], encoding="utf-8")
    listed = sumbench("tasks", "--json", "--plugins", "titles.py", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    task = next(row for row in json.loads(listed.stdout) if row["name"] == "title_generation")
    assert (task["source"], task["aliases"], task["main_metric"], task["suite"]) == (
        str(tmp_path / "titles.py"), ["title"], "token_f1", "titles")
    data = title_data(tmp_path)
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(record) + "\n" for record in [
        {"task": "TITLE", "id": "a", "title": "River and bridge", "prediction": "river AND bridge"},
        {"task": "TITLE", "id": "b", "title": "mayor and storm", "prediction": "the storm"},
        {"task": "TITLE", "id": "c", "title": "cup", "prediction": "city"}]))
    scored = sumbench("score", predictions, cwd=tmp_path,
                      env={"SUMBENCH_PLUGINS": "titles.py"})  # relative to the folder
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)["title_generation"]
    # exact: 1 of 3; token F1: 1, 2*1/(2+3) = 0.4, 0
    assert result["exactmatch"] == pytest.approx(1 / 3)
    assert result["token_f1"] == pytest.approx(1.4 / 3)
    assert result["headline"] == pytest.approx(100 * 1.4 / 3)
    build_tiny_t5(usb_tokenizer, save_dir=tmp_path / "tiny")
    run = sumbench("run", "--model", tmp_path / "tiny", "--tasks", "TITLE", "--data", data,
                   "--mode", "finetune", "--max-steps", "2", "--batch-size", "4",
                   "--device", "cpu", "--out", tmp_path / "run", "--plugins", "titles.py",
                   *QUICK_DECODING, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["scores"]["title_generation"]["n_records"] == 4
    assert results["run_config"]["plugins"] == [str(tmp_path / "titles.py")]  # --config repeats
    assert (tmp_path / "run" / "predictions" / "title_generation.jsonl").is_file()


CLASH = '''
from tasks.jsonl_task import JsonlTask


class Clash(JsonlTask):
    name, description = "abstractive_summarization", "takes a built-in's name"
    metric_names, main_metric = ("exactmatch",), "exactmatch"
    metrics = staticmethod(lambda predictions, references: {"exactmatch": 0.0})
'''


@pytest.mark.parametrize("files, source, message", [
    ({}, "missing.py", "missing.py: no such file (give a .py file, a package folder or an "
                       "importable module)"),
    ({"folder/a.py": ""}, "folder", "folder: a folder without __init__.py"),
    ({}, "sumbench_no_such_module", "sumbench_no_such_module: no such file, folder or "
                                    "importable module"),
    ({"broken.py": "raise RuntimeError('half written')\n"}, "broken.py",
     "broken.py failed to import: RuntimeError: half written"),
    ({"clash.py": CLASH}, "clash.py",
     "clash.py: task name(s) already registered or given twice: abstractive_summarization"),
    ({"nometric.py": CLASH.replace("    metrics = staticmethod", "    # ")}, "nometric.py",
     "nometric.py failed to import: TypeError: Clash names no metrics function"),
    ({"mine/email/__init__.py": ""}, "mine/email",
     "its name 'email' is a module already installed"),
])
@pytest.mark.slow
def test_a_named_plug_in_that_cannot_load_stops_the_command_naming_it(tmp_path, files, source,
                                                                       message):
    """Given on the command line (a relative path) or in SUMBENCH_PLUGINS (an absolute one),
    a plug-in that cannot load is one error line naming it; nothing runs."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    given_here = sumbench("tasks", "--plugins", source, cwd=tmp_path)
    named = str(tmp_path / source) if files else source
    given_in_environment = sumbench("tasks", cwd=tmp_path, env={"SUMBENCH_PLUGINS": named})
    for completed in (given_here, given_in_environment):
        assert completed.returncode == 2 and completed.stdout == "", completed.stderr
        lines = completed.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], completed.stderr
    if source in ("missing.py", "folder", "sumbench_no_such_module"):  # refused unimported
        assert f"--plugins {source}:" in given_here.stderr
        assert f"SUMBENCH_PLUGINS {named}:" in given_in_environment.stderr


def test_every_command_takes_plugins():
    from benchmark.cli import build_parser, leaf_parsers

    leaves = leaf_parsers(build_parser())
    assert len(leaves) >= 35
    missing = [leaf.prog for leaf in leaves
               if "--plugins" not in {flag for action in leaf._actions
                                      for flag in action.option_strings}]
    assert missing == []


def test_the_page_documents_every_hook_of_a_task():
    from tasks.base import Task

    hooks = {name for name in [*vars(Task), *Task.__annotations__]
             if not name.startswith("_")} | {"aliases"}
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Every hook"):text.index("## A task as a package")]
    undocumented = sorted(name for name in hooks if f"| `{name}" not in table)
    assert undocumented == []


def test_a_package_folder_loads_with_its_own_modules(tmp_path):
    """A folder with __init__.py is imported under its own name, so its modules import each
    other as in any package; tasks defined in them register."""
    package = tmp_path / "title_tasks"
    package.mkdir()
    (package / "titles.py").write_text(page_files()["titles.py"], encoding="utf-8")
    (package / "__init__.py").write_text("from title_tasks.titles import TitleGeneration\n")
    listed = sumbench("tasks", "--json", "--plugins", package, cwd=tmp_path.parent)
    assert listed.returncode == 0, listed.stderr
    task = next(row for row in json.loads(listed.stdout) if row["name"] == "title_generation")
    assert task["source"] == str(package)


# ---- an outside package's Evaluator: meta-eval metric and board column ------------------------
OVERLAP = {
    "pyproject.toml": textwrap.dedent('''\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "sumbench-overlap"
        version = "0.1.0"

        [project.entry-points."sumbench.evaluators"]
        source-overlap = "sumbench_overlap:SourceOverlap"

        [tool.setuptools]
        packages = ["sumbench_overlap"]
        '''),
    "sumbench_overlap/__init__.py": textwrap.dedent('''\
        from tasks.metrics.evaluators import Evaluator


        class SourceOverlap(Evaluator):
            """The share of a summary's words in its source or in any of its references."""
            reads_sources = True
            option_names = ("lowercase",)

            def __init__(self, lowercase=True):
                self.lowercase = lowercase

            @property
            def settings(self):
                return {"evaluator": "source-overlap", "lowercase": self.lowercase}

            def with_options(self, options):
                super().with_options(options)  # refuses an unknown name
                return SourceOverlap(options["lowercase"] == "true")

            def words(self, text):
                return set((text.lower() if self.lowercase else text).split())

            def score(self, summaries, references, sources):
                return [len(self.words(summary) & set().union(
                    self.words(source), *map(self.words, refs))) / len(self.words(summary))
                        for summary, refs, source in zip(summaries, references, sources)]
        '''),
}

BOARD_SCRIPT = textwrap.dedent('''\
    import json, sys
    from sqlalchemy import select
    from leaderboard.intake.validate import Upload
    from leaderboard.service.auth import authenticate, create_token
    from leaderboard.service.db import Database, Score
    from leaderboard.service.init import initialise
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    folder, url = sys.argv[1], sys.argv[2]
    initialise(url, pyramids=[folder], evaluators=[
        "overlap=evaluator:source-overlap,lowercase=false", "scus=scus:lexical"],
        settings={"n_resamples": "20"}, computed_rows=False, score=False)
    database = Database(url)
    ids = open(folder + "/ids.txt").read().split()
    lines = "".join(json.dumps({"dataset": "set", "id": i, "summary": "Document " + i})
                    + "\\n" for i in ids)
    user = authenticate(database, create_token(database, "erin"))
    entry = accept(database, load_settings(database), user, track_name="summaries",
                   board="set", model="echo", card={},
                   uploads=[Upload("summaries.jsonl", lines.encode())])
    Worker(database).drain()
    with database.session() as session:
        stored = json.loads(session.scalars(select(Score).where(
            Score.submission_id == entry["id"])).one().results)
    print(json.dumps(stored["set"]))
    ''')


@pytest.mark.slow
def test_an_outside_package_s_evaluator_is_a_metric_and_a_board_column(venv, tmp_path):
    from lb_helpers import write_pyramid_folder

    install(venv, write_package(tmp_path / "sumbench-overlap", OVERLAP))
    folder = write_pyramid_folder(tmp_path / "set", n_examples=4)
    out = tmp_path / "meta.json"
    meta = sumbench_in(venv, "meta-eval", "--pyramid", folder, "--metric", "source-overlap",
                       "--metric-option", "lowercase=false", "--out", out, cwd=tmp_path)
    assert meta.returncode == 0, meta.stderr
    written = json.loads(out.read_text())
    assert written["config"]["metric_settings"] == {"evaluator": "source-overlap",
                                                    "lowercase": False}
    bad = sumbench_in(venv, "meta-eval", "--pyramid", folder, "--metric", "source-overlap",
                      "--metric-option", "case=false", cwd=tmp_path)
    assert bad.returncode == 2 and \
        "unknown source-overlap option 'case'; did you mean 'lowercase'? (known: lowercase)" \
        in bad.stderr
    script = tmp_path / "board.py"
    script.write_text(BOARD_SCRIPT)
    board = subprocess.run([str(venv / "bin" / "python"), str(script), str(folder),
                            f"sqlite:///{tmp_path / 'lb.sqlite'}"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert board.returncode == 0, board.stderr
    result = json.loads(board.stdout.strip().splitlines()[-1])
    # "Document exNN" against "Document exNN text.": both words, case kept
    assert result["overlap"] == 1.0 and result["units"]["overlap"] == "evaluator"
    assert result["headline_evaluator"] == "overlap" and result["headline"] == 100.0
