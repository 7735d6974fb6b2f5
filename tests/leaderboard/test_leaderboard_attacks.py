"""An attack suite on a default demo instance (`sumbench leaderboard init --demo`): an
ordinary account, public inputs and the server's own answers try to pin down the hidden FAC
test labels three ways (tests/attacks.py):

- probing by crafted probabilities, adaptively, over a whole week of the quota;
- hash confirmation: guessed label files hashed and looked for in every public answer;
- linked inputs: FAC claims looked up among the public inputs of FIX, EVEXT and UNSUP.

Together they may pin down at most 10% of the board's FAC test labels. Each attack is first
shown to work where its weakness is open (exact answers, the full test sets' inputs, a hash
of the file), so a pass means the defences held, not that the attacker was weak.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections import Counter

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from leaderboard.service.auth import create_token
from leaderboard.service.db import Database, Submission
from leaderboard.service.gold import gold_for, hosted_gold
from leaderboard.service.worker import Worker

from attacks import Answer, ProbingAttacker, window_auc

FAC = "factuality_classification"
WINDOW = 8


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from benchmark.cli import main
    from leaderboard.service.app import create_app

    root = tmp_path_factory.mktemp("demo")
    db = str(root / "lb.sqlite")
    assert main(["leaderboard", "init", "--db", db, "--demo"]) == 0
    database = Database(db)
    return {"db": db, "database": database, "client": TestClient(create_app(db)),
            "token": create_token(database, "eve"), "data": root / "lb-demo" / "data",
            "bodies": []}


def _get(demo, url, **params):
    response = demo["client"].get(url, params=params or None)
    demo["bodies"].append(response.content)
    assert response.status_code == 200, (url, response.text)
    return response


def _truth(demo) -> dict[tuple, int]:
    """(id, summ_idx, claim) -> label of the `all` board's hosted FAC items (the test's own
    knowledge, never the attacker's)."""
    payload = gold_for(demo["database"], "usb")["all"][FAC]
    return {(t["id"], t["summ_idx"], t["summary_sent"]): t["label"]
            for t in payload["templates"]}


def _pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """FAC input records as pairs (the two claims of one edited sentence)."""
    by_sentence: dict[tuple, list[dict]] = {}
    for record in records:
        by_sentence.setdefault((record["id"], record["summ_idx"]), []).append(record)
    return [tuple(pair) for pair in by_sentence.values() if len(pair) == 2]


def _key(record: dict) -> tuple:
    return record["id"], record["summ_idx"], record["summary_sent"]


# ---- probing ---------------------------------------------------------------------------------

def _submit(demo, lines: list[dict], model: str, variant: str = "all"):
    data = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    response = demo["client"].post(
        "/api/v1/submissions", headers={"Authorization": f"Bearer {demo['token']}"},
        files=[("files", ("fac.jsonl", data))], data={"model": model, "variant": variant})
    demo["bodies"].append(response.content)
    return response


def _probe_lines(pairs, window, scores) -> list[dict]:
    """p(supported) = 1 - score for each window claim, 0.5 for every other claim."""
    lines = []
    for index, (a, b) in enumerate(pairs):
        p_a, p_b = (1 - scores[0][window.index(index)], 1 - scores[1][window.index(index)]) \
            if index in window else (0.5, 0.5)
        for record, p in ((a, p_a), (b, p_b)):
            lines.append({"task": FAC, "id": record["id"], "summ_idx": record["summ_idx"],
                          "summary_sent": record["summary_sent"], "prediction": [float(p)]})
    return lines


def _answer(demo, response) -> Answer | None:
    Worker(demo["database"]).drain()
    view = _get(demo, f"/api/v1/submissions/{response.json()['id']}").json()
    ladder = view["ladder"][FAC]
    return Answer(ladder["value"], ladder["improved"], ladder["step"])


def _a_day_passes(demo) -> None:
    """Move the attacker's submissions a day back: the daily quota opens again, the week's
    does not."""
    with demo["database"].write_session() as session:
        for row in session.scalars(select(Submission).where(Submission.model.like("probe %"))):
            row.created_at -= dt.timedelta(days=1)


def _probe_a_week(demo, pairs, window, n_public_pairs) -> dict[tuple, int]:
    attacker = ProbingAttacker(WINDOW, n_public_pairs, seed=0)
    step, sent, days = 100.0, 0, 0
    while True:
        scores = attacker.next_scores(step)
        response = _submit(demo, _probe_lines(pairs, window, scores), f"probe {sent}")
        if response.status_code == 429:
            if "per 7 days" in response.text or days == 6:
                break
            _a_day_passes(demo)
            days += 1
            continue
        assert response.status_code == 202, response.text
        sent += 1
        answer = _answer(demo, response)
        step = answer.step
        attacker.observe(scores, answer)
    assert sent == 49  # with the domain board's probe, the week's quota of 50
    pinned = {}
    for j, label in attacker.pinned().items():
        a, b = pairs[window[j]]
        pinned[_key(a)], pinned[_key(b)] = label, 1 - label
    return pinned


def test_the_probing_attacker_pins_labels_when_answers_are_exact():
    """Against exact AUC answers (no Ladder) the same attacker pins every public window pair
    within a dozen submissions."""
    rng = np.random.default_rng(5)
    truth, public = rng.integers(0, 2, WINDOW), rng.random(WINDOW) < 0.5
    attacker = ProbingAttacker(WINDOW, 20, seed=1, exact=True)
    for _ in range(12):
        scores = attacker.next_scores(1.0)
        value = window_auc(*scores, truth[None], public[None], 20)[0]
        attacker.observe(scores, Answer(float(value), True, 1.0))
    assert attacker.pinned() == {j: int(truth[j]) for j in range(WINDOW) if public[j]}


# ---- a model trained to emit probes -------------------------------------------------------

MODEL_ROUNDS = 3  # each is a model the server evaluates (about 8 s)


@pytest.fixture(scope="module")
def lab(demo, tmp_path_factory):
    """The demo instance served with a model root the attackers write crafted models to."""
    from leaderboard.service.app import create_app
    from leaderboard.service.evaluation import EvaluateOptions

    models = tmp_path_factory.mktemp("models")
    return {**demo, "models": models, "client": TestClient(create_app(demo["db"], str(models))),
            "options": EvaluateOptions(str(models), "cpu"),
            "tokens": {user: create_token(demo["database"], user)
                       for user in ("mallory", "trudy")}}


def _fac_sources(records: list[dict]) -> dict[tuple, str]:
    from tasks import get_task

    task = get_task(FAC)
    return {_key(record): task.source(instance)
            for record, instance in zip(records, task.instances(records))}


def _realized(folder, records: list[dict]) -> dict[tuple, float]:
    """p(Yes) of every FAC input, predicted here exactly as the server will."""
    import tempfile
    from pathlib import Path

    from tasks import get_task
    from trainers.inference.predict import PredictSpec, load_model, run_task

    task = get_task(FAC)
    model, tokenizer, _ = load_model(str(folder), safetensors_only=True)
    run = run_task(task, task.instances(records), model, tokenizer, PredictSpec(device="cpu"),
                   Path(tempfile.mkdtemp()), resume=False)
    return {_key(record): run_record["prediction"][0]
            for record, run_record in zip(records, run.records)}


def _crafted_round(lab, user, records, pairs, window, scores, name) -> tuple:
    """Craft a model answering the window's claims with these scores (and 0.5 elsewhere),
    let the server evaluate it; (the scores it really gave, the server's FAC answer)."""
    from attacks import claim_piece, crafted_fac_model

    sources = _fac_sources(records)
    values = {}
    for j, index in enumerate(window):
        for record, score in zip(pairs[index], (scores[0][j], scores[1][j])):
            p_yes = min(max(1.0 - float(score), 1e-4), 1 - 1e-4)
            values[claim_piece(sources[_key(record)])] = float(np.log(p_yes / (1 - p_yes))) / 19
    folder = lab["models"] / user / name
    crafted_fac_model(folder, values)
    realized = _realized(folder, records)
    window_keys = {_key(record) for index in window for record in pairs[index]}
    assert all(p == 0.5 for key, p in realized.items() if key not in window_keys)
    actual = tuple(np.array([1.0 - realized[_key(pairs[index][side])] for index in window])
                   for side in (0, 1))
    answer = lab["client"].post("/api/v1/submissions", data={
        "model": f"probe model {name}", "evaluate": f"{user}/{name}"},
        headers={"Authorization": f"Bearer {lab['tokens'][user]}"})
    assert answer.status_code == 202, answer.text
    Worker(lab["database"], evaluate=lab["options"]).drain()
    view = _get(lab, f"/api/v1/submissions/{answer.json()['id']}").json()
    assert view["status"] == "scored", view["errors"]
    return actual, view


def _probe_with_models(lab, user: str, exact: bool) -> dict[tuple, int]:
    inputs = _get(lab, "/api/v1/inputs/usb", variant="all").json()["parts"][FAC]
    pieces = Counter(claim_piece_of(source) for source in _fac_sources(inputs).values())
    pairs = sorted((pair for pair in _pairs(inputs) if all(
        pieces[claim_piece_of(source)] == 1 for source in _fac_sources(list(pair)).values())),
        key=lambda pair: _key(pair[0]))
    board = _get(lab, "/api/v1/leaderboard/usb", variant="all").json()
    attacker = ProbingAttacker(WINDOW, board["public_items"][FAC] // 2, seed=len(user),
                               exact=exact)
    window = [int(i) for i in np.random.default_rng(1).choice(len(pairs), WINDOW,
                                                               replace=False)]
    step = 100.0
    for round_ in range(MODEL_ROUNDS):
        scores, view = _crafted_round(lab, user, inputs, pairs, window,
                                      attacker.next_scores(step), f"probe-{round_}")
        if exact:
            assert not view["laddered"] and "public_scores" in view
            answer = Answer(view["headlines"][FAC], True, 1.0)
        else:
            assert view["laddered"] and "public_scores" not in view and "breakdown" not in view
            ladder = view["ladder"][FAC]
            answer = Answer(ladder["value"], ladder["improved"], ladder["step"])
            step = answer.step
        attacker.observe(scores, answer)
    pinned = {}
    for j, label in attacker.pinned().items():
        a, b = pairs[window[j]]
        pinned[_key(a)], pinned[_key(b)] = label, 1 - label
    return pinned


def claim_piece_of(source: str) -> str:
    from attacks import claim_piece

    return claim_piece(source)


@pytest.mark.slow
def test_a_model_emitting_probes_learns_no_more_than_a_laddered_file(lab, monkeypatch):
    """A participant's model crafted to answer chosen FAC probabilities on the public inputs,
    evaluated by the server: exact answers (an evaluated entry published unladdered, the
    guard removed) pin labels within a few models; laddered, as every participant's entry is,
    the same models pin at most a tenth of the board's FAC labels."""
    from leaderboard.service import scoring_jobs

    truth = _truth(lab)
    with monkeypatch.context() as unguarded:
        unguarded.setattr(scoring_jobs, "is_laddered", lambda submission, owner, settings:
                          submission.kind == "submission" and not owner.is_admin)
        exact = _probe_with_models(lab, "trudy", exact=True)
    assert len(exact) >= 4 and all(truth[key] == label for key, label in exact.items())
    laddered = _probe_with_models(lab, "mallory", exact=False)
    assert all(truth[key] == label for key, label in laddered.items())
    assert len(laddered) <= 0.1 * len(truth) and len(laddered) < len(exact)


# ---- linked inputs and hashes ----------------------------------------------------------------

def linked_guesses(boards: dict[str, dict[str, list[dict]]]) -> dict[tuple, int]:
    """FAC labels read off other parts' inputs on every board: a claim that is FIX's initial
    summary or UNSUP's summary is unsupported (1), one of EVEXT's claims supported (0)."""
    unsupported, supported = set(), set()
    for parts in boards.values():
        unsupported |= {r["initial_summary"] for r in parts.get("fixing_factuality", [])}
        unsupported |= {r["summary"] for r in parts.get("unsupported_span_prediction", [])}
        supported |= {line for r in parts.get("evidence_extraction", [])
                      for line in r["summary_lines"]}
    guesses = {}
    for parts in boards.values():
        for record in parts.get(FAC, []):
            claim = record["summary_sent"]
            if claim in unsupported or claim in supported:
                guesses[_key(record)] = int(claim in unsupported and claim not in supported)
    return guesses


def _hash_guesses(demo, published: set[bytes]) -> int:
    """Guessed FAC test files of the smallest domain, written as `sumbench data build` writes
    them and hashed: how many of their digests appear in a public answer. The guesses take the
    true labels but for 10 pairs, whose 1,024 combinations are all tried (so the true file is
    among them: the check that the enumeration is right)."""
    from tasks.plumbing.io import dumps_record, file_sha256

    path = min(demo["data"].glob(f"*/{FAC}/test.jsonl"), key=lambda p: p.stat().st_size)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    sentences = sorted({(r["id"], r["summ_idx"]) for r in records})[:10]
    found, digests = 0, set()
    for flips in range(1 << len(sentences)):
        flipped = {s for bit, s in enumerate(sentences) if flips >> bit & 1}
        lines = [dumps_record({**r, "label": 1 - r["label"]}
                              if (r["id"], r["summ_idx"]) in flipped else r) for r in records]
        digest = hashlib.sha256(("\n".join(lines) + "\n").encode()).hexdigest()
        digests.add(digest)
        found += any(digest[:16].encode() in text for text in published)
    assert file_sha256(path) in digests  # the enumeration holds the true file
    return found


@pytest.mark.slow
def test_an_ordinary_account_pins_down_at_most_a_tenth_of_the_fac_labels(demo):
    truth = _truth(demo)
    board = _get(demo, "/api/v1/leaderboard/usb", variant="all").json()
    n_public_pairs = board["public_items"][FAC] // 2
    inputs = {variant: _get(demo, "/api/v1/inputs/usb", variant=variant).json()["parts"]
              for variant in _get(demo, "/api/v1/tracks").json()["tracks"]["usb"]}
    pairs = sorted(_pairs(inputs["all"][FAC]), key=lambda pair: _key(pair[0]))
    window = [int(i) for i in np.random.default_rng(0).choice(len(pairs), WINDOW,
                                                               replace=False)]
    domain_pairs = _pairs(inputs["companies"][FAC])
    withheld = _submit(demo, _probe_lines(domain_pairs, [], ((), ())), "probe domain",
                       variant="companies")  # a domain board's FAC part: too few items
    assert withheld.status_code == 202, withheld.text
    assert _answer(demo, withheld).released is None
    pinned = _probe_a_week(demo, pairs, window, n_public_pairs)
    pinned.update(linked_guesses(inputs))
    published = set()
    for body in demo["bodies"]:
        published.update(re.findall(rb"[0-9a-f]{16,64}", body))
    assert _hash_guesses(demo, published) == 0
    assert all(truth[key] == label for key, label in pinned.items() if key in truth)
    hosted_pinned = [key for key in pinned if key in truth]
    assert len(hosted_pinned) <= 0.1 * len(truth), (len(hosted_pinned), len(truth))


@pytest.mark.slow
def test_the_linked_inputs_attack_reads_the_labels_off_full_test_sets(demo):
    """Had the instance kept the paper's full test sets (`--keep-linked`), the inputs alone
    would have given nearly every FAC label away."""
    from leaderboard.tracks.usb import UsbTrack

    stored = hosted_gold(demo["database"], "usb").stored
    full = {board: UsbTrack().inputs(stored, board) for board in stored}
    guesses = linked_guesses(full)
    labels = {(t["id"], t["summ_idx"], t["summary_sent"]): t["label"]
              for t in stored["all"][FAC]["templates"]}
    right = sum(guesses.get(key) == label for key, label in labels.items())
    assert right >= 0.9 * len(labels)
