"""The summaries track with the SCU-approximation study's unit kinds: unit files given at init
are kept in the gold beside SCUs and STUs, Pyramid evaluators score with them, and the kind
shows beside every Pyramid score on the board's page."""
from __future__ import annotations

import pytest

from leaderboard.tracks import make_track
from leaderboard.tracks.summaries import SummariesEvaluator
from tasks.plumbing.errors import DataError, SumbenchError, UnknownNameError

from helpers import sumbench
from lb_helpers import write_pyramid_folder


@pytest.fixture(scope="module")
def folder_and_units(tmp_path_factory):
    root = tmp_path_factory.mktemp("units-board")
    folder = write_pyramid_folder(root / "tinyset", n_examples=4)
    references = (folder / "references.txt").read_text().splitlines()
    sgus = root / "sgus.txt"  # each reference's sentences as its units
    sgus.write_text("".join("\t".join(part.strip() + "." for part in line.split(".")
                                      if part.strip()) + "\n" for line in references))
    return folder, sgus


def test_extra_units_join_the_gold_and_score_like_any_kind(folder_and_units, tmp_path):
    folder, sgus = folder_and_units
    track = make_track("summaries", [SummariesEvaluator("pyramid-scus-lexical", "scus"),
                                     SummariesEvaluator("pyramid-sgus-lexical", "sgus")])
    plain = track.load_gold([str(folder)])["tinyset"]["tinyset"]
    gold = track.load_gold([(str(folder), {"sgus": str(sgus)})])
    payload = gold["tinyset"]["tinyset"]
    assert len(payload["units"]["sgus"]) == 4 and "sgus" not in plain["units"]
    assert payload["sha256"] != plain["sha256"] and set(payload["unit_files"]) == {"sgus"}
    lines = [{"dataset": "tinyset", "id": i, "summary": s}
             for i, s in zip(payload["ids"], payload["summaries"]["alpha"])]
    checked = track.check([("f", n, r) for n, r in enumerate(lines, 1)],
                          track.manifest(gold, "tinyset"))
    result = track.score(checked, gold, "tinyset")["tinyset"].result
    assert result["pyramid-sgus-lexical"] == pytest.approx(1.0)  # alpha copies every unit
    assert result["units"] == {"pyramid-scus-lexical": "scus", "pyramid-sgus-lexical": "sgus"}
    short = tmp_path / "short.txt"
    short.write_text("a b\n")
    with pytest.raises(DataError, match="1 examples but the folder has 4") as caught:
        track.load_gold([(str(folder), {"sgus": str(short)})])
    assert caught.value.path == str(short)
    empty = tmp_path / "empty.txt"   # an example without units scores 0 (Lite²Pyramid's rule)
    empty.write_text("a b\n\nc d\ne f\n")
    assert track.load_gold([(str(folder), {"ngrams": str(empty)})])
    none = tmp_path / "none.txt"
    none.write_text("\n\n\n\n")
    with pytest.raises(DataError, match="no example has a unit"):
        track.load_gold([(str(folder), {"ngrams": str(none)})])
    with pytest.raises(UnknownNameError) as caught:
        track.load_gold([(str(folder), {"scus": str(sgus)})])
    assert str(caught.value) == "unknown extra unit kind 'scus' (known: smus, sgus, ssus, ngrams)"
    assert isinstance(caught.value, SumbenchError)
    with pytest.raises(SumbenchError, match="^two unit files of kind 'ssus' .* as 'ssus'"):
        track.load_gold([(str(folder), {"sentences": str(sgus), "ssus": str(sgus)})])


def test_init_takes_unit_files_and_the_page_names_each_column_s_kind(folder_and_units,
                                                                     tmp_path, capsys):
    from fastapi.testclient import TestClient

    from leaderboard.service.app import create_app

    folder, sgus = folder_and_units
    db = tmp_path / "lb.sqlite"
    code, _, err = sumbench(capsys, "leaderboard", "init", "--db", str(db), "--pyramid",
                            str(folder), "--pyramid-units", f"tinyset:sgus={sgus}",
                            "--evaluator", "pyramid-scus-lexical=scus:lexical",
                            "--evaluator", "pyramid-sgus-lexical=sgus:lexical",
                            "--set", "n_resamples=20")
    assert code == 0, err
    page = TestClient(create_app(f"sqlite:///{db}")).get(
        "/track/summaries/task/tinyset", params={"variant": "tinyset"})
    assert page.status_code == 200
    assert 'pyramid-sgus-lexical <span class="ci">(sgus)</span>' in page.text
    code, _, err = sumbench(capsys, "leaderboard", "init", "--db", str(tmp_path / "x.sqlite"),
                            "--pyramid", str(folder), "--pyramid-units", f"other:sgus={sgus}")
    assert code == 2 and "names 'other', which is none of the --pyramid folders" in err, err
