"""What the usb track hosts of its stored gold, and what it shows participants of it.

`hosted_usb`: linked parts (leaderboard.tracks.linked) hosted on disjoint articles unless
`keep_linked`, and the private items (leaderboard.tracks.hosting); `apart_articles`: the
articles a board does not host for a part; `public_inputs`: the records a submission answers,
without the fields that hold the answer.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from leaderboard.tracks.hosting import host_boards
from leaderboard.tracks.linked import find_links
from tasks import get_task
from tasks.plumbing.errors import DataError
from tasks.usb.loaders import GOLD_FIELDS, TASK_SCHEMAS


def hosted_usb(gold, hosting) -> tuple[dict[str, dict[str, dict]], list]:
    """(board -> part -> hosted payload, links found); a part left without items on a board
    is not hosted there."""
    links = [link for board, parts in sorted(gold.items())
             for link in find_links(board, parts)]
    hosted = host_boards(gold, "templates", lambda template: str(template["id"]), links,
                         hosting)
    return ({board: {part: payload for part, payload in parts.items() if payload["templates"]}
             for board, parts in hosted.items()}, links)


def apart_articles(stored, hosted, board: str) -> dict[str, list[str]]:
    """part -> the articles of the board's stored test items it does not host (hosting is by
    article). Articles only: a FAC claim's digest there would let anyone confirm a guessed FIX
    answer or COMP reference hosted on that article."""
    apart = {}
    for part, payload in sorted(stored.get(board, {}).items()):
        kept = {str(template["id"]) for template in
                hosted.get(board, {}).get(part, {}).get("templates", ())}
        left = sorted({str(template["id"]) for template in payload["templates"]} - kept)
        if left:
            apart[part] = left
    return apart


def public_inputs(gold, board: str, item_key) -> dict[str, list[dict]]:
    """part -> the records a submission answers, as the task's dataset holds them (so `sumbench
    predict` reads them) without the fields that hold the answer (GOLD_FIELDS), sorted by item
    (`item_key(task, item)`: never in gold order, which would tell FAC's labels)."""
    parts = {}
    for name, payload in sorted(gold[board].items()):
        task = get_task(name)
        templates = sorted(payload["templates"], key=lambda item, task=task: item_key(task, item))
        if name == "evidence_extraction":  # the dataset holds one record per article
            parts[name] = evidence_inputs(templates)
            continue
        fields = [field for field in TASK_SCHEMAS[name] if field not in GOLD_FIELDS[name]]
        parts[name] = [{field: template[field] for field in fields} for template in templates]
    return parts


def evidence_inputs(templates: Sequence[Mapping]) -> list[dict]:
    """EVEXT's per-claim items as the dataset's per-article records: the claims, in their
    `summ_idx` order, as `summary_lines` (an article is hosted whole, so its claims are
    numbered 0, 1, ... as `sumbench predict` will number them again)."""
    articles: dict[str, dict] = {}
    for template in templates:
        record = articles.setdefault(template["id"], {
            "id": template["id"], "input_lines": list(template["input_lines"]), "claims": {}})
        record["claims"][int(template["summ_idx"])] = template["claim"]
    inputs = []
    for record in articles.values():
        claims = record["claims"]
        if sorted(claims) != list(range(len(claims))):
            raise DataError(f"the hosted claims of {record['id']!r} are not numbered 0.."
                            f"{len(claims) - 1}: the article is not hosted whole")
        inputs.append({"id": record["id"], "input_lines": record["input_lines"],
                       "summary_lines": [claims[index] for index in range(len(claims))]})
    return inputs
