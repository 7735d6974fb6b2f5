"""docs/architecture.md stays true to the tree: its module inventory is what
`python .ci/architecture.py` writes now (so a module added, moved or re-documented without
regenerating fails here), and every path docs/evaluators.md names on a "Code:" line exists.

Docstrings are read with `ast` by the generator: nothing here imports the packages.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import load_script

REPO = Path(__file__).resolve().parent.parent
EVALUATORS_DOC = REPO / "docs" / "evaluators.md"


def load_generator():
    return load_script(REPO / ".ci" / "architecture.py", "ci_architecture")


generator = load_generator()


def test_the_module_inventory_matches_the_tree():
    _, block, _ = generator.split_doc(generator.DOC.read_text(encoding="utf-8"))
    expected = generator.inventory()
    assert block == expected, generator.stale_summary(block, expected)


def test_the_inventory_lists_every_package_folder_and_skips_data_and_caches():
    folders = generator.package_folders()
    assert list(folders)[:1] == ["benchmark/"] and "bench/" in folders
    assert {"leaderboard/evaluators/questeval/", "leaderboard/evaluators/units/",
            "trainers/finetuning/", "tasks/units/", "tasks/plumbing/", "tasks/metrics/"} \
        <= set(folders)
    paths = [path.relative_to(REPO).as_posix() for files in folders.values() for path in files]
    assert len(paths) == len(set(paths)) > 200
    assert not [path for path in paths if "evaluate_modules" in path or "__pycache__" in path
                or not path.endswith(".py")]
    assert all(files[0].name == "__init__.py" or not (files[0].parent / "__init__.py").exists()
               for files in folders.values())


@pytest.mark.parametrize("doc, expected", [
    (None, "(no docstring)"),
    ("One line.", "One line."),
    ("First sentence. Second one.", "First sentence."),
    ("Wrapped first\nsentence ends here. Next.", "Wrapped first sentence ends here."),
    ("Title line.\n\nMore text.", "Title line."),
    ("QAPyramid (Zhang et al. 2024): scores. Next.", "QAPyramid (Zhang et al. 2024): scores."),
    ("`a. B` inside code is no end. Next.", "`a. B` inside code is no end."),
    ("FAC: is it supported? (probability of Yes). Next.",
     "FAC: is it supported? (probability of Yes)."),
    ("Two baselines, as pure functions:\n- SSUs: ...", "Two baselines, as pure functions …"),
    ("Reading ``DATA/<variant>/x.jsonl`` and <raw> files.",
     "Reading ``DATA/<variant>/x.jsonl`` and &lt;raw> files."),
    ("`" + "x " * 80 + "`. Next.", "`" + "x " * 80 + "`."),
])
def test_the_first_sentence_of_a_docstring(doc, expected):
    assert generator.first_sentence(doc) == expected


def test_a_long_first_sentence_is_cut_at_a_word_outside_code():
    summary = generator.first_sentence("A " + "long `code span` and words " * 10 + "end.")
    assert summary.endswith(" …") and len(summary) <= generator.WIDTH + 2
    assert summary.count("`") % 2 == 0


def test_check_reports_a_stale_inventory_in_one_line_and_a_rerun_fixes_it(tmp_path, capsys):
    doc = tmp_path / "architecture.md"
    head, _, tail = generator.split_doc(generator.DOC.read_text(encoding="utf-8"))
    text = head + generator.inventory() + tail  # up to date, whatever the real doc holds
    stale = text.replace("- `tasks/scoring.py` — ", "- `tasks/scored.py` — ", 1)
    assert stale != text
    doc.write_text(stale, encoding="utf-8")
    assert generator.main(["--check"], doc=doc) == 1
    message = capsys.readouterr().out.strip()
    assert len(message.splitlines()) == 1
    assert "added 1 (tasks/scoring.py)" in message and "removed 1 (tasks/scored.py)" in message
    assert "run `python .ci/architecture.py`" in message
    assert doc.read_text(encoding="utf-8") == stale
    assert generator.main([], doc=doc) == 0
    assert generator.main(["--check"], doc=doc) == 0


def code_paths() -> list[str]:
    """The paths named in backticks on docs/evaluators.md's "Code:" paragraphs."""
    found = []
    for paragraph in re.split(r"\n\s*\n", EVALUATORS_DOC.read_text(encoding="utf-8")):
        if paragraph.startswith("Code:"):
            found += re.findall(r"`([^`\s]+/[^`\s]*)`", paragraph)
    return found


def test_every_code_path_in_the_evaluators_page_exists():
    paths = code_paths()
    assert "leaderboard/evaluators/questeval/" in paths and len(paths) >= 6
    missing = [path for path in paths if not (
        (REPO / path).is_dir() if path.endswith("/") else (REPO / path).is_file())]
    assert not missing, f"docs/evaluators.md names code that is not there: {missing}"


def test_every_method_of_the_evaluators_page_names_its_code():
    sections = re.split(r"^## ", EVALUATORS_DOC.read_text(encoding="utf-8"), flags=re.M)[1:]
    without = [section.splitlines()[0] for section in sections
               if not section.split("\n\n", 2)[1].startswith("Code:")]
    assert not without, f"add a 'Code: `folder/`' line under: {without}"
