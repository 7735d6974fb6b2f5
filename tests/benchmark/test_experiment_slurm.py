"""The Slurm executor against a real single-node Slurm (tests/slurm/up.sh): an experiment
submitted as job arrays gives the same result as the local executor; a failed training job
cancels its cells, `status` names the failure and its log, and `submit` resumes what is left.

Needs root (the throwaway cluster's daemons) and the Debian packages (installed when
missing). Where no cluster can be started the tests skip with the reason; CI sets
SUMBENCH_REQUIRE_SLURM=1, and there they fail instead.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from benchmark.cli import main

from servers import free_port

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SCRIPTS = Path(__file__).resolve().parents[1] / "slurm"
SAME_KEYS = ("matrix", "average", "average_tasks", "delta", "delta_per_task", "null_reasons",
             "subsample", "rows", "columns", "tasks", "ci95", "missing_cells")


def _unavailable(reason: str):
    if os.environ.get("SUMBENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"SUMBENCH_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def slurm():
    """A Slurm cluster of its own for the module (SLURM_CONF set while it runs)."""
    if os.geteuid() != 0:
        _unavailable("starting a throwaway Slurm cluster needs root")
    if not shutil.which("slurmctld") and not shutil.which("apt-get"):
        _unavailable("no Slurm packages and no apt-get to install them")
    folder = tempfile.mkdtemp(prefix="sumbench-slurm-")
    started = subprocess.run(["bash", str(SCRIPTS / "up.sh"), folder, str(free_port()),
                              str(free_port())], capture_output=True, text=True, timeout=600)
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        _unavailable(f"no Slurm cluster could be started: {started.stderr.strip()[-600:]}")
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = f"{folder}/slurm.conf"
    yield folder
    subprocess.run(["bash", str(SCRIPTS / "down.sh"), folder], capture_output=True, timeout=60)
    shutil.rmtree(folder, ignore_errors=True)
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before


def _args(corpus, model: Path, out: Path, *extra, domains: str = "biographies,companies"
          ) -> list[str]:
    return ["experiment", "transfer", "--raw", str(corpus["raw"]), "--model", str(model),
            "--profile", "tiny", "--lora", "--max-steps", "1", "--early-stopping", "none",
            "--max-new-tokens", "4", "--tasks", "FAC,COMP", "--domains", domains,
            "--train-docs", "3", "--val-docs", "1", "--test-docs", "2", "--bootstrap", "10",
            "--device", "cpu", "--out", str(out), *extra]


@pytest.mark.slow
def test_slurm_arrays_give_the_local_result(slurm, corpus, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the jobs' torch threads, as here
    assert main(_args(corpus, corpus["model"], tmp_path / "local")) == 0
    assert main(_args(corpus, corpus["model"], tmp_path / "slurm", "--executor", "slurm",
                      "--wait", "--slurm-time", "00:30:00")) == 0
    local = json.loads((tmp_path / "local" / "transfer.json").read_text())
    cluster = json.loads((tmp_path / "slurm" / "transfer.json").read_text())
    for key in SAME_KEYS:
        assert cluster[key] == local[key], key
    assert {job["status"] for job in cluster["jobs"].values()} == {"done"}
    submitted = json.loads((tmp_path / "slurm" / "slurm.json").read_text())["submissions"]
    assert [entry["kind"] for entry in submitted] == ["train", "cell"]
    assert submitted[0]["tasks"] == {"1": "train/biographies", "2": "train/companies"}
    assert "--array=1-6" in submitted[1]["command"]
    assert f"--dependency=afterok:{submitted[0]['job_id']}" in submitted[1]["command"]
    assert "--time=00:30:00" in submitted[0]["command"]
    capsys.readouterr()
    assert main(["experiment", "status", str(tmp_path / "slurm")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "8 jobs: 8 done"
    # resuming a finished experiment submits nothing
    assert main(_args(corpus, corpus["model"], tmp_path / "slurm", "--executor", "slurm",
                      "--resume")) == 0
    assert "nothing to submit" in capsys.readouterr().err


@pytest.mark.slow
def test_a_failed_job_cancels_its_dependants_and_submit_resumes(slurm, corpus, tmp_path,
                                                                 capsys):
    model = shutil.copytree(corpus["model"], tmp_path / "model")
    out = tmp_path / "exp"
    assert main(_args(corpus, model, out, "--plan", domains="biographies")) == 0
    (model / "config.json").rename(model / "config.moved")   # every training job fails
    assert main(["experiment", "submit", str(out), "--wait"]) == 1
    capsys.readouterr()
    assert main(["experiment", "status", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    train = next(line for line in lines if line.startswith("train/biographies "))
    assert " failed " in train and "Slurm: FAILED" in train
    log = Path(train.split("log ")[-1])
    assert log.is_file() and "config.json" in log.read_text()
    cell = next(line for line in lines if line.startswith("cell/biographies/landmarks "))
    assert "Slurm: CANCELLED" in cell
    assert lines[-1] == "3 jobs: 3 failed"
    (model / "config.moved").rename(model / "config.json")
    assert main(["experiment", "submit", str(out), "--wait"]) == 0
    submitted = json.loads((out / "slurm.json").read_text())["submissions"]
    assert [entry["kind"] for entry in submitted] == ["train", "cell", "train", "cell"]
    result = json.loads((out / "transfer.json").read_text())
    assert all(value is not None for tests in result["average"].values()
               for value in tests.values())


@pytest.mark.parametrize("extra, message", [
    (["--plan", "--executor", "slurm"], "--plan writes the plan and runs nothing"),
    (["--wait"], "--wait and the --slurm-* options need --executor slurm"),
    (["--slurm-gres", "gpu:1"], "--wait and the --slurm-* options need --executor slurm"),
    (["--executor", "slurm", "--submit", "http://127.0.0.1:9"], "--submit with --executor "
     "slurm needs --wait"),
])
def test_executor_options_that_contradict_each_other(corpus, tmp_path, capsys, extra,
                                                     message):
    assert main(_args(corpus, corpus["model"], tmp_path / "x", *extra)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
