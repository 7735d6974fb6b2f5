"""Lite²/³Pyramid features: weighted unit scores (as Lite²Pyramid's --weight computes them),
Lite²·⁵ mixes of SCUs and STUs, and unit files, through `sumbench pyramid`."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main
from leaderboard.evaluators.pyramid.lite_pyramid import (
    easiness_recall,
    mixed_units,
    read_unit_weights,
    scu_examples,
    weighted_pyramid_score,
)
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.qapyramid.pyramid_data import load_pyramid_dataset


def test_weighted_score_as_lite2pyramid():
    # Lite²Pyramid: sum(presence * weight) / sum(weight) per summary
    assert weighted_pyramid_score([1, 0, 1], [3, 1, 1]) == pytest.approx(4 / 5)
    assert weighted_pyramid_score([0.5, 1.0], [1, 1]) == pytest.approx(0.75)
    with pytest.raises(SumbenchError):
        weighted_pyramid_score([1.0], [0])
    assert weighted_pyramid_score([], []) == 0.0  # no units: 0, as the official scorer


def test_weights_file_errors(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text("1\t2\n3\n")
    assert read_unit_weights(path, [["a", "b"], ["c"]]) == [[1.0, 2.0], [3.0]]
    with pytest.raises(DataError, match="2 weights for 1 units") as caught:
        path.write_text("1\t2\n3\t4\n")
        read_unit_weights(path, [["a", "b"], ["c"]])
    assert caught.value.line == 2
    path.write_text("1\tnan\n3\n")
    with pytest.raises(DataError, match="finite"):
        read_unit_weights(path, [["a", "b"], ["c"]], fractional=True)
    path.write_text("1\t2\n0\n")
    with pytest.raises(DataError, match="not all 0") as caught:
        read_unit_weights(path, [["a", "b"], ["c"]])
    assert caught.value.line == 2


def test_weights_are_integers_as_the_official_scorer_reads_them(tmp_path):
    """Lite²Pyramid.py: `[[int(weight) for weight in line.strip().split('\t')] ...]`, so a
    fractional weight stops it; here it is refused unless asked for."""
    path = tmp_path / "w.txt"
    path.write_text("2\t+3\n 4\n")
    assert read_unit_weights(path, [["a", "b"], ["c"]]) == [[2.0, 3.0], [4.0]]
    path.write_text("2\t3\t\n\t4\n")     # `line.strip()` drops outer TABs, as officially
    assert read_unit_weights(path, [["a", "b"], ["c"]]) == [[2.0, 3.0], [4.0]]
    path.write_text("2\t0.5\n4\n")
    with pytest.raises(DataError, match=r"integers \(Lite²Pyramid reads weights") as caught:
        read_unit_weights(path, [["a", "b"], ["c"]])
    assert caught.value.line == 1
    assert read_unit_weights(path, [["a", "b"], ["c"]], fractional=True) == [[2.0, 0.5], [4.0]]


def test_easiness_and_mixing():
    scus = [["the cat sat on the mat"], ["rain fell in paris"]]
    stus = [["the cat sat"], ["a dog barked"]]
    assert easiness_recall(scus[0], stus[0]) > easiness_recall(scus[1], stus[1])
    keep = scu_examples(["a", "b"], scus, stus, 0.5)
    assert keep == {"b"}  # the example whose STUs match its SCUs worst keeps the SCUs
    assert mixed_units(["a", "b"], scus, stus, keep) == (("the cat sat",),
                                                         ("rain fell in paris",))
    assert scu_examples(["a", "b"], scus, stus, 0.0, chosen_ids=["a"]) == {"a"}
    with pytest.raises(SumbenchError, match="unknown example ids"):
        scu_examples(["a", "b"], scus, stus, 0.0, chosen_ids=["z"])


@pytest.mark.slow
def test_cli_weights_mixed_and_unit_files(pyramid_data_dir, capsys, tmp_path):
    folder = pyramid_data_dir / "pyrxsum"
    data = load_pyramid_dataset(folder, unit_kinds=("scus", "stus"), labels=True)
    base = ["pyramid", "--pyramid", str(folder), "--presence", "lexical", "--threshold", "0.5",
            "--systems", "t5-large"]
    assert main([*base, "--units", "scus"]) == 0
    plain = json.loads(capsys.readouterr().out)["t5-large"]
    ones = tmp_path / "ones.txt"
    ones.write_text("\n".join("\t".join("1" for _ in row) for row in data.units["scus"]) + "\n")
    assert main([*base, "--units", "scus", "--weights", str(ones)]) == 0
    assert json.loads(capsys.readouterr().out)["t5-large"] == pytest.approx(plain)
    first = tmp_path / "first.txt"  # all the weight on the first SCU of every example
    first.write_text("\n".join("\t".join("1" if j == 0 else "0" for j in range(len(row)))
                               for row in data.units["scus"]) + "\n")
    assert main([*base, "--units", "scus", "--weights", str(first)]) == 0
    weighted = json.loads(capsys.readouterr().out)["t5-large"]
    assert weighted != pytest.approx(plain)
    out = tmp_path / "mixed.json"
    assert main([*base, "--units", "mix-by-example", "--scu-share", "0.3", "--out", str(out)]) == 0
    capsys.readouterr()
    config = json.loads(out.read_text())["config"]
    assert len(config["scu_examples"]) == 30 and config["scu_share"] == 0.3
    stus_file = tmp_path / "units.txt"
    stus_file.write_text("\n".join("\t".join(row) for row in data.units["stus"]) + "\n")
    assert main([*base, "--units", "file", "--units-file", str(stus_file)]) == 0
    from_file = json.loads(capsys.readouterr().out)["t5-large"]
    assert main([*base, "--units", "stus"]) == 0
    assert from_file == json.loads(capsys.readouterr().out)["t5-large"]
    assert main([*base, "--units", "mix-by-example", "--scu-share", "1.0"]) == 0
    assert json.loads(capsys.readouterr().out)["t5-large"] == pytest.approx(plain)


@pytest.mark.slow
def test_a_units_file_with_an_example_without_units_scores_it_0(pyramid_data_dir, capsys,
                                                                  tmp_path):
    """An n-gram units file of a short reference can hold no unit; Lite²Pyramid scores that
    example's summary 0 and keeps it in the system's mean (metric/score.py, lines 96-104)."""
    folder = pyramid_data_dir / "pyrxsum"
    data = load_pyramid_dataset(folder, unit_kinds=("stus",), labels=False)
    rows = [list(row) for row in data.units["stus"]]
    base = ["pyramid", "--pyramid", str(folder), "--presence", "lexical", "--threshold", "0.5",
            "--systems", "t5-large", "--units", "file", "--units-file"]
    full, emptied = tmp_path / "full.txt", tmp_path / "emptied.txt"
    full.write_text("\n".join("\t".join(row) for row in rows) + "\n")
    emptied.write_text("\n".join("\t".join(row) if i else "" for i, row in enumerate(rows))
                       + "\n")
    assert main([*base, str(full), "--out", str(tmp_path / "full.json")]) == 0
    assert main([*base, str(emptied), "--out", str(tmp_path / "emptied.json")]) == 0
    capsys.readouterr()
    before, after = (json.loads((tmp_path / f"{name}.json").read_text())
                     for name in ("full", "emptied"))
    rows = [before["per_example"]["t5-large"], after["per_example"]["t5-large"]]
    assert rows[0][0] > 0 and rows[1][0] == 0.0 and rows[1][1:] == rows[0][1:]
    assert after["scores"]["t5-large"] == pytest.approx(sum(rows[1]) / len(rows[1]))
