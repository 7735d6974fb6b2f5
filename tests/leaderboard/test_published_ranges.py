"""No published number leaves its metric's range: on an instance with every track (USB,
summaries, evaluators) and the Ladder on, entries that score at the top of each range are
laddered (the Ladder rounds to steps of 100/sqrt(n) and more, which once published 102.06),
and every number of every part is read back from the API, the CSV, the submission views (as
anyone, the owner and an admin) and the static export. A real SQLite file, the app through
ASGI."""
from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient

from leaderboard.service.auth import create_token
from leaderboard.service.db import Database
from leaderboard.service.worker import Worker

from lb_helpers import SYSTEMS, gold_copy, make_database, write_pyramid_folder

USB_TASKS = ("factuality_classification", "fixing_factuality", "multisentence_compression")


@pytest.fixture(scope="module")
def instance(tmp_path_factory, data_dir):
    from leaderboard.service.app import create_app

    root = tmp_path_factory.mktemp("ranges")
    pyramid = write_pyramid_folder(root / "tinyset")
    url = make_database(root / "lb.sqlite", usb_data=data_dir, pyramid=pyramid, n_resamples=20,
                        open_instance=False, min_public_items=1, strict_lengths="false",
                        private_fraction=0, keep_linked="true")
    database = Database(url)
    return {"database": database, "client": TestClient(create_app(url)), "pyramid": pyramid,
            "data": data_dir, "root": root,
            "tokens": {user: create_token(database, user, admin=user == "root")
                       for user in ("eve", "root")}}


def _submit(instance, lines: list[dict], track: str, variant: str, model: str) -> int:
    body = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    answer = instance["client"].post(
        "/api/v1/submissions", files=[("files", ("p.jsonl", body))],
        data={"model": model, "track": track, "variant": variant},
        headers={"Authorization": f"Bearer {instance['tokens']['eve']}"})
    assert answer.status_code == 202, answer.text
    return answer.json()["id"]


def _top_entries(instance) -> list[int]:
    """Entries at the top of every range: a copy of the USB gold, summaries copying the
    references, an evaluator that agrees with the human judgments."""
    ids = (instance["pyramid"] / "ids.txt").read_text().split()
    references = (instance["pyramid"] / "references.txt").read_text().splitlines()
    submitted = [_submit(instance, gold_copy(instance["data"], USB_TASKS), "usb", "all",
                         "gold copy")]
    submitted.append(_submit(instance, [
        {"dataset": "tinyset", "id": i, "summary": text} for i, text in zip(ids, references)],
        "summaries", "tinyset", "references"))
    submitted.append(_submit(instance, [  # alpha covers the most units, gamma the fewest
        {"dataset": "tinyset", "system": system, "id": i, "score": float(3 - rank)}
        for rank, system in enumerate(SYSTEMS) for i in ids], "evaluators", "tinyset",
        "agrees with humans"))
    return submitted


def _check(value, bounds, where: str) -> None:
    if value is None:
        return
    assert bounds[0] <= value <= bounds[1], f"{where}: {value} outside {bounds}"


def _check_scores(scores: dict | None, ranges: dict, where: str) -> None:
    for part, value in (scores or {}).items():
        _check(value, ranges[part], f"{where} {part}")


def _check_entry(entry: dict, ranges: dict, where: str) -> None:
    _check_scores(entry.get("scores"), ranges, where)
    _check_scores(entry.get("private_scores"), ranges, f"{where} private")
    overall = (min(low for low, _ in ranges.values()), max(high for _, high in ranges.values()))
    _check(entry.get("aggregate"), overall, f"{where} aggregate")
    for low_high in [entry.get("aggregate_ci95") or []] + [
            value for value in (entry.get("ci95") or {}).values() if value]:
        for value in low_high:
            _check(value, overall, f"{where} interval")


def _check_view(view: dict, ranges: dict, where: str) -> None:
    _check_scores(view.get("headlines"), ranges, where)
    _check_scores(view.get("private_headlines"), ranges, f"{where} private")
    for part, answer in (view.get("ladder") or {}).items():
        _check(answer["value"], ranges[part], f"{where} ladder {part}")
    for part, result in (view.get("public_scores") or {}).items():
        _check((result or {}).get("headline"), ranges[part], f"{where} metrics {part}")
    for domain, results in (view.get("breakdown") or {}).items():
        for part, result in results.items():
            _check(result.get("headline"), ranges[part], f"{where} {domain} {part}")


def _ranges(instance, track: str, parts) -> dict:
    from leaderboard.service.settings import load_settings

    settings = load_settings(instance["database"]).track(track)
    return {part: settings.headline_range(part) for part in parts}


@pytest.mark.slow
def test_every_published_number_lies_in_its_metrics_range(instance, tmp_path):
    from leaderboard.service.boards import all_boards
    from leaderboard.service.export import export_site

    submitted = _top_entries(instance)
    Worker(instance["database"]).drain()
    client, checked = instance["client"], 0
    export_site(instance["database"], tmp_path / "site")
    for track, board in all_boards(instance["database"]):
        document = client.get(f"/api/v1/leaderboard/{track}", params={"variant": board}).json()
        ranges = _ranges(instance, track, document["parts"])
        exported = json.loads((tmp_path / "site" / f"leaderboard-{track}-{board}.json")
                              .read_text())
        assert exported == document
        if track == "evaluators":  # boot-both distributions, cluster bands (stated)
            assert "significance clusters" in document["rules"]["bands"]
            assert "Holm-corrected" in document["rules"]["bands"]
            assert all(entry["band"] for entry in document["entries"]
                       if entry.get("analysis") == "done")
        for key in ("entries", "not_ranked", "self_reported"):
            for entry in document[key]:
                _check_entry(entry, ranges, f"{track}/{board} #{entry['id']}")
                checked += 1
        rows = csv.DictReader(io.StringIO(client.get(f"/api/v1/leaderboard/{track}.csv",
                                                     params={"variant": board}).text))
        for row in rows:
            _check_scores({part: float(row[part]) for part in ranges if row[part]}, ranges,
                          f"{track}/{board} csv")
    for submission in submitted:
        for token in (None, instance["tokens"]["eve"], instance["tokens"]["root"]):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            view = client.get(f"/api/v1/submissions/{submission}", headers=headers).json()
            _check_view(view, _ranges(instance, view["track"], view["parts"]),
                        f"submission {submission}")
    assert checked >= 3
    views = [client.get(f"/api/v1/submissions/{s}").json() for s in submitted]
    assert all(view["laddered"] for view in views)
    from leaderboard.service.ladder import rounded

    past = [part for part, answer in views[0]["ladder"].items()  # where rounding went past
            if answer["value"] == 100.0 and rounded(100.0, answer["step"]) > 100.0]
    assert past, views[0]["ladder"]


def test_the_ladder_rounds_inside_the_range():
    from leaderboard.service.ladder import ladder_answers, rounded

    assert rounded(99.9, 14.43) > 100  # unbounded, as it was: 100.98
    assert rounded(99.9, 14.43, (0.0, 100.0)) == 100.0
    assert rounded(-99.9, 14.43, (-100.0, 100.0)) == -100.0
    answers = ladder_answers({"fix": 99.9}, {"fix": 48}, {}, 1.0, 10, {"fix": (0.0, 100.0)})
    assert answers["fix"] == {"value": 100.0, "improved": True, "step": 14.433757,
                              "range": [0.0, 100.0]}
