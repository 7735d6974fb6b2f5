"""Models the server evaluates itself: `submit --evaluate` of a tiny model folder under the
model root, scored exactly as the same model's `sumbench predict` files; what may not be
loaded; a model that fails to load, runs too long or out of memory; workers by kind; a killed
worker's evaluation taken over (a real SQLite file, the app through ASGI, real processes)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from leaderboard.service.db import Job, Score, Submission
from leaderboard.service.worker import Worker

from helpers import sumbench
from lb_helpers import distinct_copy, evaluation_lab, wait_for_lapsed_leases
from servers import LeaderboardServer, child_env, sumbench_command

#: the tasks of the test board: a label task, a windowed one and a generation task
TASKS = ("factuality_classification", "extractive_summarization", "fixing_factuality")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, data_dir, usb_tokenizer):
    return evaluation_lab(tmp_path_factory.mktemp("lab"), data_dir, usb_tokenizer, TASKS)


def _submit(lab, user="ada", **form):
    return lab["client"].post("/api/v1/submissions",
                              headers={"Authorization": f"Bearer {lab['tokens'][user]}"},
                              data={"model": form.pop("model", "tiny"), **form})


def _view(lab, submission_id, user="root"):
    return lab["client"].get(f"/api/v1/submissions/{submission_id}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"}).json()


def _copy_model(lab, name: str) -> str:
    return distinct_copy(lab["models"], name)


def _drain(lab, **settings):
    from leaderboard.service.settings import load_settings, save_settings

    if settings:
        save_settings(lab["database"], load_settings(lab["database"]).with_changes(
            {key: str(value) for key, value in settings.items()}))
    Worker(lab["database"], evaluate=lab["options"]).drain()


@pytest.mark.slow
def test_an_evaluated_model_scores_exactly_as_its_own_predictions_submitted(lab, capsys):
    from leaderboard.service.model_fetch import digest_of
    from leaderboard.service.model_refs import weights_fingerprint

    answer = _submit(lab, evaluate="team/tiny", card='{"method": "random weights"}')
    assert answer.status_code == 202, answer.text
    _drain(lab)
    evaluated = _view(lab, answer.json()["id"])
    assert evaluated["status"] == "scored", evaluated["errors"]
    assert (evaluated["kind"], evaluated["badge"]) == ("evaluation", "evaluated here")
    folder = lab["models"] / "team" / "tiny"
    loaded = sorted(path.name for path in folder.iterdir() if path.name != "README.md")
    assert evaluated["evaluation"]["digest"] == digest_of(
        [(name, hashlib.sha256((folder / name).read_bytes()).hexdigest()) for name in loaded])
    assert evaluated["evaluation"]["weights"] == weights_fingerprint(
        [folder / "model.safetensors"])
    assert evaluated["evaluation"]["model_card"].startswith("# tiny")
    assert evaluated["evaluation"]["predict"]["num_beams"] == 4  # `sumbench predict`'s
    page = lab["client"].get(f"/submission/{answer.json()['id']}").text
    assert "evaluated here" in page and "A tiny T5 for tests." in page
    public = _view(lab, answer.json()["id"], user="ada")
    assert not public["laddered"] and public["public_scores"]["fixing_factuality"]
    assert "withheld" in public["breakdown"]["biographies"]["fixing_factuality"]  # 2 items
    # the same model's `sumbench predict` files, on the board's public inputs
    inputs, run = lab["root"] / "inputs", lab["root"] / "run"
    _write_inputs(lab, inputs)
    code, _, err = sumbench(capsys, "predict", "--model", folder, "--tasks", *TASKS,
                            "--data", inputs, "--variant", "all", "--split", "test",
                            "--out", run, "--device", "cpu")
    assert code == 0, err
    from_files = _scored_run_files(lab, run)
    assert from_files["status"] == "scored"
    assert from_files["scores"] == evaluated["scores"]  # every metric, to the last bit
    assert from_files["headlines"] == evaluated["headlines"]
    fac = evaluated["scores"]["factuality_classification"]
    assert fac["length_mismatches"] == fac["n_records"]  # the tiny model's FAC says no Yes/No
    again = _submit(lab, evaluate="team/tiny", model="the same tiny, renamed",
                    card='{"method": "random weights"}')
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["id"] == answer.json()["id"]


@pytest.mark.parametrize("base, outcome", [("inside", "scored"), ("outside", "failed")])
@pytest.mark.slow
def test_a_peft_adapter_is_evaluated_on_the_base_model_it_names(lab, tmp_path, base,
                                                                outcome):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSeq2SeqLM

    base_dir = lab["models"] / "team" / "tiny" if base == "inside" else tmp_path / "base"
    if base == "outside":
        shutil.copytree(lab["models"] / "team" / "tiny", base_dir)
    adapter_dir = lab["models"] / "team" / f"adapter-{base}"
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q", "v"], init_lora_weights=False,
                        task_type="SEQ_2_SEQ_LM")
    get_peft_model(AutoModelForSeq2SeqLM.from_pretrained(base_dir), config).save_pretrained(
        adapter_dir)
    assert json.loads((adapter_dir / "adapter_config.json").read_text())[
        "base_model_name_or_path"] == str(base_dir)
    answer = _submit(lab, evaluate=f"team/adapter-{base}", model=f"adapter {base}")
    assert answer.status_code == 202, answer.text
    _drain(lab)
    view = _view(lab, answer.json()["id"])
    assert view["status"] == outcome, view["errors"]
    if outcome == "failed":
        assert "is not under the model root" in view["errors"][0]["message"]


@pytest.fixture(scope="module")
def encoders(lab, tmp_path_factory, tiny_roberta, roberta_tokenizer) -> Path:
    """Seeded FAC, EXT and UNSUP models exported flat (`sumbench export encoders`) to
    team/encoders under the model root; UNSUP is not on the test board."""
    from trainers.encoders.model_files import export_models, save_model
    from trainers.encoders.pipeline import start_model
    from trainers.encoders.spec import encoder_spec

    runs = tmp_path_factory.mktemp("encoder-runs")
    for short in ("FAC", "EXT", "UNSUP"):
        spec = encoder_spec("roberta-large", short, model=str(tiny_roberta), seed=1)
        save_model(start_model(spec, str(tiny_roberta)).eval(), runs / spec.task,
                   roberta_tokenizer)
    export = lab["models"] / "team" / "encoders"
    export_models({task.name: task for task in sorted(runs.iterdir())}, export)
    (export / "README.md").write_text("# tiny RoBERTa\nRandom heads.\n")
    return export


@pytest.mark.slow
def test_an_encoder_model_is_evaluated_on_the_board_tasks_it_holds(lab, encoders, capsys,
                                                                  tmp_path):
    """USB Table 2's RoBERTa rows evaluated here: a folder of flat task folders, predicted
    with the profile's settings, scored exactly as the same folder's `sumbench predict`
    files on the board's public inputs (which hold no gold field)."""
    answer = _submit(lab, evaluate="team/encoders", model="tiny roberta",
                     profile="roberta-large")
    assert answer.status_code == 202, answer.text
    _drain(lab)
    evaluated = _view(lab, answer.json()["id"])
    assert evaluated["status"] == "scored", evaluated["errors"]
    assert sorted(evaluated["scores"]) == ["extractive_summarization",
                                          "factuality_classification"]
    recorded = evaluated["evaluation"]
    assert recorded["predict"]["kind"] == "encoder" and recorded["profile"] == "roberta-large"
    assert recorded["predict"]["tasks"]["factuality_classification"]["max_input_tokens"] == 512
    assert recorded["cost"]["generated_tokens"] == 0
    assert recorded["model_card"].startswith("# tiny RoBERTa")
    inputs, run = tmp_path / "inputs", tmp_path / "run"
    _write_inputs(lab, inputs)
    code, _, err = sumbench(capsys, "predict", "--model", encoders, "--profile",
                            "roberta-large", "--tasks", "FAC", "EXT", "--data", inputs,
                            "--variant", "all", "--split", "test", "--out", run,
                            "--device", "cpu")
    assert code == 0, err
    assert _scored_run_files(lab, run)["scores"] == evaluated["scores"]


def _encoder_variant(encoders: Path, name: str, change) -> str:
    """A copy of the exported encoders (team/<name>), changed by `change(folder)`."""
    folder = encoders.parent / name
    if not folder.exists():
        shutil.copytree(encoders, folder)
        change(folder)
    return f"team/{name}"


def _linked_task(folder: Path) -> None:
    shutil.rmtree(folder / "extractive_summarization")
    (folder / "extractive_summarization").symlink_to(folder / "factuality_classification")


def _pickled_task(folder: Path) -> None:
    (folder / "extractive_summarization" / "pytorch_model.bin").write_bytes(b"pickle")


def _headless_task(folder: Path) -> None:
    (folder / "factuality_classification" / "sumbench_head.json").unlink()


def _adapter_task(folder: Path) -> None:
    (folder / "factuality_classification" / "adapter_config.json").write_text("{}")


def _not_on_board(folder: Path) -> None:
    for task in ("factuality_classification", "extractive_summarization"):
        shutil.rmtree(folder / task)


@pytest.mark.parametrize("source, change, message", [
    ("team/tiny", None, "the folder holds no task folder (factuality_classification, "),
    ("FacebookAI/roberta-large", None, "a hub model holds no task folders"),
    ("linked-task", _linked_task, "extractive_summarization is not a folder (links are nev"),
    ("pickled-task", _pickled_task, "pickled weights (pytorch_model.bin) are never loaded"),
    ("headless-task", _headless_task, "factuality_classification: no sumbench_head.json"),
    ("adapter-task", _adapter_task, "factuality_classification: an encoder model is a full"),
])
def test_encoder_folders_the_server_may_not_load_are_refused_at_once(lab, encoders, source,
                                                                    change, message):
    if change is not None:
        source = _encoder_variant(encoders, source, change)
    answer = _submit(lab, evaluate=source, model=f"bad {source}", profile="roberta-large")
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert error["field"] == "evaluate" and message in error["message"]


def test_an_encoder_model_of_no_board_task_fails_naming_both(lab, encoders):
    source = _encoder_variant(encoders, "unsup-only", _not_on_board)
    answer = _submit(lab, evaluate=source, model="unsup only", profile="roberta-large")
    assert answer.status_code == 202, answer.text
    _drain(lab)
    view = _view(lab, answer.json()["id"])
    assert view["status"] == "failed"
    assert "holds unsupported_span_prediction, none of this board's tasks " \
        "(extractive_summarization, factuality_classification, fixing_factuality)" in \
        view["errors"][0]["message"]


def _scored_run_files(lab, run: Path) -> dict:
    """A run folder's prediction files submitted by the admin and scored: the entry's view."""
    files = [("files", (path.name, path.read_bytes()))
             for path in sorted((run / "predictions").glob("*.jsonl"))]
    sent = lab["client"].post("/api/v1/submissions", files=files, data={"model": "files"},
                              headers={"Authorization": f"Bearer {lab['tokens']['root']}"})
    assert sent.status_code == 202, sent.text
    _drain(lab)
    return _view(lab, sent.json()["id"])


def _write_inputs(lab, out: Path) -> None:
    """The board's public inputs as `sumbench leaderboard inputs` writes them."""
    answer = lab["client"].get("/api/v1/inputs/usb", params={"variant": "all"}).json()
    for task, records in answer["parts"].items():
        path = out / "all" / task / "test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize("source, message", [
    ("../models/team/tiny", "relative to the model root, without '..'"),
    ("/etc", "relative to the model root"),
    ("team/pickled", "pickled weights (pytorch_model.bin) are never loaded here"),
    ("team/outside", "tokenizer_config.json is a link: links are never followed"),
    ("linked/tiny", "is not a folder under the model root (links are never followed)"),
    ("no such thing!", "neither a folder under this instance's model root nor a hub model"),
])
def test_models_the_server_may_not_load_are_refused_at_once(lab, source, message):
    pickled = lab["models"] / "team" / "pickled"
    if not pickled.exists():
        shutil.copytree(lab["models"] / "team" / "tiny", pickled)
        (pickled / "pytorch_model.bin").write_bytes(b"pickle")
        outside = lab["models"] / "team" / "outside"
        shutil.copytree(lab["models"] / "team" / "tiny", outside)
        (outside / "tokenizer_config.json").unlink()
        (outside / "tokenizer_config.json").symlink_to("/etc/hostname")
        (lab["models"] / "linked").symlink_to(lab["models"] / "team")
    answer = _submit(lab, evaluate=source, model=f"bad {source}")
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert error["field"] == "evaluate" and message in error["message"]


def test_a_form_gives_files_or_a_model_not_both(lab):
    answer = lab["client"].post("/api/v1/submissions", data={
        "model": "both", "evaluate": "team/tiny"}, files=[("files", ("a.jsonl", b"{}\n"))],
        headers={"Authorization": f"Bearer {lab['tokens']['ada']}"})
    assert answer.status_code == 422
    assert "one of the two" in answer.json()["errors"][0]["message"]
    assert _submit(lab, model="neither").status_code == 422
    answer = _submit(lab, evaluate="team/tiny", profile="flan-t5-huge", model="profiled")
    assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "profile"


@pytest.mark.parametrize("setting, folder, reason", [
    ({}, "broken", "model.safetensors is not a valid safetensors file"),
    ({"evaluate_seconds": 1}, "slow", "timed out after 1 s"),
    ({"evaluate_memory_bytes": 20 << 20}, "big", "ran out of memory"),
])
@pytest.mark.slow
def test_a_model_that_cannot_be_evaluated_ends_failed_with_the_reason(lab, setting, folder,
                                                                      reason):
    from leaderboard.service.settings import load_settings, save_settings

    source = _copy_model(lab, folder)
    if folder == "broken":
        (lab["models"] / source / "model.safetensors").write_bytes(b"not a safetensors file")
    before = load_settings(lab["database"])
    answer = _submit(lab, evaluate=source, model=f"fails {reason}")
    assert answer.status_code == 202, answer.text
    try:
        _drain(lab, **setting)
    finally:
        save_settings(lab["database"], before)
    view = _view(lab, answer.json()["id"])
    assert view["status"] == "failed" and reason in view["errors"][0]["message"]
    with lab["database"].session() as session:
        job = session.scalars(select(Job).filter_by(submission_id=view["id"])).one()
    assert (job.state, job.attempts) == ("failed", 1)  # not retried: it would fail again


def test_workers_take_the_kinds_they_are_given(lab):
    from benchmark.commands.leaderboard import JOB_KINDS
    from leaderboard.service import jobs

    assert JOB_KINDS == jobs.JOB_KINDS
    answer = _submit(lab, evaluate=_copy_model(lab, "kinds"), model="kinds")
    assert answer.status_code == 202, answer.text
    scoring_only = Worker(lab["database"], kinds=("score", "analyse"))
    assert scoring_only.drain() == 0
    with lab["database"].session() as session:
        assert session.get(Submission, answer.json()["id"]).status == "queued"
        session.get(Submission, answer.json()["id"]).deleted = True  # leave it unevaluated


@pytest.mark.slow
def test_a_killed_workers_evaluation_is_taken_over_and_finishes_once(lab, capsys):
    """`submit --evaluate` to a server without workers; a worker evaluating it is SIGKILLed
    (its evaluation process dies with it); after its lease another worker evaluates, scores
    and analyses it, once. `leaderboard inputs` writes what the model was run on."""
    import psutil

    db = lab["url"].removeprefix("sqlite:///")
    with LeaderboardServer(db, "--no-worker", "--model-root", str(lab["models"])) as server:
        code, out, err = sumbench(capsys, "leaderboard", "submit", "--server", server.url,
                                  "--token", lab["tokens"]["ada"], "--name", "killed",
                                  "--evaluate", _copy_model(lab, "drill"))
        assert code == 0, err
        submission = json.loads(out)["id"]
        code, out, err = sumbench(capsys, "leaderboard", "inputs", "--server", server.url,
                                  "--out", lab["root"] / "cli-inputs")
        assert code == 0 and sorted(p.name for p in (lab["root"] / "cli-inputs" / "all")
                                    .iterdir()) == sorted(TASKS)
        worker = subprocess.Popen(sumbench_command(
            "leaderboard", "worker", "--db", db, "--kinds", "evaluate", "--lease", "2",
            "--model-root", str(lab["models"]), "--device", "cpu"),
            env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_for(lab, submission, "evaluating")
            children = _children(psutil, worker.pid)  # its evaluation process is running
        finally:
            worker.kill()
            worker.wait()
        assert children and psutil.wait_procs(children, timeout=10)[1] == []  # died too
        wait_for_lapsed_leases(lab["database"], submission)  # its lease runs out
        taker = subprocess.run(sumbench_command(
            "leaderboard", "worker", "--db", db, "--once", "--model-root",
            str(lab["models"]), "--device", "cpu"), env=child_env(), capture_output=True,
            text=True, timeout=600)
        assert taker.returncode == 0, taker.stderr[-2000:]
    view = _view(lab, submission)
    assert view["status"] == "scored" and view["analysed"]
    with lab["database"].session() as session:
        assert len(session.scalars(select(Score).filter_by(submission_id=submission)).all()) == 1
        jobs = session.scalars(select(Job).filter_by(submission_id=submission)).all()
    assert sorted(job.kind for job in jobs) == ["analyse", "evaluate", "score"]


def _children(psutil, pid: int, timeout: float = 60) -> list:
    """The process's children, once it has one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if children:
            return children
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child in {timeout} s")


def _wait_for(lab, submission: int, status: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lab["database"].session() as session:
            if session.get(Submission, submission).status == status:
                return
        time.sleep(0.1)
    raise AssertionError(f"submission {submission} never reached {status}")
