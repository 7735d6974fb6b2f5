"""Compute one participant cannot hog: evaluations have a worker of their own in `serve`, so
a predictions file is scored while a model that never stops runs; a user's evaluations
queued or running are capped, and one deleted or hidden while it runs holds its slot until
its process is gone; an evaluation's generated tokens and wall-clock seconds are bounded by a
budget that grows with the board (leaderboard.service.compute)."""
from __future__ import annotations

import contextlib
import time

import httpx
import pytest
from sqlalchemy import select

from leaderboard.service.compute import evaluation_budget
from leaderboard.service.db import Job
from leaderboard.service.settings import InstanceSettings, load_settings, save_settings
from leaderboard.service.worker import Worker

from lb_helpers import distinct_copy, evaluation_lab, minimal_lines
from servers import LeaderboardServer

TASKS = ("fixing_factuality",)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, data_dir, usb_tokenizer):
    lab = evaluation_lab(tmp_path_factory.mktemp("compute"), data_dir, usb_tokenizer, TASKS)
    endless = lab["models"] / "team" / "endless"
    never_stopping(lab["models"] / "team" / "tiny", endless)
    return lab


def never_stopping(tiny, out) -> None:
    """The tiny T5 turned around: it always writes one token and never the end of sequence,
    so every answer runs to the release's 767 new tokens (4 beams each)."""
    import torch
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    model = T5ForConditionalGeneration.from_pretrained(tiny)
    with torch.no_grad():  # as lb_helpers.answers_at_once, with the end of sequence last
        model.shared.weight[:, 0] = 1.0
        model.shared.weight[model.config.eos_token_id, 0] = -1000.0
        model.shared.weight[5, 0] = 1000.0
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(out)
    (out / "README.md").write_text("# never stops\n")


def _settings(lab, **changes):
    before = load_settings(lab["database"])
    save_settings(lab["database"], before.with_changes(
        {key: str(value) for key, value in changes.items()}))
    return lambda: save_settings(lab["database"], before)


def _evaluate(client, lab, source: str, user: str = "ada"):
    return client.post("/api/v1/submissions", data={"model": f"c {source}", "evaluate": source},
                       headers={"Authorization": f"Bearer {lab['tokens'][user]}"})


def test_the_budget_is_the_board_s_items_times_the_release_s_tokens():
    default = InstanceSettings()
    assert evaluation_budget(default, 10, 767).to_dict() == {
        "max_generated_tokens": 7670, "seconds": 600 + int(7670 * 0.05)}
    assert evaluation_budget(default, 20_000, 767).seconds == default.evaluate_seconds
    chosen = default.with_changes({"evaluate_token_budget": "100",
                                   "evaluate_seconds_per_token": "1"})
    assert evaluation_budget(chosen, 10, 767).to_dict() == {"max_generated_tokens": 100,
                                                            "seconds": 700}


def _evaluated(lab, source: str, user: str = "ada") -> dict:
    """SOURCE submitted for evaluation and run by a worker: the submission as its owner sees
    it."""
    answer = _evaluate(lab["client"], lab, source, user)
    assert answer.status_code == 202, answer.text
    Worker(lab["database"], evaluate=lab["options"]).drain()
    return lab["client"].get(f"/api/v1/submissions/{answer.json()['id']}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"}).json()


@pytest.fixture(scope="module")
def claims_lab(tmp_path_factory, data_dir, usb_tokenizer):
    """A board of EVEXT alone: 3 articles in its public inputs, 13 claims the model answers."""
    lab = evaluation_lab(tmp_path_factory.mktemp("claims"), data_dir, usb_tokenizer,
                         ("evidence_extraction",))
    never_stopping(lab["models"] / "team" / "tiny", lab["models"] / "team" / "endless")
    return lab


@pytest.mark.slow
def test_a_model_that_never_stops_is_scored_within_the_budget_it_was_sized_for(claims_lab):
    """The default budget was the board's input records times 767: EVEXT counted per
    article (3) while the model generates per claim (13), so a model that never stops failed
    ("generated 9971 tokens ... over this evaluation's budget of 2301"). Planned per model
    input, it is scored, with its cost."""
    view = _evaluated(claims_lab, "team/endless")
    assert view["status"] == "scored", view["errors"]
    assert view["cost"]["generated_tokens"] == 13 * 767 == \
        view["evaluation"]["max_generated_tokens"]


@pytest.mark.slow
def test_a_failed_evaluation_records_what_it_spent(claims_lab):
    restore = _settings(claims_lab, evaluate_token_budget=767)
    try:
        view = _evaluated(claims_lab, distinct_copy(claims_lab["models"], "over",
                                                    "team/endless"))
        assert view["status"] == "failed"
        assert view["errors"][0]["message"] == (
            "the model cannot be evaluated: it generated 9971 tokens by the end of "
            "evidence_extraction, over this evaluation's budget of 767")
        cost = view["cost"]
        assert cost["generated_tokens"] == 9971 and cost["seconds"] > 0
        assert cost["peak_rss_bytes"] > 0 and cost["device"].startswith("cpu")
    finally:
        restore()


def _delete(lab, answer, user: str) -> None:
    deleted = lab["client"].delete(f"/api/v1/submissions/{answer.json()['id']}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"})
    assert deleted.status_code == 200, deleted.text


@pytest.mark.slow
def test_a_user_s_waiting_evaluations_are_capped_and_others_and_admins_go_on(lab):
    restore = _settings(lab, evaluations_per_user=1)
    try:
        client = lab["client"]
        assert _evaluate(client, lab, distinct_copy(lab["models"], "cap-1")).status_code == 202
        refused = _evaluate(client, lab, distinct_copy(lab["models"], "cap-2"))
        assert refused.status_code == 429, refused.text
        assert refused.json()["errors"][0]["message"] == (
            "1 of your evaluations are queued or running (this instance's limit): submit this "
            "one when one of them has finished")
        other = _evaluate(client, lab, "team/cap-2", "bob")
        assert other.status_code == 202
        admin = _evaluate(client, lab, distinct_copy(lab["models"], "cap-3"), "root")
        assert admin.status_code == 202
        _delete(lab, other, "bob")  # deleted before they run: only ada's is evaluated
        _delete(lab, admin, "root")
        Worker(lab["database"], evaluate=lab["options"]).drain()
        again = _evaluate(client, lab, "team/cap-3")
        assert again.status_code == 202  # a slot is free again
        _delete(lab, again, "ada")
    finally:
        restore()


@pytest.mark.slow
def test_an_evaluation_over_its_token_budget_fails_naming_it(lab):
    restore = _settings(lab, evaluate_token_budget=3)
    try:
        view = _evaluated(lab, distinct_copy(lab["models"], "budget"))
        assert view["status"] == "failed"
        assert view["errors"][0]["message"] == (
            "the model cannot be evaluated: it generated 7 tokens by the end of "
            "fixing_factuality, over this evaluation's budget of 3")
    finally:
        restore()


def _evaluate_child(psutil, timeout: float = 120, cpu_seconds: float = 2.0):
    """This process's evaluation process (a worker thread here started it), once it has
    spent `cpu_seconds` (it is loading or running the model)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error):  # an earlier child may be a zombie now
                if "leaderboard.service.evaluate_child" in " ".join(child.cmdline()) and \
                        sum(child.cpu_times()[:2]) >= cpu_seconds:
                    return child
        time.sleep(0.05)
    raise AssertionError(f"no evaluation process ran {cpu_seconds} s in {timeout} s")


@pytest.mark.parametrize("action", ["delete", "hide"])
@pytest.mark.slow
def test_a_running_evaluation_deleted_or_hidden_is_stopped_before_its_slot_is_free(lab,
                                                                                  action):
    """A worker runs a model that never stops; its owner deletes (hides) it: the model's
    process is gone before the owner may submit another (the limit is one), and meanwhile
    another is refused."""
    import threading

    import psutil

    from leaderboard.service.auth import create_token
    from leaderboard.service.jobs import STOP_REASONS

    user = f"stopper-{action}"
    lab["tokens"][user] = create_token(lab["database"], user)
    restore, stop = _settings(lab, evaluations_per_user=1), threading.Event()
    worker = threading.Thread(target=Worker(lab["database"], kinds=("evaluate",),
                                            evaluate=lab["options"]).run, args=(stop, 0.1))
    worker.start()
    again = None
    try:
        running = _evaluate(lab["client"], lab, distinct_copy(
            lab["models"], f"endless-{action}", "team/endless"), user)
        assert running.status_code == 202, running.text
        child = _evaluate_child(psutil)
        after = distinct_copy(lab["models"], f"after-{action}")
        assert _evaluate(lab["client"], lab, after, user).status_code == 429
        path = f"/api/v1/submissions/{running.json()['id']}"
        changed = lab["client"].request(*(("DELETE", path) if action == "delete" else (
            "POST", f"{path}/hide")), headers={"Authorization": f"Bearer {lab['tokens'][user]}"})
        assert changed.status_code == 200, changed.text
        deadline = time.monotonic() + 60
        while (again := _evaluate(lab["client"], lab, after, user)).status_code == 429:
            assert time.monotonic() < deadline, "the slot was never given back"
            time.sleep(0.05)
        assert again.status_code == 202, again.text
        assert not child.is_running(), "the slot was given back while the model still ran"
    finally:
        if again is not None and again.status_code == 202:
            _delete(lab, again, user)  # not evaluated: no other test's worker finds it
        stop.set()
        worker.join()
        restore()
    with lab["database"].session() as session:
        job = session.scalars(select(Job).filter_by(submission_id=running.json()["id"])).one()
        assert (job.state, job.error) == ("failed", STOP_REASONS[action])


@pytest.mark.slow
def test_one_user_s_queue_delays_another_s_first_evaluation_by_one_at_most(lab):
    """A queues three evaluations, then B one; a worker evaluates B's second."""
    from leaderboard.service.auth import create_token

    for user in ("queue-a", "queue-b"):
        lab["tokens"][user] = create_token(lab["database"], user)
    restore, queued = _settings(lab, evaluations_per_user=3), []
    try:
        for user, name in [("queue-a", f"queue-a{n}") for n in range(3)] + [
                ("queue-b", "queue-b")]:
            queued.append((_evaluate(lab["client"], lab, distinct_copy(lab["models"], name),
                                     user), user))
            assert queued[-1][0].status_code == 202, queued[-1][0].text
        worker = Worker(lab["database"], kinds=("evaluate",), evaluate=lab["options"])
        assert worker.run_once() and worker.run_once()
        with lab["database"].session() as session:
            evaluated = set(session.scalars(select(Job.submission_id).where(
                Job.kind == "evaluate", Job.state == "done")))
        ids = [answer.json()["id"] for answer, _ in queued]
        assert evaluated & set(ids) == {ids[0], ids[3]}
    finally:
        for answer, user in queued:
            _delete(lab, answer, user)
        restore()


def _status(server, lab, number: int, user: str = "ada") -> str:
    return httpx.get(f"{server.url}/api/v1/submissions/{number}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"}, timeout=30).json()["status"]


def _wait(server, lab, number: int, states: tuple[str, ...], timeout: float,
          user: str = "ada") -> str:
    deadline = time.monotonic() + timeout
    while (status := _status(server, lab, number, user)) not in states:
        assert time.monotonic() < deadline, f"submission {number} still {status}"
        time.sleep(0.2)
    return status


@pytest.mark.slow
def test_a_predictions_file_is_scored_while_a_never_stopping_model_runs(lab, usb_fixture_dir):
    fix = minimal_lines(usb_fixture_dir / "predictions" / "fixing_factuality.jsonl")
    with LeaderboardServer(lab["url"], "--model-root", str(lab["models"])) as server:
        endless = httpx.post(f"{server.url}/api/v1/submissions", data={
            "model": "endless", "evaluate": "team/endless"}, headers={
            "Authorization": f"Bearer {lab['tokens']['ada']}"}, timeout=60)
        assert endless.status_code == 202, endless.text
        _wait(server, lab, endless.json()["id"], ("evaluating",), 60)
        sent = httpx.post(f"{server.url}/api/v1/submissions", files=[("files", (
            "fix.jsonl", fix))], data={"model": "a file meanwhile"}, headers={
            "Authorization": f"Bearer {lab['tokens']['bob']}"}, timeout=60)
        assert sent.status_code == 202, sent.text
        assert _wait(server, lab, sent.json()["id"], ("scored", "failed", "rejected"), 30,
                     "bob") == "scored"
        assert _status(server, lab, endless.json()["id"]) == "evaluating"
