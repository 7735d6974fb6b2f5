"""Gold that stays hidden on a new instance's defaults: linked parts hosted apart, a private
part, the Ladder for predictions files, opaque version ids, quotas per week, the probing flag,
public inputs, admins' audited reads and `reveal` (a real SQLite file, the app through ASGI)."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from leaderboard.service.auth import audit_rows, create_token
from leaderboard.service.db import Database, GoldPart, unpack
from leaderboard.service.worker import Worker
from leaderboard.tracks.hosting import Hosting, host_boards, item_group, private_groups
from leaderboard.tracks.linked import find_links
from tasks.usb.loaders import GOLD_FIELDS

from lb_helpers import make_database

FAC = "factuality_classification"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A synthetic corpus of 120 articles (6 test articles in each of 4 domains) and its task
    datasets: enough items per domain to host linked parts apart and keep half private."""
    from benchmark.synthetic import SyntheticSpec, generate_corpus
    from tasks.usb.derive import build_task_datasets

    root = tmp_path_factory.mktemp("corpus")
    spec = SyntheticSpec(seed=3, docs=120, domains=("biographies", "companies", "disasters",
                                                    "schools"))
    generate_corpus(root / "raw", spec)
    build_task_datasets(root / "raw", root / "data", progress=False)
    return root / "data"


@pytest.fixture(scope="module")
def instance(tmp_path_factory, corpus):
    """An instance on a new instance's defaults (private part, Ladder, linked parts apart)."""
    from leaderboard.service.app import create_app

    root = tmp_path_factory.mktemp("hidden")
    url = make_database(root / "lb.sqlite", usb_data=corpus, n_resamples=30,
                        open_instance=False)
    database = Database(url)
    tokens = {name: create_token(database, name, admin=name == "root")
              for name in ("mallory", "nina", "root")}
    return {"url": url, "database": database, "tokens": tokens, "root": root,
            "client": TestClient(create_app(url)), "responses": []}


def _headers(instance, user):
    return {"Authorization": f"Bearer {instance['tokens'][user]}"}


def _get(instance, url, user=None, **params):
    response = instance["client"].get(url, params=params or None,
                                      headers=_headers(instance, user) if user else None)
    instance["responses"].append(response.content)
    return response


def _submit(instance, user, lines, model, variant="all"):
    data = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    response = instance["client"].post(
        "/api/v1/submissions", headers=_headers(instance, user),
        files=[("files", ("predictions.jsonl", data))], data={"model": model,
                                                              "variant": variant})
    instance["responses"].append(response.content)
    return response


def _fac_lines(instance, probability, variant="all"):
    """FAC predictions for every FAC input of the board: `probability(record)` each."""
    inputs = _get(instance, "/api/v1/inputs/usb", variant=variant).json()["parts"][FAC]
    return [{"task": FAC, "id": r["id"], "summ_idx": r["summ_idx"],
             "summary_sent": r["summary_sent"], "prediction": [probability(r)]}
            for r in inputs]


def _scored(instance, response) -> dict:
    assert response.status_code == 202, response.text
    Worker(instance["database"]).drain()
    return _get(instance, f"/api/v1/submissions/{response.json()['id']}").json()


# ---- linked parts and the private split, on the gold itself ----------------------------------

def test_linked_parts_are_found_on_the_gold_and_hosted_apart(data_dir):
    from leaderboard.tracks.usb import UsbTrack

    gold = UsbTrack().load_gold(str(data_dir))
    links = {(link.revealer, link.victim): link for link in find_links("all", gold["all"])}
    # FIX's initial summary is the unsupported FAC claim; the pair's other claim is FIX's answer
    fix_by_fac = links[(FAC, "fixing_factuality")]
    assert fix_by_fac.revealed == fix_by_fac.victim_items  # every FIX answer, and one
    assert links[("fixing_factuality", FAC)].revealed == fix_by_fac.victim_items  # FAC per pair
    assert ("evidence_extraction", FAC) in links  # EVEXT's claims are the supported ones
    assert ("multisentence_compression", "extractive_summarization") in links  # evidence lines
    assert not any(link.revealer == "abstractive_summarization" for link in links.values())
    hosting = Hosting(keep_linked=False, private_fraction=0.0, secret="s", seed=0)
    hosted = host_boards(gold, "templates", lambda t: t["id"], list(links.values()), hosting)
    for board, parts in hosted.items():
        assert find_links(board, parts) == [], board  # nothing left to give away
        articles = {part: {t["id"] for t in payload["templates"]}
                    for part, payload in parts.items()}
        for revealer, victim in links:
            assert not articles.get(revealer, set()) & articles.get(victim, set())
    assert hosted["all"][FAC]["linked"]["hosted_apart"] is True
    kept = host_boards(gold, "templates", lambda t: t["id"], list(links.values()),
                       Hosting(True, 0.0, "s", 0))
    assert kept["all"][FAC]["templates"] == gold["all"][FAC]["templates"]
    assert kept["all"][FAC]["linked"] == {"inferable_from": sorted(
        {revealer for revealer, victim in links if victim == FAC}), "hosted_apart": False,
        "article_groups": 1}


@pytest.mark.slow
def test_the_private_split_is_keyed_stratified_and_keeps_pairs_together(corpus):
    from leaderboard.tracks.usb import UsbTrack

    gold = UsbTrack().load_gold(str(corpus))
    groups = {item_group(t) for t in gold["all"][FAC]["templates"]}
    chosen = private_groups(groups, 0.5, "secret", 0, FAC)
    by_domain = {}
    for group in groups:
        by_domain.setdefault(group.split("/")[0], []).append(group)
    for names in by_domain.values():  # floor(0.5 n) of each domain's groups
        assert sum(name in chosen for name in names) == len(names) // 2
    assert chosen == private_groups(groups, 0.5, "secret", 0, FAC)  # stable
    assert chosen != private_groups(groups, 0.5, "another secret", 0, FAC)  # keyed
    assert chosen != private_groups(groups, 0.5, "secret", 1, FAC)
    hosted, _ = UsbTrack().hosted(gold, Hosting(True, 0.5, "secret", 0))
    for board in ("all", "companies"):  # a FAC pair is private or public as a whole, and
        payload = hosted[board][FAC]     # the same on the `all` board and its domain's board
        private = {item_group(payload["templates"][i]) for i in payload["private"]}
        public = {item_group(t) for i, t in enumerate(payload["templates"])
                  if i not in payload["private"]}
        assert not private & public and private <= chosen and not public & chosen


# ---- what the service publishes ------------------------------------------------------------

@pytest.mark.slow
def test_public_scores_are_those_of_the_public_items_and_admins_see_the_whole_set(
        instance, corpus):
    from leaderboard.service.gold import gold_for
    from tasks import get_task
    from tasks.scoring import score_records

    lines = _fac_lines(instance, lambda r: 0.9 if "despite" not in r["summary_sent"] else 0.2)
    answer = _scored(instance, _submit(instance, "root", lines, "admin probe"))
    assert answer["laddered"] is False  # an admin's file is not laddered
    admin = _get(instance, f"/api/v1/submissions/{answer['id']}", user="root").json()
    payload = gold_for(instance["database"], "usb")["all"][FAC]
    predictions = {(line["id"], line["summ_idx"], line["summary_sent"]): line["prediction"]
                   for line in lines}
    records = [{**template, "prediction": predictions[(template["id"], template["summ_idx"],
                                                        template["summary_sent"])]}
               for template in payload["templates"]]
    private = set(payload["private"])
    assert 0 < len(private) < len(records)
    subsets = {"scores": records,
               "public": [r for i, r in enumerate(records) if i not in private],
               "private": [r for i, r in enumerate(records) if i in private]}
    expected = {name: score_records({FAC: subset})[FAC] for name, subset in subsets.items()}
    task = get_task(FAC)
    for key in task.metric_names:
        assert admin["scores"][FAC][key] == pytest.approx(expected["scores"][key], abs=1e-12)
        assert answer["public_scores"][FAC][key] == pytest.approx(expected["public"][key],
                                                                  abs=1e-12)
        assert admin["admin"]["private_scores"][FAC][key] == pytest.approx(
            expected["private"][key], abs=1e-12)
    assert "scores" not in answer and "private_headlines" not in answer
    reads = [row for row in audit_rows(instance["database"], 50)
             if row["action"] == "read" and row["submission_id"] == answer["id"]]
    assert reads and reads[0]["actor"] == "root"


@pytest.mark.slow
def test_the_ladder_releases_a_score_only_when_it_beats_the_best_by_the_step(instance):
    from leaderboard.service.ladder import ladder_answers, part_step

    assert part_step(1.0, 400) == 5.0 and part_step(10.0, 400) == 10.0
    answers = ladder_answers({"a": 71.9, "b": 60.0, "c": 80.0}, {"a": 400, "b": 400, "c": 4},
                             {"a": 66.0, "b": 59.0}, 1.0, 10)
    assert answers["a"] == {"value": 70.0, "improved": True, "step": 5.0}
    assert answers["b"] == {"value": 59.0, "improved": False, "step": 5.0,
                            "note": "no improvement"}
    assert answers["c"]["value"] is None and "withheld" in answers["c"]["note"]
    good = _scored(instance, _submit(
        instance, "nina", _fac_lines(instance, lambda r: 0.8 if "despite" not in
                                     r["summary_sent"] else 0.3), "nina good"))
    ladder = good["ladder"][FAC]
    assert good["laddered"] and ladder["improved"] and "public_scores" not in good
    assert good["headlines"][FAC] == ladder["value"]
    assert ladder["value"] / ladder["step"] == pytest.approx(round(ladder["value"] /
                                                                   ladder["step"]))
    assert good.get("breakdown") is None  # no domain holds 10 public FAC items
    worse = _scored(instance, _submit(instance, "nina", _fac_lines(instance, lambda r: 0.5),
                                      "nina constant"))
    assert worse["ladder"][FAC] == {**ladder, "improved": False, "note": "no improvement"}
    assert not {"scores", "public_scores", "admin", "private_headlines"} & set(worse)
    text = json.dumps({key: worse.get(key) for key in ("headlines", "ladder", "breakdown")})
    for word in ("precision", "recall", "accuracy", "auc", "n_records", "undefined", "all "):
        assert word not in text
    board = _get(instance, "/api/v1/leaderboard/usb", variant="all").json()
    entry = next(e for e in board["entries"] if e["id"] == worse["id"])
    assert entry["laddered"] and entry["ci95"] == {} and entry["band"] is None
    assert entry["ladder"][FAC] == "no improvement"
    compare = instance["client"].get(f"/compare?a={good['id']}&b={worse['id']}")
    assert compare.status_code == 409 and "laddered" in compare.text


@pytest.mark.slow
def test_hiding_a_probe_keeps_its_ladder_step_and_its_quota(instance):
    first = _scored(instance, _submit(instance, "mallory", _fac_lines(
        instance, lambda r: 0.9 if "despite" not in r["summary_sent"] else 0.1), "m1"))
    assert first["ladder"][FAC]["improved"]
    hidden = instance["client"].post(f"/api/v1/submissions/{first['id']}/hide",
                                     headers=_headers(instance, "mallory"))
    assert hidden.status_code == 200
    again = _scored(instance, _submit(instance, "mallory", _fac_lines(
        instance, lambda r: 0.8 if "despite" not in r["summary_sent"] else 0.2), "m2"))
    assert again["ladder"][FAC]["improved"] is False  # the hidden entry's release counts


@pytest.mark.slow
def test_weekly_quota_counts_hidden_and_deleted_submissions(tmp_path, corpus):
    from leaderboard.service.app import create_app

    url = make_database(tmp_path / "lb.sqlite", usb_data=corpus, n_resamples=10,
                        computed_rows=False, open_instance=False, quota_per_week=3)
    database = Database(url)
    local = {"client": TestClient(create_app(url)), "tokens": {"olga": create_token(
        database, "olga")}, "responses": [], "database": database}
    answers = [_submit(local, "olga", _fac_lines(local, lambda r, k=k: 0.1 * k), f"q{k}")
               for k in range(1, 4)]
    assert [a.status_code for a in answers] == [202, 202, 202]
    headers = _headers(local, "olga")
    local["client"].post(f"/api/v1/submissions/{answers[0].json()['id']}/hide", headers=headers)
    local["client"].delete(f"/api/v1/submissions/{answers[1].json()['id']}", headers=headers)
    over = _submit(local, "olga", _fac_lines(local, lambda r: 0.45), "q4")
    assert over.status_code == 429
    assert over.json()["errors"][0]["message"] == "quota reached: 3 submissions per 7 days"


@pytest.mark.slow
def test_probing_is_flagged_on_the_admins_user_page(instance):
    base = _fac_lines(instance, lambda r: 0.5)
    for k in range(4):  # each differs from the first in one item
        lines = [dict(line) for line in base]
        lines[k]["prediction"] = [0.99]
        assert _submit(instance, "mallory", lines, f"probe {k}").status_code == 202
    Worker(instance["database"]).drain()
    assert _get(instance, "/api/v1/admin/users", user="mallory").status_code == 403
    users = {u["user"]: u for u in _get(instance, "/api/v1/admin/users", user="root")
             .json()["users"]}
    assert users["mallory"]["probing_suspected"] and users["mallory"]["near_identical"] >= 3
    assert not users["nina"]["probing_suspected"]
    hidden = [s for s in users["mallory"]["submissions"] if s["hidden"]]
    assert hidden  # a hidden probe is still listed
    page = _get(instance, "/admin/users", user="root")
    assert page.status_code == 200 and "probing suspected" in page.text
    assert audit_rows(instance["database"], 1)[0]["detail"] == {"what": "user histories"}


def test_inputs_hold_no_gold_and_are_exactly_what_a_submission_answers(instance, corpus):
    from tasks import get_task

    manifest = _get(instance, "/api/v1/manifest/usb", variant="all").json()
    inputs = _get(instance, "/api/v1/inputs/usb", variant="all").json()
    assert set(inputs["parts"]) == set(manifest["parts"])
    for name, records in inputs["parts"].items():
        task = get_task(name)
        assert not set(GOLD_FIELDS[name]) & {key for r in records for key in r}
        assert len(task_instances(task, records)) == len(manifest["parts"][name])
    fac = inputs["parts"][FAC]
    keys = [(r["id"], r["summ_idx"], hashlib.sha256(r["summary_sent"].encode()).hexdigest())
            for r in fac]
    assert keys == sorted(keys)  # item order, never gold order (which would tell the label)
    assert _get(instance, "/api/v1/tracks").json()["tracks"]["usb"][0] == "all"


def task_instances(task, records):
    """The instances `sumbench predict` would make of input records (EVEXT: one per claim)."""
    if task.name == "evidence_extraction":
        return [(r["id"], k) for r in records for k in range(len(r["summary_lines"]))]
    return records


def test_records_of_items_the_board_does_not_host_are_left_out(instance, corpus):
    from tasks import get_task
    from tasks.gold import gold_templates
    from trainers.inference.baselines import baseline_records

    lines = []
    for name in ("fixing_factuality", FAC):
        task = get_task(name)
        templates = gold_templates(task, str(corpus), "all")
        lines += baseline_records(task, [dict(t) for t in templates])
    response = _submit(instance, "nina", lines, "the whole test set")
    assert response.status_code == 202, response.text
    answer = response.json()
    hosted = sum(len(_get(instance, "/api/v1/manifest/usb", variant="all").json()["parts"][n])
                 for n in ("fixing_factuality", FAC))
    assert answer["not_hosted"] == len(lines) - hosted > 0


def test_no_public_answer_holds_a_digest_of_the_gold(instance, corpus):
    """Gold ids are HMACs with the instance's secret: no file digest, stored or hosted part
    digest, nor a digest of any guessed label file, can be confirmed against an answer; nor
    can a guessed FIX answer or reference line be confirmed against a claim digest of the
    manifests (what a board does not host is listed by article only)."""
    from leaderboard.service.gold import hosted_gold
    from leaderboard.tracks.usb import text_digest

    boards = _get(instance, "/api/v1/tracks").json()["tracks"]["usb"]
    for url, params in (("/api/v1/leaderboard/usb", {"variant": "all"}),
                        ("/api/v1/leaderboard/usb.csv", {"variant": "all"}),
                        ("/track/usb", {"variant": "companies"}), ("/", {}),
                        *(("/api/v1/manifest/usb", {"variant": board}) for board in boards)):
        assert _get(instance, url, **params).status_code == 200
    for submission_id in range(1, 6):
        _get(instance, f"/api/v1/submissions/{submission_id}")
        _get(instance, f"/submission/{submission_id}")
    published = set()
    for body in instance["responses"]:
        published.update(re.findall(rb"[0-9a-f]{16,64}", body))
    digests = {hashlib.sha256(path.read_bytes()).hexdigest()
               for path in corpus.glob("*/*/test.jsonl")}
    with instance["database"].session() as session:
        digests.update(session.scalars(select(GoldPart.sha256)))
    hosted = hosted_gold(instance["database"], "usb")
    digests.update(payload["sha256"] for parts in hosted.gold.values()
                   for payload in parts.values())
    answers = {template.get("fixed_summary") for parts in hosted.gold.values()
               for payload in parts.values() for template in payload["templates"]}
    answers |= {line for parts in hosted.gold.values() for payload in parts.values()
                for template in payload["templates"] for line in template.get("output_lines", [])}
    answers -= {None, ""}
    assert len(answers) > 10
    digests.update(text_digest(answer) for answer in answers)
    found = {digest for digest in digests
             if any(digest.encode()[:16] in text for text in published)}
    assert not found


@pytest.mark.slow
def test_reveal_publishes_the_private_part_and_is_audited(tmp_path, corpus, capsys):
    from benchmark.cli import main

    url = make_database(tmp_path / "lb.sqlite", usb_data=corpus, n_resamples=10,
                        open_instance=False)
    from leaderboard.service.boards import read_board

    database = Database(url)
    entry = read_board(database, "usb", "all")[0]["ranked"][0]  # the baselines
    assert "private" not in entry
    assert main(["leaderboard", "reveal", "--db", str(tmp_path / "lb.sqlite"),
                 "--by", "organiser"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"]
    snapshot = read_board(database, "usb", "all")[0]
    private = snapshot["ranked"][0]["private"]
    assert snapshot["revealed"] and set(private) == set(snapshot["parts"])
    assert all(isinstance(value, float) for value in private.values() if value is not None)
    row = audit_rows(database, 1)[0]
    assert (row["actor"], row["action"]) == ("organiser", "reveal")


@pytest.mark.slow
def test_keep_linked_marks_the_parts_whose_labels_are_inferable(tmp_path, data_dir):
    from leaderboard.service.app import create_app

    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    url = make_database(tmp_path / "lb.sqlite", usb_data=tmp_path / "gold", n_resamples=10,
                        open_instance=False, keep_linked="true", computed_rows=False)
    client = TestClient(create_app(url))
    board = client.get("/api/v1/leaderboard/usb", params={"variant": "all"}).json()
    assert "fixing_factuality" in board["linked"][FAC]["inferable_from"]
    assert board["linked"][FAC]["hosted_apart"] is False
    page = client.get("/track/usb", params={"variant": "all"}).text
    assert "labels inferable from public inputs" in page
    database = Database(url)
    with database.session() as session:
        stored = {row.part: len(unpack(row.payload)["templates"])
                  for row in session.scalars(select(GoldPart))}
    assert stored[FAC] == len(client.get("/api/v1/manifest/usb").json()["parts"][FAC])
