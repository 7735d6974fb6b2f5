"""`sumbench view`: one offline HTML page over one or two run folders. Its data is built by the
scoring code (the run's scores are `sumbench score`'s, each item's values its share of them);
in Chromium, from file:// with every network request refused, it filters, searches, sorts by
the gap between the runs, keeps its view in the URL, and shows hostile text as text."""
from __future__ import annotations

import json
import random
import shutil

import pytest

from benchmark.viewer import build_view, write_view

from helpers import CHROMIUM, connect_chromium, screenshot_path, sumbench

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, usb_fixture_dir):
    """Run A: the fixture's sample predictions; run B: the same, each text one word shorter
    at random, each probability moved by up to 0.3, one prediction hostile text."""
    root = tmp_path_factory.mktemp("view-runs")
    rng = random.Random(0)
    for name in ("a", "b"):
        (root / name / "predictions").mkdir(parents=True)
    for path in sorted((usb_fixture_dir / "predictions").glob("*.jsonl")):
        shutil.copy(path, root / "a" / "predictions" / path.name)
        lines = []
        for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            record = json.loads(line)
            prediction = record["prediction"]
            if isinstance(prediction, str):
                words = prediction.split()
                record["prediction"] = HOSTILE if (index == 0 and "fixing" in path.name) else \
                    " ".join(words[:-1] if words and rng.random() < 0.5 else words)
            else:
                record["prediction"] = [min(1.0, max(0.0, value + rng.uniform(-0.3, 0.3)))
                                        for value in prediction]
            lines.append(json.dumps(record))
        (root / "b" / "predictions" / path.name).write_text("\n".join(lines) + "\n")
    return root


def test_the_view_holds_every_item_with_both_runs_values_and_scores(runs, capsys):
    data = build_view([runs / "a", runs / "b"])
    assert len(data["items"]) == 65 and all(None not in item["values"]
                                            for item in data["items"])
    code, _, err = sumbench(capsys, "score", *sorted((runs / "a" / "predictions").glob("*")),
                            "--out", runs / "scores-a.json")
    assert code == 0, err
    official = json.loads((runs / "scores-a.json").read_text())
    assert {task: scores["headline"] for task, scores in data["runs"][0]["scores"].items()} \
        == {task: official[task]["headline"] for task in data["tasks"]}
    fix = data["tasks"]["fixing_factuality"]
    assert (fix["primary"], fix["display"]) == ("exactmatch", "Fixing factuality (exact match)")
    shared = [item for item in data["items"] if item["task"] == "factuality_classification"]
    assert len({item["input"] for item in shared}) < len(shared)  # inputs stored once each


def test_a_folder_without_predictions_is_a_one_line_error(tmp_path, capsys):
    code, _, err = sumbench(capsys, "view", str(tmp_path), "--out", tmp_path / "v.html")
    assert code == 2 and "no predictions/<task>.jsonl files" in err
    assert not (tmp_path / "v.html").exists()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.slow
def test_the_page_works_offline_from_a_file(runs, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "view.html"
    write_view([runs / "a", runs / "b"], out)
    requests, dialogs, errors = [], [], []
    with sync_api.sync_playwright() as playwright:
        browser = connect_chromium(playwright, chromium)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.route("**/*", lambda route: route.continue_() if route.request.url
                          .startswith("file:") else (requests.append(route.request.url),
                                                     route.abort()))
            page = context.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message),
                                              dialog.dismiss()))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(out.as_uri())
            assert page.locator("#count").inner_text().startswith("65 of 65 items")
            page.select_option("#task", "factuality_classification")
            assert page.locator("#count").inner_text() == "14 of 65 items"
            page.select_option("#sort", "gap-abs")
            first = page.locator("article.item").first
            assert "gap correct" in first.inner_text() and "p(yes) A" in first.inner_text()
            page.fill("#search", "doc7_2.json")
            shown = page.locator("#count").inner_text()
            url = page.url
            assert "task=factuality_classification" in url and "sort=gap-abs" in url
            page.goto(url)
            page.reload()
            assert page.locator("#count").inner_text() == shown
            assert page.locator("#task").input_value() == "factuality_classification"
            assert page.locator("#top-gaps li").count() == 10
            page.select_option("#task", "fixing_factuality")
            page.fill("#search", "")
            page.select_option("#sort", "order")
            assert page.locator("article.item ins, article.item del").count() > 0  # diffs
            assert HOSTILE in page.locator("#items").inner_text()
            assert page.locator("#items img, #items script").count() == 0
            page.screenshot(path=str(screenshot_path(tmp_path, "view-two-runs.png")))
        finally:
            browser.close()
    assert (requests, dialogs, errors) == ([], [], [])


BAD_HASHES = ["task=nope", "task=__proto__", "task=constructor", "sort=valueOf",
              "sort=__proto__", "run=7&sort=gap-abs", "domain=toString&page=-1", "min=1e999x"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.slow
def test_a_link_with_values_the_page_does_not_have_opens_it_with_every_item(runs, tmp_path,
                                                                             chromium):
    """Unknown values in the URL's hash (inherited property names included) are ignored,
    and the note names them; a one-run view ignores the two-run sorts."""
    sync_api = pytest.importorskip("playwright.sync_api")
    two, one = tmp_path / "two.html", tmp_path / "one.html"
    write_view([runs / "a", runs / "b"], two)
    write_view([runs / "a"], one)
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = connect_chromium(playwright, chromium)
        try:
            page = browser.new_context().new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            for bad in BAD_HASHES:
                page.goto(f"{two.as_uri()}#{bad}")
                page.reload()  # the hash read at load (goto to the same file keeps the page)
                assert page.locator("#count").inner_text().startswith("65 of 65 items"), bad
                assert page.locator("article.item").count() == 50, bad
                note = page.locator("#note").inner_text()
                assert "named nothing on this page" in note, bad
                assert bad.split("&")[0] in note, (bad, note)
            page.goto(f"{one.as_uri()}#sort=gap-abs&task=factuality_classification")
            page.reload()
            assert page.locator("#count").inner_text() == "14 of 65 items"
            assert "sort=gap-abs" in page.locator("#note").inner_text()
        finally:
            browser.close()
    assert errors == []
