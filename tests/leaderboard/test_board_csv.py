"""The board's CSV (`/api/v1/leaderboard/{track}.csv` and `leaderboard export`): one record
per entry whatever its text holds, and no cell a spreadsheet would evaluate."""
from __future__ import annotations

import csv
import io

import pytest

from leaderboard.service.documents import FORMULA_STARTS, board_csv, csv_text

#: text a participant might have stored before cards were checked for it
HOSTILE = ["USB train split\r=cmd|' /C calc'!A0",
           'x"\r\n99,forged,row,ranked\r\n=2+3',
           "\t=1+1", " @SUM(A1)", "\x01-2+3", "two lines\n+cmd|' /C calc'!A0",
           "\u2028=HYPERLINK(\"http://evil\")", "\uff1d1+1", "\r\n-1", "\ufeff=1",
           "\u200b\u200e =2", "\u202e\u2066+3", "plain text"]
#: invisible format characters a spreadsheet may skip before it reads a formula
INVISIBLE = ("\ufeff\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
             "\u2060\u2066\u2067\u2068\u2069")


def _entry(number: int, training_data: str, model: str) -> dict:
    return {"id": number, "model": model, "badge": "evaluated here", "rank": number,
            "band": 1, "aggregate": -0.25 * number, "aggregate_ci95": [-1.0, 1.0],
            "headlines": {"fac": 0.5}, "card": {"training_data": training_data,
                                                "usb_test_seen": number % 2 == 0},
            "gold_match": {"matches_public_gold": number == 1}, "cost": {"seconds": 1.5}}


def _snapshot() -> dict:
    models = ["=WEBSERVICE(\"http://evil\")", "-model", "ok"]
    return {"parts": ["fac"], "gold_visibility": "public",
            "ranked": [_entry(n + 1, text, models[n % len(models)])
                       for n, text in enumerate(HOSTILE)]}


def _evaluated(cell: str) -> bool:
    """Whether a spreadsheet would evaluate a line of the cell: a formula start after white
    space and control characters (a number, such as -0.25, is a value)."""
    try:
        float(cell)
        return False
    except ValueError:
        pass
    return any(line.lstrip(" \t\r\x00\x01\u2028" + INVISIBLE)[:1] in FORMULA_STARTS
               for line in cell.split("\n"))


def test_every_entry_is_one_record_and_one_line_and_no_cell_is_a_formula():
    text = board_csv(_snapshot())
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 1 + len(HOSTILE)
    assert [row[0] for row in rows[1:]] == [str(n + 1) for n in range(len(HOSTILE))]
    lines = text.split("\r\n")  # RFC 4180's line end: exactly one per record
    assert lines[-1] == "" and len(lines) == 2 + len(HOSTILE)
    assert [line.split(",", 1)[0] for line in lines[1:-1]] == [row[0] for row in rows[1:]]
    assert "\r" not in text.replace("\r\n", "")
    cells = [cell for row in rows[1:] for cell in row]
    assert not [cell for cell in cells if _evaluated(cell)]
    header = rows[0]
    training = [row[header.index("training_data")] for row in rows[1:]]
    assert training[0] == "USB train split\n'=cmd|' /C calc'!A0"
    assert training[-1] == "plain text"
    assert [row[header.index("usb_test_seen")] for row in rows[1:3]] == ["false", "true"]
    assert [row[header.index("matches_public_gold")] for row in rows[1:3]] == ["true", "false"]


def test_spreadsheet_readers_see_the_same_records():
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv(io.StringIO(board_csv(_snapshot()), newline=""))
    assert list(frame["id"]) == list(range(1, len(HOSTILE) + 1))
    assert list(frame["aggregate"]) == [-0.25 * n for n in range(1, len(HOSTILE) + 1)]


@pytest.mark.parametrize("text, safe", [
    ("=1+1", "'=1+1"), ("  +1", "'  +1"), ("\t@x", "' @x"), ("a\r\n-b", "a\n'-b"),
    ("a\rb", "a\nb"), ("bell\x07", "bell "), ("\uff20x", "'\uff20x"), ("o'k", "o'k"),
    ("", ""), ("\ufeff=1", "'\ufeff=1"), ("\u200b=1", "'\u200b=1"),
    ("\u200f \u2066-1", "'\u200f \u2066-1"), ("\u00ad@x", "'\u00ad@x"), ("\ufeffok", "\ufeffok"),
    ("\u200b", "\u200b"),
])
def test_user_text_in_a_cell(text, safe):
    assert csv_text(text) == safe
