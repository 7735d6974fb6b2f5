"""Pages for looking into a board: two entries compared, one task's ranking, metric dicts and
per-domain heatmap (leaderboard.service.part_page), and, where the test gold is public,
entries item by item (leaderboard.service.item_pages) with the viewer's script and styles."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, Response

from leaderboard.service.boards import read_board
from leaderboard.service.db import Database
from leaderboard.service.entry_view import public_view
from leaderboard.service.item_pages import ASSET_PATH, item_page, predictions_download
from leaderboard.service.part_page import part_view
from leaderboard.service.submissions import NotFound
from leaderboard.service.views import compare_view, render
from tasks.item_view import ASSETS
from tasks.plumbing.errors import SumbenchError

MEDIA_TYPES = {"view.js": "text/javascript; charset=utf-8",
               "view.css": "text/css; charset=utf-8"}


def result_routes(router: APIRouter, database: Database, links) -> None:
    """Add the comparison, task and item pages and the viewer's assets to the page router;
    `links()` makes a request's Links."""

    @router.get("/compare", response_class=HTMLResponse)
    def compare_page(a: int, b: int):
        try:
            view = compare_view(database, public_view(database, a), public_view(database, b))
        except NotFound as error:
            raise HTTPException(404, str(error)) from None
        except SumbenchError as error:
            raise HTTPException(409, str(error)) from None
        return render("compare.html", links(), **view)

    @router.get("/track/{track}/task/{part}", response_class=HTMLResponse)
    def part_page(track: str, part: str, variant: str = "all"):
        stored = read_board(database, track, variant)
        if stored is None:
            raise HTTPException(404, f"no board {track}/{variant}")
        try:
            view = part_view(database, stored[0], part)
        except NotFound as error:
            raise HTTPException(404, str(error)) from None
        page_links = links()
        return render("part.html", page_links, **view,
                      item_view=(lambda entry: page_links.items(entry, part))
                      if page_links.offers_items else None)

    @router.get("/items/{submission_id}", response_class=HTMLResponse)
    def items_page(submission_id: int, task: str, b: int | None = None):
        try:
            return HTMLResponse(item_page(database, submission_id, task, b))
        except NotFound as error:
            raise HTTPException(404, str(error)) from None

    @router.get("/items/{submission_id}/predictions.jsonl")
    def predictions_file(submission_id: int):
        try:
            body = predictions_download(database, submission_id)
        except NotFound as error:
            raise HTTPException(404, str(error)) from None
        return Response(body, media_type="application/x-ndjson", headers={
            "Content-Disposition": f'attachment; filename="submission-{submission_id}.jsonl"'})

    @router.get(ASSET_PATH + "{name}")
    def view_asset(name: str):
        if name not in MEDIA_TYPES:
            raise HTTPException(404, f"no asset {name}")
        return Response((ASSETS / name).read_bytes(), media_type=MEDIA_TYPES[name])
