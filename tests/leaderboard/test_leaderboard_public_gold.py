"""A board whose test gold is public (`init --gold-visibility public`, or `sumbench data fetch`
output): it ranks on the whole test set, only what the server computed (models evaluated here
that declare their training data and no USB test data, baselines), and lists predictions
files apart as self-reported, flagging one that copies the public gold; every page, the API,
the CSV and the export say which gold an instance has; an evaluated entry's cost is measured.
A real SQLite file, the app through ASGI, the worker's real evaluation process."""
from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from leaderboard.service.worker import Worker

from helpers import sumbench
from lb_helpers import distinct_copy, evaluation_lab, gold_copy

TASKS = ("factuality_classification", "extractive_summarization", "fixing_factuality")
DECLARED = {"training_data": "USB train split (all domains)", "usb_test_seen": False}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, data_dir, usb_tokenizer):
    return evaluation_lab(tmp_path_factory.mktemp("public"), data_dir, usb_tokenizer, TASKS,
                          computed_rows=True, gold_visibility="public")


def _post(lab, user="ada", files=None, **form):
    return lab["client"].post("/api/v1/submissions", files=files, data=form,
                              headers={"Authorization": f"Bearer {lab['tokens'][user]}"})


def _board(lab) -> dict:
    Worker(lab["database"], evaluate=lab["options"]).drain()
    return lab["client"].get("/api/v1/leaderboard/usb", params={"variant": "all"}).json()


def _gold_copy(data_dir, changed: int = 0) -> bytes:
    """Predictions that copy the public gold (`changed` records per task answered wrong)."""
    lines = [json.dumps(record) for record in gold_copy(data_dir, TASKS, changed)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("changed", [0, 1])
@pytest.mark.slow
def test_a_copy_of_the_public_gold_is_self_reported_flagged_and_never_ranked(lab, data_dir,
                                                                             changed):
    sent = _post(lab, model=f"gold copy {changed}",
                 files=[("files", ("copy.jsonl", _gold_copy(data_dir, changed)))])
    assert sent.status_code == 202, sent.text
    board = _board(lab)
    listed = {entry["id"]: entry for entry in board["self_reported"]}
    assert sent.json()["id"] in listed and listed[sent.json()["id"]]["matches_public_gold"]
    assert sent.json()["id"] not in [entry["id"] for entry in board["entries"]]
    view = lab["client"].get(f"/api/v1/submissions/{sent.json()['id']}").json()
    assert view["matches_public_gold"] is True and view["gold_visibility"] == "public"
    assert view["gold_match"]["share"] == (1.0 if not changed else round(21 / 24, 4))
    page = lab["client"].get(f"/submission/{sent.json()['id']}").text
    assert "copies the public gold" in page and "self-reported predictions" in page
    # one answer in eight changed: 87.5% copies FIX (80% flags it), not the label tasks (99%)
    copied = sorted(TASKS) if not changed else ["fixing_factuality"]
    assert f"Copied tasks: {', '.join(copied)}." in page  # the page names them


def test_a_copy_rounded_and_re_punctuated_is_flagged_too(lab, data_dir):
    def blurred(record: dict) -> dict:
        prediction = record["prediction"]
        return {**record, "prediction": prediction.upper() + " ." if isinstance(prediction, str)
                else [abs(value - 0.004) for value in prediction]}

    lines = [json.dumps(blurred(record)) for record in gold_copy(data_dir, TASKS)]
    sent = _post(lab, model="blurred copy", files=[("files", (
        "copy.jsonl", ("\n".join(lines) + "\n").encode()))])
    assert sent.status_code == 202, sent.text
    listed = {entry["id"]: entry for entry in _board(lab)["self_reported"]}
    assert listed[sent.json()["id"]]["matches_public_gold"] is True


def test_the_gold_match_rule_asks_more_of_label_tasks_alone():
    from leaderboard.tracks.base import gold_match_summary

    assert gold_match_summary({"fix": (9, 10, True), "fac": (8, 10, False)})[
        "matches_public_gold"] is True                     # 85% with a text task
    assert gold_match_summary({"fac": (90, 100, False)})["matches_public_gold"] is False
    assert gold_match_summary({"fac": (99, 100, False)})["matches_public_gold"] is True
    assert gold_match_summary({})["matches_public_gold"] is False


def test_a_real_model_s_predictions_are_self_reported_but_not_flagged(lab, usb_fixture_dir):
    """The fixture's model-like FAC and FIX answers; its EXT answers order all 35 sentences
    perfectly (AUC 100), which the board cannot tell from a transform of the gold: flagged."""
    def files(names):
        return [("files", (f"{name}.jsonl",
                           (usb_fixture_dir / "predictions" / f"{name}.jsonl").read_bytes()))
                for name in names]

    honest = [name for name in TASKS if name != "extractive_summarization"]
    sent = _post(lab, model="sample predictions", files=files(honest))
    perfect = _post(lab, model="sample predictions, EXT too", files=files(TASKS))
    assert sent.status_code == perfect.status_code == 202, sent.text
    listed = {entry["id"]: entry for entry in _board(lab)["self_reported"]}
    assert listed[sent.json()["id"]]["matches_public_gold"] is False
    assert listed[perfect.json()["id"]]["gold_match"]["order_copies"] == [
        "extractive_summarization"]


@pytest.mark.slow
def test_an_evaluated_model_ranks_on_the_whole_test_set_as_sumbench_scores_it(lab, data_dir,
                                                                             capsys, tmp_path):
    answer = _post(lab, model="tiny, declared", evaluate="team/tiny",
                   card=json.dumps(DECLARED))
    assert answer.status_code == 202, answer.text
    board = _board(lab)
    ranked = {entry["id"]: entry for entry in board["entries"] if entry["rank"]}
    entry = ranked[answer.json()["id"]]
    assert {e["kind"] for e in ranked.values()} == {"evaluation", "baseline"}
    run = tmp_path / "run"
    code, _, err = sumbench(capsys, "predict", "--model", lab["models"] / "team" / "tiny",
                            "--tasks", *TASKS, "--data", data_dir, "--variant", "all",
                            "--split", "test", "--out", run, "--device", "cpu")
    assert code == 0, err
    code, _, err = sumbench(capsys, "score", *sorted((run / "predictions").glob("*.jsonl")),
                            "--out", tmp_path / "scores.json")
    assert code == 0, err
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert entry["scores"] == {name: scores[name]["headline"] for name in TASKS}
    assert board["public_items"] == {name: scores[name]["n_records"] for name in TASKS}
    cost = entry["cost"]
    assert cost["seconds"] > 0 and cost["generated_tokens"] > 0 and cost["peak_rss_bytes"] > 0
    assert cost["device"].startswith("cpu") and cost["peak_gpu_bytes"] is None
    view = lab["client"].get(f"/api/v1/submissions/{entry['id']}").json()
    assert view["cost"] == cost and not view["laddered"]
    png = lab["client"].get("/cost-chart/usb.png", params={"variant": "all"})
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")


@pytest.mark.parametrize("card, reason", [
    ({}, "declares no training data"),
    ({"training_data": "USB all splits", "usb_test_seen": True}, "declares USB test data"),
])
@pytest.mark.slow
def test_an_evaluated_model_without_a_clean_declaration_is_listed_not_ranked(lab, card,
                                                                            reason):
    source = distinct_copy(lab["models"], f"undeclared-{len(card)}")
    answer = _post(lab, model=f"tiny {len(card)}", evaluate=source, card=json.dumps(card))
    assert answer.status_code == 202, answer.text
    board = _board(lab)
    listed = {entry["id"]: entry for entry in board["not_ranked"]}
    assert listed[answer.json()["id"]]["not_ranked"].startswith(reason)
    assert answer.json()["id"] not in [entry["id"] for entry in board["entries"]]


@pytest.mark.slow  # it reads what the module's slow tests left
def test_every_output_states_the_gold_visibility(lab, tmp_path):
    from leaderboard.service.export import export_site

    rows = list(csv.DictReader(io.StringIO(lab["client"].get(
        "/api/v1/leaderboard/usb.csv", params={"variant": "all"}).text)))
    assert rows and {row["gold_visibility"] for row in rows} == {"public"}
    assert {row["list"] for row in rows} == {"ranked", "not ranked", "self-reported"}
    assert all(row["cost_seconds"] for row in rows if row["source"] == "evaluated here")
    for url in ("/", "/track/usb?variant=all"):
        page = lab["client"].get(url).text
        assert "test gold: public" in page and "never leave the server" not in page
    export_site(lab["database"], tmp_path / "site")
    document = json.loads((tmp_path / "site" / "leaderboard-usb-all.json").read_text())
    assert document["gold_visibility"] == "public" and document["self_reported"]
    pages = [path.read_text() for path in (tmp_path / "site").glob("*.html")]
    assert pages and all("test gold: public" in page for page in pages)


def test_only_entries_that_declare_clean_training_data_rank():
    from leaderboard.service.boards import SELF_REPORTED, not_ranked_reason

    cases = [({"kind": "submission", "card": DECLARED}, SELF_REPORTED),
             ({"kind": "baseline", "card": {}}, None),
             ({"kind": "evaluation", "card": DECLARED}, None),
             ({"kind": "evaluation", "card": {"training_data": "x"}}, "declares no training"),
             ({"kind": "evaluation", "card": {"usb_test_seen": False}}, "declares no training"),
             ({"kind": "evaluation", "card": {**DECLARED, "usb_test_seen": True}},
              "declares USB test data")]
    for entry, reason in cases:
        found = not_ranked_reason(entry)
        assert (found is None and reason is None) or found.startswith(reason), (entry, found)


def test_the_pareto_front_keeps_the_entries_nothing_beats():
    from leaderboard.charts import pareto_front

    points = [{"score": 50, "seconds": 10}, {"score": 60, "seconds": 100},
              {"score": 40, "seconds": 50}, {"score": 60, "seconds": 200},
              {"score": 70, "seconds": 1000}]
    assert pareto_front(points) == [0, 1, 4]


@pytest.mark.parametrize("argv, message", [
    (["--gold", "{gold}"], "--gold-visibility is required with --gold"),
    (["--gold", "{release}", "--gold-visibility", "private"],
     "is the public USB release"),
    (["--demo", "--gold-visibility", "public"], "--demo is private"),
    (["--gold", "{gold}", "--gold-visibility", "public", "--private-fraction", "0.3"],
     "cannot be 0.3 on a public-gold instance"),
])
@pytest.mark.slow
def test_init_refuses_what_the_gold_s_visibility_rules_out(tmp_path, data_dir, capsys, argv,
                                                          message):
    release = tmp_path / "cache" / "usb" / "main"
    shutil.copytree(data_dir, release / "extracted" / "data")
    (release / "archive_info.json").write_text(json.dumps({"repo_id": "kundank/usb"}))
    filled = [part.format(gold=data_dir, release=release / "extracted" / "data")
              for part in argv]
    code, _, err = sumbench(capsys, "leaderboard", "init", "--db", tmp_path / "lb.sqlite",
                            "--no-computed-rows", *filled)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_release_fetched_by_data_fetch_is_public_without_a_flag(tmp_path, data_dir,
                                                                    capsys):
    release = tmp_path / "cache" / "usb" / "main"
    shutil.copytree(data_dir, release / "extracted" / "data")
    (release / "archive_info.json").write_text(json.dumps({"repo_id": "kundank/usb"}))
    code, out, err = sumbench(capsys, "leaderboard", "init", "--db", tmp_path / "lb.sqlite",
                              "--gold", release / "extracted" / "data", "--no-computed-rows")
    assert code == 0, err
    report = json.loads(out)
    assert report["gold_visibility"] == "public"
    assert (report["settings"]["private_fraction"], report["settings"]["ladder_step"],
            report["settings"]["keep_linked"]) == (0.0, 0.0, True)


@pytest.mark.slow
def test_the_visibility_of_loaded_gold_never_changes(tmp_path, data_dir, capsys):
    db = tmp_path / "lb.sqlite"
    code, _, err = sumbench(capsys, "leaderboard", "init", "--db", db, "--gold", data_dir,
                            "--gold-visibility", "private", "--no-computed-rows")
    assert code == 0, err
    code, _, err = sumbench(capsys, "leaderboard", "init", "--db", db, "--gold", data_dir,
                            "--gold-visibility", "public", "--no-computed-rows")
    assert code == 2 and "this instance's gold is private" in err, err
    code, out, err = sumbench(capsys, "leaderboard", "init", "--db", db, "--no-computed-rows")
    assert code == 0 and json.loads(out)["gold_visibility"] == "private", err


@pytest.mark.slow
def test_charts_show_any_model_name_as_text(monkeypatch):
    """A "$" opens matplotlib's math markup: a bad formula in a model name failed the charts,
    and the board's rebuild with them."""
    from leaderboard import charts
    from leaderboard.charts import cost_chart, task_bar_chart

    hostile = "x$\\frac{$"
    with monkeypatch.context() as unguarded:
        unguarded.setattr(charts, "plain", lambda text: text)
        with pytest.raises(ValueError):
            cost_chart([{"label": hostile, "score": 50.0, "seconds": 3.0}], title="t")
    assert cost_chart([{"label": hostile, "score": 50.0, "seconds": 3.0}],
                      title=hostile).startswith(b"\x89PNG")
    assert task_bar_chart([{"label": hostile, "values": {"a": 1.0}}], ["a"],
                          title=hostile).startswith(b"\x89PNG")


def _page_data(html: str) -> dict:
    """The viewer data a served item page holds."""
    start = html.index('<script id="data" type="application/json">') + len(
        '<script id="data" type="application/json">')
    return json.loads(html[start:html.index("</script>", start)])


@pytest.mark.slow
def test_item_pages_show_entries_item_by_item_as_sumbench_scores_them(lab, usb_fixture_dir,
                                                                      data_dir):
    from tasks.item_view import scored_run
    from tasks.scoring import read_prediction_files

    files = [("files", (f"{name}.jsonl",
                        (usb_fixture_dir / "predictions" / f"{name}.jsonl").read_bytes()))
             for name in TASKS]
    sent = _post(lab, model="sample predictions for items", files=files)
    assert sent.status_code == 202, sent.text
    board = _board(lab)
    entry = sent.json()["id"]
    baseline = next(e["id"] for e in board["entries"] if e["kind"] == "baseline")
    public = lab["client"].get(f"/api/v1/submissions/{entry}").json()["public_scores"]
    fix = "fixing_factuality"
    answer = lab["client"].get(f"/items/{entry}", params={"task": fix, "b": baseline})
    assert answer.status_code == 200, answer.text
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert '<script src="/view-assets/view.js">' in answer.text  # no inline code
    assert lab["client"].get("/view-assets/view.js").status_code == 200
    data = _page_data(answer.text)
    assert [run["name"] for run in data["runs"]] == [
        f"#{entry} sample predictions for items", f"#{baseline} non-neural baselines"]
    assert data["runs"][0]["scores"][fix]["headline"] == public[fix]["headline"]
    values = [item["values"][0]["exactmatch"] for item in data["items"]]
    assert len(values) == public[fix]["n_records"]
    records, _, expected = scored_run(read_prediction_files(
        [usb_fixture_dir / "predictions" / f"{fix}.jsonl"]))[fix]  # as `sumbench view` has it
    assert {(item["id"], item["summ_idx"]): item["values"][0] for item in data["items"]} == {
        (str(record["id"]), record.get("summ_idx")): value
        for record, value in zip(records, expected)}
    assert sum(values) / len(values) == pytest.approx(public[fix]["exactmatch"], abs=1e-12)
    fixed = {json.loads(line)["fixed_summary"] for line in (
        data_dir / "all" / fix / "test.jsonl").read_text().splitlines()}
    assert fixed <= set(data["texts"])  # the public gold, item by item
    lab["client"].post(f"/api/v1/submissions/{entry}/hide",
                       headers={"Authorization": f"Bearer {lab['tokens']['ada']}"})
    for params in ({"task": fix}, {"task": "abstractive_summarization"}):
        assert lab["client"].get(f"/items/{entry}", params=params).status_code == 404
    assert lab["client"].get(f"/items/{baseline}",
                             params={"task": "no_such_task"}).status_code == 404


def _huge_fix_file(data_dir, size: int) -> bytes:
    """FIX predictions of `size` characters each (the gold sentence, then filler)."""
    records = gold_copy(data_dir, ("fixing_factuality",))
    return "".join(json.dumps({**record, "prediction": (record["prediction"] + " x" * size)[
        :size]}) + "\n" for record in records).encode()


@pytest.mark.slow
def test_an_item_page_shows_long_predictions_cut_and_the_download_has_them_whole(lab,
                                                                                 data_dir):
    from leaderboard.service.item_pages import MAX_SHOWN_CHARS

    sent = _post(lab, model="long predictions", files=[("files", (
        "fix.jsonl", _huge_fix_file(data_dir, 200_000)))])
    assert sent.status_code == 202, sent.text
    _board(lab)
    entry = sent.json()["id"]
    page = lab["client"].get(f"/items/{entry}", params={"task": "fixing_factuality"})
    assert page.status_code == 200, page.text
    assert len(page.content) < 20 * (MAX_SHOWN_CHARS + 1000) + 200_000  # 7 records of 200 KB
    shown = [text for text in _page_data(page.text)["texts"] if "cut here" in text]
    assert len(shown) == 7 and all(len(text) < MAX_SHOWN_CHARS + 200 for text in shown)
    assert f"/items/{entry}/predictions.jsonl holds the whole prediction" in shown[0]
    download = lab["client"].get(f"/items/{entry}/predictions.jsonl")
    assert download.status_code == 200
    assert download.headers["content-type"].startswith("application/x-ndjson")
    whole = [json.loads(line)["prediction"] for line in download.text.splitlines()]
    assert len(whole) == 7 and {len(text) for text in whole} == {200_000}


@pytest.mark.slow
def test_a_kept_item_page_is_answered_while_big_ones_are_built(lab, usb_fixture_dir,
                                                               monkeypatch):
    """Building a page takes a lock of its own entry and task: a page kept already is
    answered while others are built (one process-wide lock made it wait behind them)."""
    import threading

    from leaderboard.service import item_pages

    board = _board(lab)
    baseline = next(e["id"] for e in board["entries"] if e["kind"] == "baseline")
    fix = "fixing_factuality"
    assert lab["client"].get(f"/items/{baseline}", params={"task": fix}).status_code == 200
    building, release = threading.Event(), threading.Event()
    scored = item_pages._scored_records

    def slow(database, track, gold, board_name, key, entry_id, task):
        building.set()
        assert release.wait(60)
        return scored(database, track, gold, board_name, key, entry_id, task)

    monkeypatch.setattr(item_pages, "_scored_records", slow)
    big = [threading.Thread(target=lab["client"].get, args=(f"/items/{baseline}",),
                            kwargs={"params": {"task": name}})
           for name in ("factuality_classification", "extractive_summarization")]
    for thread in big:
        thread.start()
    try:
        assert building.wait(30)
        kept: list = []
        answer = threading.Thread(target=lambda: kept.append(lab["client"].get(
            f"/items/{baseline}", params={"task": fix})))
        answer.start()
        answer.join(30)
        assert kept and kept[0].status_code == 200 and not release.is_set()
    finally:
        release.set()
        for thread in big:
            thread.join(60)


def test_a_kept_value_is_built_once_per_key_and_a_failed_build_is_not_kept():
    import threading

    from tasks.plumbing.kept import Kept

    kept, builds, gate = Kept(2), [], threading.Event()

    def build():
        builds.append(1)
        gate.wait(5)
        return "page"

    threads = [threading.Thread(target=kept.get_or_build, args=("a", build)) for _ in range(4)]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(10)
    assert builds == [1] and kept.get("a") == "page"
    with pytest.raises(ZeroDivisionError):
        kept.get_or_build("b", lambda: 1 / 0)
    assert kept.get("b") is None and kept.building == {}
    for key in ("c", "d"):
        kept.get_or_build(key, lambda key=key: key)
    assert kept.get("a") is None and kept.get("d") == "d"  # at most two kept, newest last


@pytest.fixture(scope="module")
def mixed_board(lab, usb_fixture_dir):
    """The board with an entry of every source: a model evaluated here with declared training
    data, a predictions file (both by bob) and the baselines."""
    name = distinct_copy(lab["models"], "filters")
    evaluated = _post(lab, user="bob", model="filters: evaluated", evaluate=name,
                      card=json.dumps(DECLARED))
    path = usb_fixture_dir / "predictions" / "factuality_classification.jsonl"
    predictions = _post(lab, user="bob", model="filters: predictions",
                        files=[("files", ("fac.jsonl", path.read_bytes()))])
    assert (evaluated.status_code, predictions.status_code) == (202, 202)
    return _board(lab)


def _listed(document: dict) -> list[int]:
    return [entry["id"] for key in ("entries", "not_ranked", "self_reported")
            for entry in document[key]]


@pytest.mark.parametrize("params, keep", [
    ({"source": "computed"}, lambda e: e["kind"] in ("baseline", "reference", "builtin")),
    ({"source": "evaluated,predictions"}, lambda e: e["kind"] in ("evaluation", "submission")),
    ({"source": "none"}, lambda e: False),
    ({"q": "BASELINE"}, lambda e: "baseline" in e["model"].lower()),
    ({"q": "ada"}, lambda e: e["user"] == "ada"),
    ({"training": "declared"}, lambda e: bool((e.get("card") or {}).get("training_data"))
     and (e.get("card") or {}).get("usb_test_seen") is False),
    ({"device": "cpu"}, lambda e: ((e.get("cost") or {}).get("device") or "") == "cpu"),
])
@pytest.mark.slow
def test_the_board_api_takes_the_page_s_filters(lab, mixed_board, params, keep):
    everything = _board(lab)
    assert {entry["kind"] for key in ("entries", "not_ranked", "self_reported")
            for entry in everything[key]} >= {"evaluation", "submission", "baseline"}
    everything_by_id = {entry["id"]: entry for key in ("entries", "not_ranked", "self_reported")
                        for entry in everything[key]}
    answer = lab["client"].get("/api/v1/leaderboard/usb", params={"variant": "all", **params})
    assert answer.status_code == 200, answer.text
    assert _listed(answer.json()) == [i for i in _listed(everything) if keep(everything_by_id[i])]
    assert [e.get("rank") for e in answer.json()["entries"]] == [
        e.get("rank") for e in everything["entries"] if keep(e)]  # filtering never re-ranks


@pytest.mark.parametrize("params, message", [
    ({"source": "evaluated,rumours"}, "unknown source 'rumours'"),
    ({"training": "some"}, "unknown training filter 'some'"),
])
def test_unknown_filter_values_are_refused(lab, params, message):
    answer = lab["client"].get("/api/v1/leaderboard/usb", params={"variant": "all", **params})
    assert answer.status_code == 422 and message in answer.text
