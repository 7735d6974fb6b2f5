"""`sumbench experiment transfer|fractions|labels|collect` end to end on a synthetic
six-domain corpus with a tiny T5: matrix shapes, a cell equal to a standalone `sumbench run`,
resume without recomputation, plans run elsewhere and collected, bad input refused early."""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from benchmark.cli import main
from tasks.plumbing.errors import DataError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _common(corpus, out: Path, *extra) -> list[str]:
    return ["--raw", str(corpus["raw"]), "--model", str(corpus["model"]), "--profile", "tiny",
            "--lora", "--max-steps", "2", "--early-stopping", "none", "--max-new-tokens", "6",
            "--out", str(out), *extra]


def _transfer_args(corpus, out: Path, *extra) -> list[str]:
    return ["experiment", "transfer", *_common(corpus, out), "--tasks", "FAC,COMP",
            "--domains", "biographies,companies", "--train-docs", "3", "--val-docs", "1",
            "--test-docs", "2", "--full-domain", "companies", "--bootstrap", "20", *extra]


@pytest.fixture(scope="module")
def transfer(corpus):
    out = corpus["root"] / "transfer"
    assert main(_transfer_args(corpus, out)) == 0
    return out, json.loads((out / "transfer.json").read_text())


@pytest.mark.slow
def test_transfer_matrix_shape_outputs_and_subsamples(transfer):
    out, result = transfer
    rows, columns = ["biographies", "companies", "companies-full"], \
        ["biographies", "companies", "landmarks"]
    assert result["rows"] == rows and result["columns"] == columns
    assert list(result["matrix"]) == rows
    assert all(list(result["matrix"][row]) == columns for row in rows)
    assert set(result["matrix"]["biographies"]["companies"]) == {
        "factuality_classification", "multisentence_compression"}
    assert result["delta"]["companies"]["companies"] == 0.0
    assert result["delta"]["biographies"]["landmarks"] is None  # test-only: no in-domain cell
    assert result["ci95"]["companies"]["biographies"]["factuality_classification"]
    companies = result["subsample"]["companies"]
    assert companies["train"]["requested"] == 3 and len(companies["train"]["ids"]) == 3
    assert all(doc.startswith("companies/") for doc in companies["train"]["ids"])
    assert result["subsample"]["companies-full"]["train"]["requested"] is None
    assert result["subsample"]["companies-full"]["test"]["ids"] == companies["test"]["ids"]
    assert any("test articles" in note for note in result["shortfalls"])
    assert result["provenance"]["git"] and result["spec"]["counts"] == {
        "train": 3, "validation": 1, "test": 2}
    for name in ("transfer_heatmap.png", "transfer_deltas.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG")
    summary = (out / "summary.md").read_text()
    assert "| train \\ test | biographies | companies | landmarks |" in summary
    plan = [json.loads(line) for line in (out / "plan.jsonl").read_text().splitlines()]
    assert len(plan) == 3 + 3 * 3
    assert plan[1]["needs"] == ["train/biographies"] and plan[1]["kind"] == "cell"


@pytest.mark.slow
def test_a_cell_equals_a_standalone_run(transfer, tmp_path):
    out, result = transfer
    plan = {job["name"]: job for job in map(json.loads,
                                           (out / "plan.jsonl").read_text().splitlines())}
    argv = list(plan["cell/biographies/companies"]["argv"])
    argv[argv.index("--out") + 1] = str(tmp_path / "standalone")
    assert shlex.split(plan["cell/biographies/companies"]["command"])[1:] == \
        plan["cell/biographies/companies"]["argv"]
    assert main(argv) == 0
    standalone = json.loads((tmp_path / "standalone" / "results.json").read_text())
    cell = json.loads((out / "cells" / "biographies" / "companies" / "results.json").read_text())
    assert standalone["scores"] == cell["scores"]
    # the cell's provenance names its own command, not `sumbench experiment transfer ...`
    assert cell["provenance"]["command"] == \
        ["sumbench", *plan["cell/biographies/companies"]["argv"]]
    assert {task: scores["headline"] for task, scores in cell["scores"].items()} == \
        result["matrix"]["biographies"]["companies"]
    assert main(["score", *[str(out / "cells" / "biographies" / "companies" / entry["path"])
                            for entry in cell["predictions"].values()]]) == 0


@pytest.mark.slow
def test_resume_recomputes_nothing_and_gives_identical_numbers(transfer, corpus, capsys):
    out, result = transfer
    stamps = {path: path.stat().st_mtime_ns for path in out.rglob("results.json")}
    stamps.update({path: path.stat().st_mtime_ns for path in out.rglob("train_result.json")})
    assert main(_transfer_args(corpus, out, "--resume")) == 0
    again = json.loads((out / "transfer.json").read_text())
    assert {job["status"] for job in again["jobs"].values()} == {"reused"}
    assert all(path.stat().st_mtime_ns == stamp for path, stamp in stamps.items())
    assert again["matrix"] == result["matrix"] and again["subsample"] == result["subsample"]
    interrupted = out / "cells" / "companies" / "landmarks" / "results.json"
    interrupted.unlink()  # as if the run stopped before this cell finished
    assert main(_transfer_args(corpus, out, "--resume")) == 0
    resumed = json.loads((out / "transfer.json").read_text())
    assert resumed["jobs"]["cell/companies/landmarks"]["status"] == "done"
    assert sum(job["status"] == "reused" for job in resumed["jobs"].values()) == 11
    assert resumed["matrix"] == result["matrix"]
    capsys.readouterr()
    assert main(_transfer_args(corpus, out)) == 2  # without --resume the folder is refused
    assert "pass --resume" in capsys.readouterr().err
    assert main(_transfer_args(corpus, out, "--resume", "--seed", "5")) == 2
    err = capsys.readouterr().err
    assert "the experiment was started with other settings" in err
    assert "\n  settings.seed: 0 -> 5\n" in err and "batch_size" not in err
    # the prediction batch size never changes a number: resuming with another is accepted
    assert main(_transfer_args(corpus, out, "--resume", "--batch-size", "3")) == 0
    spec = json.loads((out / "experiment.json").read_text())
    assert spec["settings"]["batch_size"] == 3
    again = json.loads((out / "transfer.json").read_text())
    assert {job["status"] for job in again["jobs"].values()} == {"reused"}
    assert again["matrix"] == result["matrix"]
    # so is another device (each job records where it ran), and an experiment.json written
    # before the setting existed (its jobs ran on auto)
    del spec["settings"]["device"]
    (out / "experiment.json").write_text(json.dumps(spec))
    assert main(_transfer_args(corpus, out, "--resume", "--device", "cpu")) == 0
    assert json.loads((out / "experiment.json").read_text())["settings"]["device"] == "cpu"
    plan = [json.loads(line) for line in (out / "plan.jsonl").read_text().splitlines()]
    assert all(job["argv"][job["argv"].index("--device") + 1] == "cpu"
               for job in plan if job["kind"] in ("train", "cell"))
    again = json.loads((out / "transfer.json").read_text())
    assert {job["status"] for job in again["jobs"].values()} == {"reused"}


@pytest.mark.slow
def test_plan_then_collect_after_an_interrupted_run(corpus, tmp_path, capsys):
    out = tmp_path / "planned"
    args = ["experiment", "fractions", *_common(corpus, out), "--tasks", "FAC",
            "--fractions", "0.5,1.0", "--seeds", "0,1", "--plan"]
    assert main(args) == 0
    plan = [json.loads(line) for line in (out / "plan.jsonl").read_text().splitlines()]
    assert [job["name"] for job in plan][:2] == ["train/fraction-0.5-seed-0",
                                                "cell/fraction-0.5-seed-0"]
    assert not (out / "fractions.json").exists() and not (out / "models").exists()
    for index in (1, 2, 3):  # the cluster ran all but the last cell
        assert main(["experiment", "job", str(out), str(index), "--kind", "train"]) == 0
        assert main(["experiment", "job", str(out), str(index), "--kind", "cell"]) == 0
    assert main(["experiment", "job", str(out), "4", "--kind", "train"]) == 0
    assert main(["experiment", "job", str(out), "5", "--kind", "train"]) == 2
    capsys.readouterr()
    assert main(["experiment", "status", str(out)]) == 0  # nothing failed; one not run
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "8 jobs: 7 done, 1 not run"
    assert lines[-2].split() == ["cell/fraction-1-seed-1", "not", "run"]
    assert main(["experiment", "collect", str(out)]) == 1  # one cell is missing
    assert capsys.readouterr().err.splitlines()[-1] == (
        "sumbench experiment: 1 of 8 jobs have not finished (1 not run yet), first: "
        "cell/fraction-1-seed-1; run them with 'sumbench experiment job OUT N --kind K' "
        "(plan.jsonl), then collect again")
    partial = json.loads((out / "fractions.json").read_text())
    assert partial["jobs"]["cell/fraction-1-seed-1"] == {"status": "skipped", "log": None,
                                                         "error": "not run yet"}
    assert "cell/fraction-1-seed-1: skipped (not run yet)" in (out / "summary.md").read_text()
    assert partial["scores"]["factuality_classification"]["1"]["values"][1] is None
    assert main(plan[-1]["argv"]) == 0
    assert main(["experiment", "collect", str(out)]) == 0
    result = json.loads((out / "fractions.json").read_text())
    entry = result["scores"]["factuality_classification"]["0.5"]
    assert len(entry["values"]) == 2 and entry["mean"] is not None
    assert entry["spread"] is not None
    small = result["articles"]["fraction-0.5-seed-0"]["factuality_classification"]
    full = result["articles"]["fraction-1-seed-0"]["factuality_classification"]
    assert set(small) < set(full)  # nested
    assert (out / "fractions.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_labels_experiment_rows_and_heuristic_reports(corpus, tmp_path):
    out = tmp_path / "labels"
    args = ["experiment", "labels", *_common(corpus, out), "--tasks", "EVEXT,FAC,FIX",
            "--human-fractions", "1.0,0.5", "--evidence", "rougeL", "--corruption", "factcc"]
    assert main(args) == 0
    result = json.loads((out / "labels.json").read_text())
    assert result["rows"] == ["human 1", "human 0.5", "heuristic rougeL+factcc"]
    assert set(result["scores"]["human 1"]) == {"evidence_extraction",
                                                 "factuality_classification",
                                                 "fixing_factuality"}
    report = result["heuristic_data"]["heuristic rougeL+factcc"]
    assert 0 <= report["evidence_agreement_with_human"]["precision"] <= 1
    assert "unknown" in report["corruption_agreement_with_human"]
    assert (out / "labels.png").is_file() and "heuristic rougeL+factcc" in (
        out / "summary.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["transfer", "--domains", "biographies,moon"], "unknown domain 'moon'"),
    (["transfer", "--domains", "biographie"], "unknown domain 'biographie': the data has "
     "biographies, companies, disasters, landmarks, schools; did you mean 'biographies'?"),
    (["transfer", "--domains", "all"], "unknown domain 'all'"),
    (["fractions", "--fractions", "0.5,0.5000001"], "--fractions: 0.5 and 0.5000001 both read "
     "0.5 (names keep 6 significant digits): give distinct fractions"),
    (["fractions", "--fractions", "0.5", "--seeds=-1"], "--seeds must be >= 0; got [-1]"),
    (["labels", "--human-fractions", "0.1,0.1000000001"], "both read 0.1"),
    (["fractions", "--profile", "nope"], "unknown fine-tuning profile 'nope'"),
    (["fractions", "--set", "learning_rate=nan"], "learning_rate"),
    (["fractions", "--set", "bogus_field=1"], "bogus_field"),
    (["fractions", "--tasks", "qa_generation"], "qa_generation not of the usb suite"),
    (["fractions", "--model", "./no-such-model"], "model path ./no-such-model does not exist"),
    (["transfer", "--domains", "landmarks"], "has no train split"),
    (["transfer", "--full-domain", "schools", "--domains", "biographies"],
     "--full-domain schools is not one of --domains"),
    (["fractions", "--device", "mps"], "--device: training device must be auto, cpu, cuda "
     "or (one process) cuda:N; got 'mps'"),
    (["fractions", "--fractions", "0,0.5"], "fractions must be in (0, 1]"),
    (["fractions", "--fractions", "1.5"], "fractions must be in (0, 1]"),
    (["fractions", "--fractions", "a"], "comma-separated numbers"),
    (["labels", "--tasks", "ABS"], "heuristic labels exist for"),
    (["labels", "--evidence", "superpal"], "needs --superpal-model"),
])
def test_bad_input_is_refused_before_training(corpus, tmp_path, capsys, extra, message):
    out = tmp_path / "bad"
    code = main(["experiment", extra[0], *_common(corpus, out), *extra[1:]])
    assert code == 2 and message in capsys.readouterr().err
    assert not out.exists()  # nothing half made blocks the corrected command
    out.mkdir()  # an empty folder given: it stays, empty
    assert main(["experiment", extra[0], *_common(corpus, out), *extra[1:]]) == 2
    assert out.is_dir() and not any(out.iterdir())


def test_collect_names_the_damaged_file_of_a_plan_or_a_job(corpus, tmp_path, capsys):
    """collect used to end in a traceback on a damaged plan line or job output."""
    out = tmp_path / "damaged"
    assert main(["experiment", "fractions", *_common(corpus, out), "--tasks", "FAC",
                 "--fractions", "1.0", "--plan"]) == 0
    plan = (out / "plan.jsonl").read_text()
    train_out = Path(next(job["out"] for job in map(json.loads, plan.splitlines())
                          if job["kind"] == "train"))
    train_out.mkdir(parents=True)
    for text, message in (("garbage", "train_result.json:1: malformed JSON"),
                          ("[1]", "train_result.json: expected a JSON object, got array")):
        (train_out / "train_result.json").write_text(text)
        capsys.readouterr()
        assert main(["experiment", "collect", str(out)]) == 2
        assert message in capsys.readouterr().err
    (out / "plan.jsonl").write_text(plan + '{"name": 3}\n')
    assert main(["experiment", "collect", str(out)]) == 2
    assert (f"plan.jsonl:{len(plan.splitlines()) + 1}, field 'kind': missing field"
            in capsys.readouterr().err)


def test_counts_below_one_are_refused(corpus, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["experiment", "transfer", *_common(corpus, tmp_path / "x"), "--train-docs", "0"])
    assert "must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_cells_are_submitted_to_a_leaderboard(corpus, tmp_path, capsys):
    """--submit pushes every finished cell to a leaderboard whose gold is the same data."""
    from leaderboard.service.auth import create_token
    from leaderboard.service.db import Database
    from leaderboard.service.init import initialise
    from tasks.usb.derive import build_task_datasets

    from servers import LeaderboardServer

    gold = tmp_path / "gold"
    build_task_datasets(corpus["raw"], gold, variants=["all"], progress=False)
    db = str(tmp_path / "lb.sqlite")
    # a random tiny model writes FAC lists of other lengths than 1: score them officially
    initialise(db, gold=str(gold), settings={"n_resamples": "20", "strict_lengths": "false"},
               computed_rows=False)
    token = create_token(Database(db), "experimenter")
    out = tmp_path / "submitted"
    with LeaderboardServer(db) as server:
        code = main(["experiment", "fractions", *_common(corpus, out), "--tasks", "FAC",
                     "--fractions", "1.0", "--submit", server.url, "--token", token])
        assert code == 0
        err = capsys.readouterr().err
        assert "submitted cell/fraction-1-seed-0: {" in err and "'status': 'queued'" in err


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_in_one_job_stops_the_whole_experiment(monkeypatch, tmp_path, capsys, signum):
    """One Ctrl-C (or Slurm's SIGTERM) stops the experiment: the job's 130/143 is raised
    again, so the later jobs do not run and `sumbench experiment` exits 130/143."""
    import os
    import signal
    import time

    import benchmark.commands.tasks as tasks_command
    from benchmark.cli import Terminated, sigterm_as_interrupt
    from benchmark.experiments.jobs import Job, run_jobs

    def signalled(args):
        os.kill(os.getpid(), getattr(signal, signum))  # handled in this (the main) thread
        time.sleep(10)
        raise AssertionError("the signal did not stop the job")

    monkeypatch.setattr(tasks_command, "run", signalled)
    jobs = [Job(f"data/{name}", "data", ("tasks",), str(tmp_path / name)) for name in "ab"]
    with sigterm_as_interrupt(), pytest.raises(KeyboardInterrupt) as caught:
        run_jobs(jobs, tmp_path)
    assert isinstance(caught.value, Terminated) == (signum == "SIGTERM")
    assert (tmp_path / "logs" / "data__a.log").is_file()
    assert not (tmp_path / "logs" / "data__b.log").exists()
    how = "terminated (SIGTERM)" if signum == "SIGTERM" else "interrupted"
    assert f"sumbench tasks: {how}; finished work is kept" in \
        (tmp_path / "logs" / "data__a.log").read_text()


def test_collect_refuses_a_moved_plan_and_a_cell_result_of_another_job(transfer, tmp_path,
                                                                       capsys):
    """The plan names absolute folders: collecting a copy read the original's outputs; and a
    results.json copied from another cell was collected as this cell's."""
    from benchmark.experiments.jobs import PLAN_FILE, check_cell_results, read_plan

    out, _ = transfer
    copy = Path(shutil.copytree(out, tmp_path / "moved"))
    capsys.readouterr()
    assert main(["experiment", "collect", str(copy)]) == 2
    assert (f"{copy / PLAN_FILE}: job train/biographies writes to {out / 'models'}/"
            f"biographies, outside {copy}: the plan was made for another folder"
            in capsys.readouterr().err)
    assert main(["experiment", "job", str(copy), "1"]) == 2  # it would train into `out`
    assert "the plan was made for another folder" in capsys.readouterr().err
    link = tmp_path / "link"  # the same folder by another path (a mount, a symlink): fine
    link.symlink_to(out)
    from benchmark.experiments.jobs import within
    assert within(Path(str(link / "models" / "biographies")), out)
    assert not within(copy / "models", out)
    (tmp_path / "a-file").write_text("x")
    assert main(["experiment", "collect", str(tmp_path / "a-file")]) == 2
    assert f"OUT {tmp_path / 'a-file'} is a file; give a folder" in capsys.readouterr().err
    cells = {job.name: job for job in read_plan(out / PLAN_FILE) if job.kind == "cell"}
    own = cells["cell/biographies/biographies"]
    check_cell_results(own, Path(own.out) / "results.json")  # its own: fine
    for other, field in (("cell/biographies/companies", "spec.variant"),
                         ("cell/companies/biographies", "spec.model")):
        with pytest.raises(DataError) as caught:
            check_cell_results(cells[other], Path(own.out) / "results.json")
        assert caught.value.field == field and "made by another command" in str(caught.value)


def test_a_plan_may_name_a_model_path_that_exists_only_where_jobs_run(corpus, tmp_path):
    """Planned on a login node for a path on the cluster's disks; running here refuses it."""
    args = ["experiment", "fractions", *_common(corpus, tmp_path / "plan"), "--tasks", "FAC",
            "--fractions", "1.0", "--model", "/cluster/models/t5"]
    assert main([*args, "--plan"]) == 0
    plan = (tmp_path / "plan" / "plan.jsonl").read_text()
    assert '"--model", "/cluster/models/t5"' in plan
