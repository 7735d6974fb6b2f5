"""spaCy is loaded in one place (tasks.plumbing.spacy_loader): a pipeline by name or folder,
once per process, with one error naming what is missing."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.plumbing.spacy_loader import (
    DEFAULT_PIPELINE,
    PipelineNotInstalled,
    blank_english,
    spacy_pipeline,
)

REPO = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("benchmark", "leaderboard", "tasks", "trainers")


def test_a_pipeline_folder_loads_once_per_process(tmp_path):
    spacy = pytest.importorskip("spacy", reason="spaCy is not installed (sumbench[units])")
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "nlp")
    first = spacy_pipeline(str(tmp_path / "nlp"))
    assert first is spacy_pipeline(str(tmp_path / "nlp"))
    assert [s.text for s in first("One here. Two there.").sents] == ["One here.", "Two there."]
    assert [token.text for token in blank_english()("43-year-old")] == [
        "43", "-", "year", "-", "old"]


def test_a_missing_pipeline_is_named_with_what_else_would_do(tmp_path):
    pytest.importorskip("spacy", reason="spaCy is not installed (sumbench[units])")
    missing = str(tmp_path / "no-such-pipeline")
    with pytest.raises(PipelineNotInstalled) as caught:
        spacy_pipeline(missing, hint=", or give recorded answers (--answers FILE)")
    assert str(caught.value) == (f"spaCy pipeline {missing!r} is not installed: install it or "
                                 f"name another (--spacy-pipeline), or give recorded answers "
                                 f"(--answers FILE)")
    assert DEFAULT_PIPELINE == "en_core_web_sm"  # what the source papers' code loads


def _loads_spacy(path: Path) -> bool:
    """Whether the module calls `spacy.load` or `spacy.blank` (on the module or a variable
    named spacy, or on `spacy_module(...)`)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("load", "blank"):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "spacy" or \
                    isinstance(owner, ast.Call) and getattr(owner.func, "id", "") in (
                        "spacy_module", "_spacy"):
                return True
    return False


def test_spacy_is_loaded_in_one_module_of_the_package():
    loading = sorted(str(path.relative_to(REPO)) for package in PACKAGES
                     for path in (REPO / package).rglob("*.py") if _loads_spacy(path))
    assert loading == ["tasks/plumbing/spacy_loader.py"]
