"""docs/meta-evaluation.md is what bench/meta_eval_tables.py computes from the released data:
its PyrXSum section is regenerated here and found in the page byte for byte (the REALSumm
section comes from the same code; regenerating it too would double the test's time)."""
from __future__ import annotations

from pathlib import Path

from helpers import load_script

REPO = Path(__file__).resolve().parents[2]


def _tables_script():
    return load_script(REPO / "bench" / "meta_eval_tables.py", "meta_eval_tables")


def test_the_pages_numbers_are_regenerated_exactly(shared_dir):
    tables = _tables_script()
    text = (REPO / "docs" / "meta-evaluation.md").read_text(encoding="utf-8")
    pyrxsum = tables.section(shared_dir, "PyrXSum")
    assert pyrxsum in text
    assert "| STU (NLI) | system | pearson |" in pyrxsum and "Survives the tests" in pyrxsum
    assert all(f"## {title}" in text for title in tables.GROUPS)
    assert " ".join(tables.SETTINGS) in text
