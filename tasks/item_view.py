"""The data and page of the item viewer: one or two runs' records of the USB tasks, item by
item (`sumbench view`, benchmark/viewer.py; the leaderboard's item pages on public gold,
leaderboard/service/item_pages.py).

`view_data(runs)` takes named runs (name, task -> records with their predictions, the task's
result and each record's values): `scored_run` scores records by the code of `sumbench score`
(tasks.scoring), each record's values its share of that score (tasks.item_values); the
leaderboard takes the same values from the material it stored when it scored the entry. With
two runs, items are matched by their identity (task, id, summ_idx, and FAC's claim); an item
only one run holds shows for that one. Inputs, references and predictions are stored once
each however often they recur.

`render_view(data)` is the page (tasks/view_assets): filters by task, domain and a range of the
item's main value, a search over ids, inputs, references and predictions, sorting by either
run's value or by the gap between the runs; each item's input (collapsible), reference and
predictions, text diffed against the reference and against each other, label tasks'
probabilities beside the gold labels; for two runs, where they differ most by task, by domain
and by item. Inline (one offline file) or with its script and styles at given URLs (a server
whose Content-Security-Policy refuses inline code). Data text only ever reaches the page as
text, never as markup.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from tasks import get_task
from tasks.identity import record_key
from tasks.item_values import CORPUS_NOTES, MEAN_METRICS, item_kind, item_values, primary_value
from tasks.plumbing.errors import SumbenchError
from tasks.scoring import score_task_examples

ASSETS = Path(__file__).resolve().parent / "view_assets"
#: the page's own files, as a server may serve them
ASSET_NAMES = ("view.js", "view.css")
#: record fields shown as an item's short input (the task's own question)
SHORT_INPUTS = ("summary_sent", "claim", "topic_name", "initial_summary", "summary")
MARKERS = re.compile(r"<!--HEAD-->|<!--SCRIPT-->|<!--TITLE-->|/\*DATA\*/")
#: the page's policy when it is one file: nothing but its own inline script and styles
INLINE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


class Texts:
    """Distinct strings, each stored once; items refer to them by index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, text: str | None) -> int | None:
        if text is None:
            return None
        return self.index.setdefault(text, len(self.index))

    def table(self) -> list[str]:
        return list(self.index)


def scored_run(by_task: Mapping[str, Sequence[dict]]) -> dict[str, tuple]:
    """task -> (records, the task's result as `sumbench score` gives it, each record's item
    values): a run's records scored by the code of `sumbench score`."""
    scored = {}
    for name, records in by_task.items():
        task = get_task(name)
        result, material = score_task_examples(task, list(records), report=False)
        scored[name] = (list(records), result,
                        [item_values(item_kind(task), item) for item in material])
    return scored


def reference_of(task, kind: str, record: dict) -> Any:
    """What the item is scored against: text, the gold label, or one label per line."""
    if kind == "text":
        return record.get("output_string")
    if kind == "spans":
        return record.get("annotated_summary")
    if kind == "fac":
        return record.get("label")
    return list(task.record_line_labels(record))


def view_data(runs: Sequence[tuple[str, Mapping[str, tuple]]]) -> dict:
    """The data the page shows of one or two named runs (name, task -> (records, result,
    item values) as `scored_run` gives them): runs and their scores, tasks, the string table
    and the items."""
    if not 1 <= len(runs) <= 2:
        raise SumbenchError(f"the viewer takes one or two runs, got {len(runs)}")
    texts, items, tasks, run_scores = Texts(), {}, {}, []
    for position, (name, by_task) in enumerate(runs):
        scores = {}
        for task_name in sorted(by_task):
            task = get_task(task_name)
            kind = item_kind(task)
            tasks.setdefault(task_name, {"display": task.display_name(), "kind": kind,
                                         "primary": primary_value(task),
                                         "means": MEAN_METRICS[kind],
                                         "note": CORPUS_NOTES[kind]})
            records, result, values = by_task[task_name]
            scores[task_name] = {key: value for key, value in result.items()
                                 if isinstance(value, (int, float)) or value is None}
            for record, value in zip(records, values):
                key = record_key(task, record)
                item = items.get(key) or items.setdefault(
                    key, new_item(task, kind, record, texts, len(runs)))
                item["predictions"][position] = texts.add(_text(record.get("prediction")))
                item["values"][position] = value
        run_scores.append({"name": name, "scores": scores})
    return {"format": "sumbench-view/1", "runs": run_scores, "tasks": tasks,
            "texts": texts.table(), "items": list(items.values())}


def new_item(task, kind: str, record: dict, texts: Texts, runs: int) -> dict:
    short = [(field, record[field]) for field in SHORT_INPUTS
             if isinstance(record.get(field), str)]
    item_id = str(record.get("id", ""))
    reference = reference_of(task, kind, record)
    return {"task": task.name, "id": item_id, "summ_idx": record.get("summ_idx"),
            "domain": item_id.split("/")[0] if "/" in item_id else "",
            "input": texts.add("\n".join(map(str, record.get("input_lines") or []))),
            "short": [[field, texts.add(text)] for field, text in short],
            "reference": texts.add(reference) if isinstance(reference, str) else reference,
            "predictions": [None] * runs, "values": [None] * runs}


def _text(prediction) -> str:
    """A prediction as the page stores it: text as it is, probabilities as JSON."""
    return prediction if isinstance(prediction, str) else json.dumps(prediction)


def render_view(data: dict, asset_urls: Mapping[str, str] | None = None,
                title: str = "sumbench view") -> str:
    """The page: its styles and script inline (one offline file), or, with `asset_urls`
    (view.js and view.css -> URL), linked and under the server's own policy."""
    page = (ASSETS / "view.html").read_text(encoding="utf-8")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if asset_urls is None:
        head = (f'<meta http-equiv="Content-Security-Policy" content="{INLINE_POLICY}">\n'
                f'<style>{(ASSETS / "view.css").read_text(encoding="utf-8")}</style>')
        script = f'<script>{(ASSETS / "view.js").read_text(encoding="utf-8")}</script>'
    else:
        head = f'<link rel="stylesheet" href="{escape(asset_urls["view.css"])}">'
        script = f'<script src="{escape(asset_urls["view.js"])}"></script>'
    inserts = {"<!--HEAD-->": head, "<!--SCRIPT-->": script, "<!--TITLE-->": escape(title),
               "/*DATA*/": payload.replace("<", "\\u003c")}  # no </script> or <!-- in it
    return MARKERS.sub(lambda match: inserts[match.group(0)], page)  # one pass: inserted
    # text is never searched for markers
