"""`sumbench view RUN [RUN2] --out view.html`: one self-contained HTML file to look at one or
two runs item by item, offline (no CDN: its script and styles are inside it; it opens from
file://).

A run is a folder holding `predictions/<task>.jsonl` (what `sumbench run` and `predict`
write; windowed EXT/EVEXT files are stitched as `sumbench score` stitches them). The data and
the page are tasks.item_view's: each record scored by the code of `sumbench score`, its values
its share of that score.
"""
from __future__ import annotations

from pathlib import Path

from tasks.item_view import render_view, scored_run, view_data
from tasks.plumbing.atomic import atomic_path
from tasks.plumbing.errors import SumbenchError
from tasks.scoring import read_prediction_files


def read_run(folder: str | Path) -> dict[str, list[dict]]:
    """A run folder's prediction records by task, as `sumbench score` reads them."""
    folder = Path(folder)
    paths = sorted((folder / "predictions").glob("*.jsonl")) if folder.is_dir() else []
    if not paths:
        raise SumbenchError(f"{folder}: no predictions/<task>.jsonl files (a folder written by "
                            f"`sumbench run` or `sumbench predict`)")
    return read_prediction_files(paths)


def build_view(runs: list[str | Path]) -> dict:
    """The page's data of one or two run folders, each named by its folder."""
    if not 1 <= len(runs) <= 2:
        raise SumbenchError(f"view takes one or two run folders, got {len(runs)}")
    return view_data([(Path(folder).name or str(folder), scored_run(read_run(folder)))
                      for folder in runs])


def write_view(runs: list[str | Path], out: str | Path) -> dict:
    """Write the page to `out` (atomically); a summary of what it holds."""
    data = build_view(runs)
    with atomic_path(out) as staging:
        Path(staging).write_text(render_view(data), encoding="utf-8")
    return {"out": str(out), "runs": [run["name"] for run in data["runs"]],
            "tasks": sorted(data["tasks"]), "items": len(data["items"]),
            "bytes": Path(out).stat().st_size}
