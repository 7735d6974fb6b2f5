"""The leaderboard in a real browser (Playwright driving Debian's chromium): the track page
sorts by a column, an entry opens, a hostile model name shows as text and runs nothing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from leaderboard.service.auth import authenticate, create_token
from leaderboard.service.db import Database
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import accept
from leaderboard.service.validate import Upload
from leaderboard.service.worker import Worker

from lb_helpers import make_database, minimal_lines
from servers import LeaderboardServer

CHROMIUM = Path("/usr/bin/chromium")
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


def test_sort_open_entry_and_escaped_hostile_name(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    dialogs = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(server.url + "/track/usb?variant=all")
            rows = page.locator("#ranked tbody tr")
            assert rows.count() == 2
            models = lambda: [rows.nth(i).locator("td").nth(2).inner_text()  # noqa: E731
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
        finally:
            browser.close()
    assert dialogs == []
    assert (tmp_path / "entry.png").read_bytes().startswith(b"\x89PNG")
