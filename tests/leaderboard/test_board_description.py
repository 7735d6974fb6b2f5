"""A track's description on the pages: a small, safe Markdown (paragraphs, code, emphasis,
http(s) links), never shown literally, and HTML its owner writes is escaped, never markup."""
from __future__ import annotations

import re
import shutil

import pytest
from fastapi.testclient import TestClient

from leaderboard.service.app import create_app
from leaderboard.service.safe_markdown import markdown_html
from leaderboard.tracks.usb import UsbTrack

from lb_helpers import make_database

#: a board owner's description that tries every way into the page's markup
HOSTILE = ("Scored by `sumbench score` on *hidden* **test** items; see [the docs]"
           "(https://example.org/docs?a=1&b=2).\n\n"
           "<script>alert(1)</script><img src=x onerror=alert(2)> `<b>code</b>` "
           "[click](javascript:alert(3)) [quote](https://x.org/\"onmouseover=\"alert(4))")
HOSTILE_HTML = (
    '<p>Scored by <code>sumbench score</code> on <em>hidden</em> <strong>test</strong> items; '
    'see <a href="https://example.org/docs?a=1&amp;b=2" rel="nofollow noopener">the docs</a>.'
    '</p>\n'
    '<p>&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; '
    '<code>&lt;b&gt;code&lt;/b&gt;</code> [click](javascript:alert(3)) '
    '[quote](https://x.org/&#34;onmouseover=&#34;alert(4))</p>')


@pytest.mark.parametrize(("text", "html"), [
    ("the code of `sumbench score`.", "<p>the code of <code>sumbench score</code>.</p>"),
    ("*a* _b_ **c** factuality_classification",
     "<p><em>a</em> <em>b</em> <strong>c</strong> factuality_classification</p>"),
    ("`*not* [marked](https://x.org)`", "<p><code>*not* [marked](https://x.org)</code></p>"),
    ("[*em* link](http://x.org/a_b)",
     '<p><a href="http://x.org/a_b" rel="nofollow noopener"><em>em</em> link</a></p>'),
    ("[data](data:text/html,<b>x</b>) [ftp](ftp://x.org)",
     "<p>[data](data:text/html,&lt;b&gt;x&lt;/b&gt;) [ftp](ftp://x.org)</p>"),
    ("one\nline\n\n  \n\ntwo", "<p>one\nline</p>\n<p>two</p>"),
    ("a & b < c 'q'", "<p>a &amp; b &lt; c &#39;q&#39;</p>"),
    ("", ""), (None, ""),
    (HOSTILE, HOSTILE_HTML),
])
def test_safe_markdown_marks_up_escaped_text_only(text, html):
    assert str(markdown_html(text)) == html


def _description(page: str) -> str:
    found = re.findall(r'<div class="description">(.*?)</div>', page, re.DOTALL)
    assert len(found) == 1, page[:2000]
    return found[0]


@pytest.mark.slow
def test_a_board_s_description_is_rendered_and_its_html_escaped(tmp_path, data_dir,
                                                                monkeypatch):
    """A description (a plug-in track's owner writes it) reaches the board and home pages as
    markup made from its escaped text: its code span, emphasis and https link are HTML, its
    own HTML and its javascript: link only text (the browser test checks the real one)."""
    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    monkeypatch.setattr(UsbTrack, "description", HOSTILE)  # the snapshot keeps it
    url = make_database(tmp_path / "lb.sqlite", usb_data=tmp_path / "gold", n_resamples=10,
                        computed_rows=False)
    client = TestClient(create_app(url))
    board = client.get("/track/usb", params={"variant": "all"}).text
    home = client.get("/").text
    for page in (board, home):
        assert _description(page) == HOSTILE_HTML
        assert "<script>" not in page and "<img src=x" not in page
        assert 'href="javascript:' not in page and "`sumbench score`" not in page
