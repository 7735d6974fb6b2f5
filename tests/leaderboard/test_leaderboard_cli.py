"""`sumbench leaderboard` commands end to end: init (idempotent), token, submit (--check
offline and against a server's manifest, a run folder with --wait), status, export, rescore,
and their one-line errors."""
from __future__ import annotations

import contextlib
import json
import shutil

import httpx
import pytest

from benchmark.cli import main

from lb_helpers import minimal_lines, write_pyramid_folder
from servers import LeaderboardServer


@pytest.fixture(scope="module")
def instance(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("cli")
    shutil.copytree(data_dir / "all", root / "gold" / "all")
    pyramid = write_pyramid_folder(root / "tinyset")
    return {"root": root, "db": str(root / "lb.sqlite"), "gold": str(root / "gold"),
            "pyramid": str(pyramid)}


def _run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_init_is_idempotent_and_token_prints_last(instance, capsys):
    args = ("leaderboard", "init", "--db", instance["db"], "--gold", instance["gold"],
            "--gold-visibility", "private", "--pyramid", instance["pyramid"], "--set",
            "n_resamples=30", "--keep-linked", "--private-fraction", "0", "--set",
            "ladder_step=0")  # an open instance
    code, out, _ = _run(capsys, *args)
    report = json.loads(out)
    assert code == 0 and report["revision"] == "0005"
    assert report["settings"]["keep_linked"] and report["settings"]["private_fraction"] == 0
    assert {(link["revealer"], link["victim"]) for link in report["linked_parts"]} >= {
        ("fixing_factuality", "factuality_classification"),
        ("factuality_classification", "fixing_factuality")}
    assert report["computed_rows"] == {"baseline": 1, "reference": 3, "builtin": 6}
    assert report["boards"] == {"evaluators": ["tinyset"], "summaries": ["tinyset"],
                                "usb": ["all"]}
    code, out, _ = _run(capsys, *args)
    again = json.loads(out)
    assert again["computed_rows"] == {"baseline": 0, "reference": 0, "builtin": 0}
    assert {change["change"] for change in again["gold"]} == {"unchanged"}
    code, out, err = _run(capsys, "leaderboard", "token", "--db", instance["db"], "--user",
                          "dana")
    token = out.strip().splitlines()[-1]
    assert code == 0 and token.startswith("sb_") and len(token) > 40 and "shown once" in err
    instance["token"] = token


@pytest.mark.slow
def test_check_offline_and_against_the_server(instance, capsys, usb_fixture_dir, tmp_path):
    fix = tmp_path / "fix.jsonl"
    fix.write_bytes(minimal_lines(usb_fixture_dir / "predictions" / "fixing_factuality.jsonl"))
    code, out, _ = _run(capsys, "leaderboard", "submit", "--check", str(fix))
    assert code == 0 and json.loads(out)["coverage_checked"] is False
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(fix.read_text().splitlines()[:-1]) + "\n")
    code, out, _ = _run(capsys, "leaderboard", "submit", "--check", str(short))
    assert code == 0  # the shape is fine; coverage needs the server's manifest
    with LeaderboardServer(instance["db"], "--no-worker") as server:
        code, out, err = _run(capsys, "leaderboard", "submit", "--check", "--server",
                              server.url, str(short))
        assert code == 2 and "fixing_factuality: 1 of 7 test items missing" in err
        assert len(err.strip().splitlines()) == 1
        code, out, _ = _run(capsys, "leaderboard", "submit", "--check", "--server", server.url,
                            str(fix))
        assert code == 0 and json.loads(out)["parts"] == {"fixing_factuality": 7}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "FIX", "id": "x", "summ_idx": 0, "prediction": 1}\n')
    code, _, err = _run(capsys, "leaderboard", "submit", "--check", str(bad))
    assert code == 2 and "bad.jsonl:1, field 'prediction': expected a string, got integer" in err


@pytest.mark.slow
def test_submit_a_run_folder_wait_status_export_rescore(instance, capsys, usb_fixture_dir,
                                                        tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    for path in (usb_fixture_dir / "predictions").glob("*.jsonl"):
        shutil.copy(path, run / "predictions" / path.name)
    (run / "results.json").write_text(json.dumps({"spec": {
        "model": "google/flan-t5-large", "mode": "finetune", "lora": True,
        "training": "multitask", "profile": "flan-t5-large", "variant": "biographies",
        "seed": 3, "train_overrides": {"train_fraction": 0.2}}}))
    with LeaderboardServer(instance["db"]) as server:
        code, out, _ = _run(capsys, "leaderboard", "submit", "--server", server.url,
                            "--token", instance["token"], "--name", "flan-large-lora",
                            "--licence", "apache-2.0", "--wait", str(run))
        answer = json.loads(out)
        assert code == 0 and answer["status"] == "scored"
        assert answer["card"] == {"base_model": "google/flan-t5-large", "data_fraction": 0.2,
                                  "licence": "apache-2.0", "method":
                                  "LoRA fine-tuning (multitask, profile flan-t5-large)",
                                  "seed": 3, "training_domains": "biographies"}
        _wait_on_board(server.url, answer["id"])
        code, out, _ = _run(capsys, "leaderboard", "status", str(answer["id"]), "--server",
                            server.url)
        assert code == 0 and json.loads(out)["model"] == "flan-large-lora"
        hidden = httpx.post(f"{server.url}/api/v1/submissions/{answer['id']}/hide",
                            headers={"Authorization": f"Bearer {instance['token']}"})
        assert hidden.status_code == 200
        code, out, _ = _run(capsys, "leaderboard", "status", str(answer["id"]), "--server",
                            server.url)
        assert code == 2 and json.loads(out)["http_status"] == 404  # hidden from others
        monkeypatch.setenv("SUMBENCH_LEADERBOARD_TOKEN", instance["token"])
        code, out, _ = _run(capsys, "leaderboard", "status", str(answer["id"]), "--server",
                            server.url)  # the owner's token, from the environment
        assert code == 0 and json.loads(out)["hidden"] is True
        monkeypatch.delenv("SUMBENCH_LEADERBOARD_TOKEN")
        assert httpx.post(f"{server.url}/api/v1/submissions/{answer['id']}/unhide",
                          headers={"Authorization": f"Bearer {instance['token']}"}
                          ).status_code == 200
        code, out, err = _run(capsys, "leaderboard", "status", "999", "--server", server.url)
        assert code == 2 and json.loads(out)["http_status"] == 404
        assert err == ("sumbench leaderboard: error: no status for submission 999 (HTTP 404): "
                       "no submission 999\n")
        code, out, err = _run(capsys, "leaderboard", "submit", "--server", server.url,
                              "--token", instance["token"], "--name", "flan-large-lora",
                              "--licence", "apache-2.0", str(run))  # a retry
        again = json.loads(out)
        assert code == 0 and (again["id"], again["duplicate"]) == (answer["id"], True)
        assert again["status"] == "scored" and again["http_status"] == 200
        assert f"note: these files were already submitted as submission {answer['id']}" in err
        code, out, err = _run(capsys, "leaderboard", "submit", "--server", server.url,
                              "--token", "sb_not-a-token", "--name", "x", str(run))
        assert code == 2 and json.loads(out)["http_status"] == 401
        assert err.startswith("sumbench leaderboard: error: the submission was not accepted "
                              "(HTTP 401): ") and len(err.splitlines()) == 1
    code, out, _ = _run(capsys, "leaderboard", "export", "--db", instance["db"], "--out",
                        str(tmp_path / "site"))
    assert code == 0 and json.loads(out)["boards"] == 3
    assert (tmp_path / "site" / f"submission-{answer['id']}.html").is_file()
    code, out, _ = _run(capsys, "leaderboard", "rescore", "--db", instance["db"], "--now")
    assert code == 0 and json.loads(out) == {"score": 0, "analyse": 0, "evaluate": 0,
                                             "jobs_run": 0}


def _wait_on_board(url: str, entry_id: int, timeout: float = 60) -> None:
    """The analysis marks an entry analysed, then rebuilds its board: wait for the board."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = httpx.get(url + "/api/v1/leaderboard/usb").json()["entries"]
        if entry_id in [entry["id"] for entry in entries]:
            return
        time.sleep(0.2)
    raise AssertionError(f"entry {entry_id} never reached the board")


@pytest.mark.parametrize("args, message", [
    (["init", "--gold", "/nonexistent/gold"], "no such task-datasets folder"),
    (["init", "--set", "n_resamples=0"], "n_resamples must be a positive integer"),
    (["init", "--set", "colour=red"], "unknown leaderboard setting 'colour'"),
    (["init", "--evaluator", "broken"], "expected NAME=UNITS:PRESENCE"),
    (["init", "--evaluator", "x=bogus:nothing"], "evaluator 'x': unknown units 'bogus'"),
    (["init", "--evaluator", "x=statement:lexical"], "evaluator 'x': unknown units "
                                                     "'statement' (known: scus, stus"),
    (["init", "--evaluator", "x=scus:nothing"], "evaluator 'x': unknown presence backend "
                                                "'nothing'"),
    (["init", "--evaluator", "x=scus:nli"], "evaluator 'x': --presence nli needs --model"),
    (["init", "--evaluator", "x=stus:lexical,colour=red"], "evaluator 'x': --presence lexical "
                                                           "does not take colour"),
    (["init", "--evaluator", "x=stus:lexical,threshold=high"], "threshold 'high' is not a "
                                                               "number"),
    (["init", "--evaluator", "x=scus:lexical", "--evaluator", "x=stus:lexical"],
     "two evaluators share a name"),
    (["init", "--evaluator", "x=evaluator:rouge9_recall"], "evaluator 'x': unknown evaluator "
                                                           "'rouge9_recall'; did you mean"),
    (["init", "--evaluator", "x=evaluator:rouge1_recall,k=1"], "evaluator 'x': evaluator "
                                                               "'rouge1_recall' takes no "
                                                               "options"),
    (["init", "--evaluator", "x=evaluator:questeval,protocl=v2"], "evaluator 'x': unknown "
                                                                  "QuestEval option 'protocl'"),
    (["init", "--evaluator", "x=evaluator:pyramid"], "evaluator 'x': pyramid needs "
                                                     "units=FILE"),
    (["init", "--evaluator", "x=source:pyramid,units=/no/such/file"], "evaluator 'x': "
                                                                      "pyramid: no units file"),
    (["init", "--evaluator", "x=scus:questeval"], "QuestEval is an evaluator, not a presence "
                                                  "backend"),
    (["token", "--user", "sumbench"], "reserved"),
    (["token", "--user", "nobody", "--revoke"], "no user 'nobody'"),
])
def test_errors_are_one_line(instance, capsys, tmp_path, args, message):
    db = str(tmp_path / "fresh.sqlite")
    if args[0] == "token":
        main(["leaderboard", "init", "--db", db])
        capsys.readouterr()
    code, _, err = _run(capsys, "leaderboard", args[0], "--db", db, *args[1:])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    if "--evaluator" in args:  # board columns are checked before anything is written
        assert not (tmp_path / "fresh.sqlite").exists()


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["token", "--user", "ana"],
                                     ["worker", "--once"], ["export", "--out", "site"]])
def test_a_mistyped_database_is_refused_and_never_created(capsys, tmp_path, monkeypatch,
                                                          command):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "leaderboard", command[0], "--db", "boards.sqlite",
                        *command[1:])
    assert code == 2 and err == (
        f"sumbench leaderboard: error: no leaderboard database at {tmp_path}/boards.sqlite; "
        f"create one with 'sumbench leaderboard init --db boards.sqlite'\n")
    assert list(tmp_path.iterdir()) == []


def test_serve_on_a_port_in_use_is_one_line_naming_the_address(capsys, tmp_path):
    import socket

    db = str(tmp_path / "lb.sqlite")
    main(["leaderboard", "init", "--db", db])
    capsys.readouterr()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = _run(capsys, "leaderboard", "serve", "--db", db, "--port", str(port),
                            "--no-worker")
    assert code == 1 and err == (f"sumbench leaderboard: error: cannot listen on "
                                 f"127.0.0.1:{port} (Address already in use)\n")


def test_revoked_tokens_stop_working_and_the_revocation_is_audited(capsys, tmp_path):
    from leaderboard.service.auth import authenticate
    from leaderboard.service.db import AuditEntry, Database

    db = str(tmp_path / "revoke.sqlite")
    main(["leaderboard", "init", "--db", db])
    tokens = []
    for _ in range(2):
        code, out, _ = _run(capsys, "leaderboard", "token", "--db", db, "--user", "erin")
        tokens.append(out.strip().splitlines()[-1])
    database = Database(f"sqlite:///{db}")
    assert all(authenticate(database, token).name == "erin" for token in tokens)
    code, out, err = _run(capsys, "leaderboard", "token", "--db", db, "--user", "erin",
                          "--revoke")
    assert code == 0 and out == "" and "revoked 2 token(s) of erin" in err
    assert [authenticate(database, token) for token in tokens] == [None, None]
    with database.session() as session:
        last = session.query(AuditEntry).order_by(AuditEntry.id.desc()).first()
        assert (last.actor, last.action, last.outcome) == ("erin", "revoke", "accepted")
    code, out, _ = _run(capsys, "leaderboard", "token", "--db", db, "--user", "erin")
    assert authenticate(database, out.strip().splitlines()[-1]).name == "erin"  # a new one


def test_a_rejected_submission_names_its_first_error(capsys):
    from benchmark.commands.leaderboard_client import refused

    answer = {"status": "rejected", "http_status": 200, "errors": [
        {"file": "abs.jsonl", "line": 3, "field": "id", "message": "no such test item"},
        {"file": None, "line": None, "field": "id", "message": "1 of 3 test items missing"}]}
    assert refused(answer, "the submission was not accepted") == 2
    assert capsys.readouterr().err == (
        "sumbench leaderboard: error: the submission was not accepted (HTTP 200, status "
        "rejected): abs.jsonl:3: no such test item (and 1 more errors)\n")
    assert refused({"status": "failed", "http_status": 200, "errors": [
        {"message": "internal error (KeyError) while scoring"}]}, "x") == 1
    assert capsys.readouterr().err.endswith("status failed): internal error (KeyError) while "
                                            "scoring\n")
    assert refused({"http_status": 422, "detail": [{"loc": ["body", "model"],
                                                    "msg": "Field required"}]}, "x") == 2
    assert capsys.readouterr().err == ("sumbench leaderboard: error: x (HTTP 422): body.model: "
                                       "Field required\n")


def test_an_unmigrated_database_is_refused(capsys, tmp_path):
    import sqlite3

    with contextlib.closing(sqlite3.connect(tmp_path / "other.sqlite")) as other:
        other.execute("CREATE TABLE notes (text TEXT)")  # a SQLite file, not a leaderboard
    code, _, err = _run(capsys, "leaderboard", "token", "--db", str(tmp_path / "other.sqlite"),
                        "--user", "x")
    assert code == 2 and "run `sumbench leaderboard init" in err


@pytest.mark.slow
def test_rows_the_server_computes_are_not_held_to_the_submitters_limits(capsys, tmp_path,
                                                                        data_dir):
    """Tiny upload limits (set by an admin for submitters) used to fail `init` on the
    server's own baseline rows."""
    shutil.copytree(data_dir / "all", tmp_path / "gold" / "all")
    code, out, err = _run(capsys, "leaderboard", "init", "--db", str(tmp_path / "lb.sqlite"),
                          "--gold", str(tmp_path / "gold"), "--gold-visibility", "private",
                          "--set", "n_resamples=20",
                          "--set", "max_line_bytes=64", "--set", "max_upload_bytes=1024")
    assert code == 0, err
    assert json.loads(out)["computed_rows"]["baseline"] > 0


@pytest.mark.slow
def test_demo_instance_has_gold_baselines_and_a_scored_demo_entry(capsys, tmp_path):
    code, out, _ = _run(capsys, "leaderboard", "init", "--db", str(tmp_path / "lb.sqlite"),
                        "--demo", "--demo-docs", "12", "--set", "n_resamples=20")
    report = json.loads(out)
    assert code == 0 and report["demo_submission"]["status"] == "scored"
    # 12 documents leave biographies without test articles: no board for it
    assert report["boards"]["usb"] == ["all", "companies", "disasters", "landmarks",
                                       "newspapers", "schools"]
    assert (tmp_path / "lb-demo" / "data" / "all" / "abstractive_summarization").is_dir()
