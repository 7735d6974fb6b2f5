"""The leaderboard in a real browser (Playwright driving Debian's chromium): the track page
sorts by a column, an entry opens, a hostile model name shows as text and runs nothing; on a
board whose test gold is public, a copy of the gold is listed apart, flagged, never ranked;
both kinds of board show their first ranked row on a laptop's first screen, the rules after
the table."""
from __future__ import annotations

import contextlib
import json
import shutil

import pytest

from leaderboard.intake.validate import Upload
from leaderboard.service.auth import authenticate, create_token
from leaderboard.service.db import Database
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import accept
from leaderboard.service.worker import Worker

from helpers import CHROMIUM, connect_chromium, screenshot_path
from lb_helpers import gold_copy, make_database, minimal_lines
from servers import LeaderboardServer

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="Debian's chromium is not installed at /usr/bin/chromium")


@pytest.fixture(scope="module")
def server(tmp_path_factory, data_dir, usb_fixture_dir):
    root = tmp_path_factory.mktemp("browser")
    shutil.copytree(data_dir / "all", root / "gold" / "all")
    db = str(root / "lb.sqlite")
    make_database(root / "lb.sqlite", usb_data=root / "gold", n_resamples=30)
    database = Database(db)
    user = authenticate(database, create_token(database, "mallory"))
    uploads = [Upload(p.name, minimal_lines(p))
               for p in sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))]
    accept(database, load_settings(database), user, track_name="usb", board="all",
           model=HOSTILE, card={"notes": "<b>bold?</b>"}, uploads=uploads)
    Worker(database).drain()
    with LeaderboardServer(db, "--no-worker") as running:
        yield running


@contextlib.contextmanager
def chromium_page(endpoint: str):
    """A page of the session's Chromium, in a context of its own, whose dialogs are recorded
    (and dismissed) in the list yielded with it; the context is closed when the block ends."""
    sync_api = pytest.importorskip("playwright.sync_api")
    dialogs = []
    with sync_api.sync_playwright() as playwright:
        browser = connect_chromium(playwright, endpoint)
        try:
            page = browser.new_context().new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            yield page, dialogs
        finally:
            browser.close()


@pytest.mark.slow
def test_sort_open_entry_and_escaped_hostile_name(server, tmp_path, chromium):
    with chromium_page(chromium) as (page, dialogs):
        page.goto(server.url + "/track/usb?variant=all")
        rows = page.locator("#ranked tbody tr")
        assert rows.count() == 2
        models = lambda: [rows.nth(i).locator("td.model").inner_text()  # noqa: E731
                          for i in range(rows.count())]
        assert models() == [HOSTILE, "non-neural baselines"]  # rank order
        page.locator("#ranked thead th", has_text="aggregate").click()  # ascending
        assert models() == ["non-neural baselines", HOSTILE]
        page.locator("#ranked thead th", has_text="aggregate").click()  # descending
        assert models() == [HOSTILE, "non-neural baselines"]
        page.locator("#ranked tbody a", has_text="<img").click()
        page.wait_for_selector("#model-name")
        assert page.locator("#model-name").inner_text() == HOSTILE
        assert page.locator("dl.card dd").inner_text() == "<b>bold?</b>"
        assert page.locator("#model-name img").count() == 0
        page.screenshot(path=str(tmp_path / "entry.png"), full_page=True)
    assert dialogs == []
    assert (tmp_path / "entry.png").read_bytes().startswith(b"\x89PNG")


@pytest.fixture(scope="module")
def public_server(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("public-browser")
    shutil.copytree(data_dir / "all", root / "gold" / "all")
    db = str(root / "lb.sqlite")
    make_database(root / "lb.sqlite", usb_data=root / "gold", n_resamples=30,
                  gold_visibility="public")
    database = Database(db)
    user = authenticate(database, create_token(database, "mallory"))
    copied = "\n".join(json.dumps(record) for record in gold_copy(
        data_dir, ("factuality_classification", "fixing_factuality")))
    accept(database, load_settings(database), user, track_name="usb", board="all",
           model=HOSTILE, card={}, uploads=[Upload("copy.jsonl", copied.encode() + b"\n")])
    Worker(database).drain()
    with LeaderboardServer(db, "--no-worker") as running:
        yield running


@pytest.mark.slow
def test_a_public_gold_board_lists_a_gold_copy_apart_and_says_so(public_server, tmp_path,
                                                                 chromium):
    with chromium_page(chromium) as (page, dialogs):
        page.goto(public_server.url + "/track/usb?variant=all")
        assert page.locator("header .visibility").inner_text() == "test gold: public"
        assert not page.locator("#board-rules .hosting").is_visible()  # collapsed
        page.locator("#board-rules summary", has_text="How this board ranks").click()
        assert "Public test gold." in page.locator("#board-rules .hosting").inner_text()
        ranked = page.locator("#ranked tbody tr td.model").all_inner_texts()
        assert ranked == ["non-neural baselines"]  # the copy is never ranked
        copied = page.locator("#self-reported tbody tr")
        assert copied.count() == 1
        assert copied.locator("td").nth(0).inner_text() == HOSTILE
        assert "copies the public gold" in copied.locator("td").nth(2).inner_text()
        assert "anyone may hold its test labels" in page.locator("footer").inner_text()
        copied.locator("a").click()
        page.wait_for_selector("#model-name")
        assert "Listed, not ranked: self-reported predictions" in page.content()
        assert "% of these records are the public gold answer" in page.content()
        page.screenshot(path=str(tmp_path / "public.png"), full_page=True)
    assert dialogs == []
    assert (tmp_path / "public.png").read_bytes().startswith(b"\x89PNG")


def _overflow(page) -> int:
    """How far the document is wider than the window (0: no horizontal scroll)."""
    return page.evaluate("document.documentElement.scrollWidth - "
                         "document.documentElement.clientWidth")


@pytest.mark.slow
def test_the_board_fits_laptops_and_phones_and_its_view_lives_in_the_url(public_server,
                                                                          tmp_path, chromium):
    import httpx

    with chromium_page(chromium) as (page, dialogs):
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(public_server.url + "/track/usb?variant=all")
        assert _overflow(page) <= 0
        header = page.locator("#ranked thead th", has_text="Factuality (AUC)")
        assert "auc x100" in header.get_attribute("title")
        rows = page.locator("table.board tbody tr")
        visible = lambda: [row.get_attribute("data-id") for row in rows.all()  # noqa: E731
                           if row.is_visible()]
        assert len(visible()) == 2  # the baseline row and the self-reported copy
        page.fill("#board-search", "baseline")
        assert len(visible()) == 1 and "q=baseline" in page.url
        page.fill("#board-search", "")
        page.uncheck("#board-controls input[name=source][value=computed]")
        assert "source=evaluated%2Cpredictions" in page.url
        only = visible()
        page.locator("#board-columns summary").click()
        page.uncheck("#board-columns input[value=band]")
        assert not page.locator("#ranked th[data-col=band]").is_visible()
        url = page.url
        page.goto(url)
        assert visible() == only and not page.locator("#ranked th[data-col=band]").is_visible()
        api = httpx.get(public_server.url + "/api/v1/leaderboard/usb?variant=all&"
                        + url.split("?", 1)[1].replace("variant=all&", "")
                        .replace("&hide=band", "")).json()
        listed = [str(entry["id"]) for key in ("entries", "not_ranked", "self_reported")
                  for entry in api[key]]
        assert listed == only
        page.screenshot(path=str(screenshot_path(tmp_path, "board-1280.png")), full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(public_server.url + "/track/usb?variant=all")
        first = page.locator("#ranked tbody tr").first
        for column in ("rank", "model", "aggregate"):
            box = first.locator(f"td[data-col={column}]").bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, column
        assert _overflow(page) <= 0
        page.evaluate("document.querySelector('#ranked').parentElement.scrollLeft = 300")
        assert first.locator("td[data-col=aggregate]").bounding_box()["x"] < 0  # scrolled
        box = first.locator("td[data-col=model]").bounding_box()  # sticky: still in view
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        page.evaluate("document.querySelector('#ranked').parentElement.scrollLeft = 0")
        page.screenshot(path=str(tmp_path / "board-390.png"))
    assert dialogs == []


@pytest.mark.slow
def test_a_task_page_ranks_and_maps_domains_and_its_entries_open_item_by_item(public_server,
                                                                              tmp_path,
                                                                              chromium):
    errors = []
    with chromium_page(chromium) as (page, dialogs):
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text)
            if message.type == "error" and "status of 404" not in message.text
            else None)  # a refused script or style too
        page.on("response", lambda response: errors.append(response.url)
            if response.status >= 400 and not response.url.endswith("/favicon.ico")
            else None)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(public_server.url + "/track/usb?variant=all")
        page.locator("#board-tasks a", has_text="Factuality (AUC)").click()
        page.wait_for_selector("#part-ranked")
        assert page.locator("h1").inner_text() == "Factuality (AUC)"
        assert _overflow(page) <= 0
        assert page.locator("#part-ranked td.model").all_inner_texts() == \
            ["non-neural baselines"]
        assert page.locator("#part-listed td.model").all_inner_texts() == [HOSTILE]
        headers = page.locator("#part-ranked thead th").all_inner_texts()
        assert {"auc", "accuracy", "f1"} <= set(headers)
        assert page.locator("#part-domains td.heat").count() >= 2
        page.screenshot(path=str(screenshot_path(tmp_path, "task-page.png")),
                        full_page=True)
        baseline = page.locator("#part-ranked tbody tr").first.get_attribute("data-id")
        copy = page.locator("#part-listed tbody tr").first.get_attribute("data-id")
        page.locator("#part-ranked a", has_text="items").click()
        page.wait_for_selector("article.item")
        assert page.locator("#count").inner_text().startswith("14 of 14 items")
        page.goto(f"{public_server.url}/items/{baseline}?task=factuality_classification"
                  f"&b={copy}#sort=gap-abs")
        page.wait_for_selector("article.item")
        assert page.locator("#top-gaps li").count() == 10
        assert "gap correct" in page.locator("article.item").first.inner_text()
        page.screenshot(path=str(screenshot_path(tmp_path, "items-served.png")))
        for bad in ("task=__proto__", "sort=valueOf"):  # ignored, and the note says so
            page.goto(f"{public_server.url}/items/{baseline}?task=factuality_classification"
                      f"&b={copy}#{bad}")
            page.wait_for_selector("article.item")
            assert page.locator("#count").inner_text().startswith("14 of 14 items")
            assert bad in page.locator("#note").inner_text()
    assert (dialogs, errors) == ([], [])


@pytest.fixture(scope="module")
def hidden_server(tmp_path_factory, data_dir, usb_fixture_dir):
    """A board on a new instance's hiding defaults (a private part, linked parts hosted apart,
    intervals withheld) less the Ladder, which withholds every score of the fixture's small
    parts and would leave nothing ranked."""
    root = tmp_path_factory.mktemp("hidden-browser")
    shutil.copytree(data_dir / "all", root / "gold" / "all")
    db = make_database(root / "lb.sqlite", usb_data=root / "gold", n_resamples=30,
                       open_instance=False, ladder_step="0")
    database = Database(db)
    user = authenticate(database, create_token(database, "nina"))
    uploads = [Upload(p.name, minimal_lines(p))
               for p in sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))]
    accept(database, load_settings(database), user, track_name="usb", board="all",
           model="fixture predictions", card={}, uploads=uploads)
    Worker(database).drain()
    with LeaderboardServer(db, "--no-worker") as running:
        yield running


def _top(page, selector: str) -> float:
    return page.locator(selector).first.bounding_box()["y"]


#: what each kind of board says once "How this board ranks" is opened: its hosting paragraph
#: and its notes (the hidden board's linked parts, each hosted apart)
RULES_OPENED = {
    "public": ("Public test gold.", []),
    "hidden": ("Hidden test items.", [
        f"hosted apart {part}" for part in ("extractive_summarization",
                                            "factuality_classification", "fixing_factuality",
                                            "unsupported_span_prediction")]),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["public", "hidden"])
def test_a_board_opens_with_its_ranking_and_keeps_its_rules_after_the_table(kind, request,
                                                                            tmp_path,
                                                                            chromium):
    running = request.getfixturevalue(f"{kind}_server")
    with chromium_page(chromium) as (page, dialogs):
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(running.url + "/track/usb?variant=all")
        first = page.locator("#ranked tbody tr").first.bounding_box()
        assert page.evaluate("window.scrollY") == 0
        assert 0 < first["y"] and first["y"] + first["height"] <= 800, first  # first screen
        controls = ("#board-search", "#board-controls fieldset", "#board-columns")
        assert max(_top(page, selector) for selector in controls) < _top(page, "#ranked")
        assert _top(page, "#ranked") < _top(page, "#board-rules") < _top(page, "img.chart")
        assert page.locator("#board-rules > summary").inner_text() == "How this board ranks"
        assert page.locator("#board-rules").get_attribute("open") is None
        assert not page.locator("#board-rules .hosting").is_visible()
        description = page.locator("main .description")  # Markdown rendered, not shown
        assert description.locator("code").all_inner_texts() == ["sumbench score"]
        assert "`" not in description.inner_text()
        page.screenshot(path=str(screenshot_path(tmp_path, f"board-first-screen-{kind}.png")))
        page.locator("#board-rules > summary").click()
        hosting = page.locator("#board-rules .hosting")
        heading, notes = RULES_OPENED[kind]
        assert hosting.is_visible() and hosting.inner_text().startswith(heading)
        assert [note.split(":")[0] for note in hosting.locator("p.note").all_inner_texts()] \
            == notes
        assert page.locator("#board-rules .rules").inner_text().startswith("Ranking rule.")
    assert dialogs == []
