"""Bad input and faults (issue 10, part B): each case gives one error line naming the file,
line, field or option at fault, an exit code other than 0, no traceback, and leaves nothing
partial behind. The command-line cases are one row each of CLI_CASES: the argv (with
{placeholders} filled from the `workspace` fixture), the expected message fragment and the
exit code. Faults that need a server, a second process or a resource limit follow the table."""
from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import files_under, sumbench
from tests.servers import free_port

PRED = "factuality_classification.jsonl"
REPO = Path(__file__).resolve().parents[1]

CLI_CASES = [
    # --- invalid UTF-8 in any JSONL/TXT input
    ("utf8-predictions", ["score", "{bad_utf8}"],
     "{bad_utf8}:2: not UTF-8 text (invalid start byte at byte 13 of the line)", 2),
    ("utf8-task-data", ["predict", "--model", "{model}", "--tasks", "FAC", "--data",
                        "{bad_data}", "--out", "{out}"],
     "all/factuality_classification/test.jsonl:1: not UTF-8 text", 2),
    ("utf8-split-file", ["data", "build", "--raw", "{bad_raw}", "--out", "{out}"],
     "splits/companies/test.txt:2: not UTF-8 text", 2),
    # --- counts, steps and sizes
    ("limit-negative", ["predict", "--model", "{model}", "--tasks", "FAC", "--out", "{out}",
                        "--limit", "-1"], "argument --limit: must be >= 1, got -1", 2),
    ("limit-zero", ["predict", "--model", "{model}", "--tasks", "FAC", "--out", "{out}",
                    "--limit", "0"], "argument --limit: must be >= 1, got 0", 2),
    ("batch-size-zero", ["predict", "--model", "{model}", "--tasks", "FAC", "--out", "{out}",
                         "--batch-size", "0"], "argument --batch-size: must be >= 1, got 0", 2),
    ("beams-zero", ["predict", "--model", "{model}", "--tasks", "FAC", "--out", "{out}",
                    "--num-beams", "0"], "argument --num-beams: must be >= 1, got 0", 2),
    ("max-steps-zero", ["train", "--tasks", "FAC", "--out", "{out}", "--max-steps", "0"],
     "argument --max-steps: must be >= 1, got 0", 2),
    ("bootstrap-negative", ["score", "{pred}", "--bootstrap", "-5"],
     "argument --bootstrap: must be >= 0, got -5", 2),
    ("seed-negative", ["score", "{pred}", "--seed", "-1"], "argument --seed: must be >= 0", 2),
    ("bootstrap-too-large", ["score", "{pred}", "--bootstrap", "1000000000000"],
     "argument --bootstrap: must be at most 1,000,000, got 1,000,000,000,000 (each resample "
     "re-aggregates every record)", 2),
    ("qa-batch-zero", ["qapyramid", "auto", "--dataset", "{pred}", "--qa-model", "m",
                       "--presence", "lexical", "--qa-batch-size", "0"],
     "argument --qa-batch-size: must be >= 1, got 0", 2),
    # --- devices, refused before a model or data loads
    ("predict-device", ["predict", "--model", "{tmp}/no-model", "--tasks", "FAC", "--out",
                        "{out}", "--device", "gpu"],
     "argument --device: must be auto, cpu, cuda, cuda:N, mps or xpu, got 'gpu'", 2),
    ("predict-device-index", ["predict", "--model", "{tmp}/no-model", "--tasks", "FAC",
                              "--out", "{out}", "--device", "cuda:01"],
     "argument --device: must be auto, cpu, cuda, cuda:N, mps or xpu, got 'cuda:01'", 2),
    ("predict-device-missing", ["predict", "--model", "{model}", "--tasks", "FAC", "--data",
                                "{data}", "--out", "{out}", "--device", "mps"],
     "device 'mps' was asked for but torch sees no mps device", 2),
    ("run-device", ["run", "--tasks", "FAC", "--out", "{out}", "--device", "cuda:x"],
     "argument --device: must be auto, cpu, cuda, cuda:N, mps or xpu, got 'cuda:x'", 2),
    ("run-training-device", ["run", "--tasks", "FAC", "--out", "{out}", "--model", "{model}",
                             "--device", "mps"],
     "training device must be auto, cpu, cuda or (one process) cuda:N; got 'mps'", 2),
    ("train-device", ["train", "--tasks", "FAC", "--out", "{out}", "--device", "mps"],
     "argument --device: training device must be auto, cpu, cuda or (one process) cuda:N; "
     "got 'mps'", 2),
    # --- non-finite or out-of-range numbers
    ("learning-rate-inf", ["run", "--tasks", "FAC", "--out", "{out}", "--learning-rate", "inf"],
     "argument --learning-rate: expected a finite number, got 'inf'", 2),
    ("learning-rate-negative", ["run", "--tasks", "FAC", "--out", "{out}",
                                "--learning-rate=-1e-4"],
     "argument --learning-rate: must be > 0", 2),
    ("alpha-nan", ["qapyramid", "normalize", "--scores", "s", "--summaries", "s",
                   "--references", "r", "--alpha", "nan"],
     "argument --alpha: expected a finite number, got 'nan'", 2),
    ("scu-share-range", ["pyramid", "--data", "d", "--units", "mixed", "--presence", "human",
                         "--scu-share", "1.5"], "argument --scu-share: must be in [0, 1]", 2),
    ("train-fraction-range", ["train", "--tasks", "FAC", "--out", "{out}", "--train-fraction",
                              "0"], "argument --train-fraction: must be in (0, 1], got 0", 2),
    ("lease-nan", ["leaderboard", "worker", "--db", "sqlite:///x.db", "--lease", "nan"],
     "argument --lease: expected a finite number", 2),
    ("set-nan", ["train", "--tasks", "FAC", "--data", "{data}", "--out", "{out}", "--profile",
                 "tiny", "--set", "learning_rate=nan", "--print-spec"],
     "field 'learning_rate' must be a finite number, got nan", 2),
    ("set-inf-grad-norm", ["train", "--tasks", "FAC", "--data", "{data}", "--out", "{out}",
                           "--profile", "tiny", "--set", "max_grad_norm=inf", "--print-spec"],
     "field 'max_grad_norm' must be a finite number, got inf", 2),
    ("spec-file-nan", ["train", "--tasks", "FAC", "--data", "{data}", "--out", "{out}",
                       "--profile", "tiny", "--spec", "{nan_spec}", "--print-spec"],
     "field 'warmup_ratio' must be a finite number, got nan", 2),
    # --- OS faults and paths
    ("out-is-a-file", ["predict", "--model", "{model}", "--tasks", "FAC", "--data", "{data}",
                       "--out", "{a_file}"], "--out {a_file} is a file; give a folder", 2),
    ("read-only-out", ["score", "{pred}", "--out", "/sys/sumbench-test/scores.json"],
     "/sys/sumbench-test", 1),
    ("read-only-out-folder", ["baseline", "--data", "{data}", "--tasks", "FAC", "--out",
                              "/sys/sumbench-out"],
     "sumbench baseline: error: cannot create sumbench-out here (", 1),  # EPERM or EACCES
    ("out-under-a-file", ["baseline", "--data", "{data}", "--tasks", "FAC", "--out",
                          "{a_file}/sub"],
     "sumbench baseline: error: a file stands where a folder is needed: {a_file}", 1),
    ("score-out-is-the-input", ["score", "{pred_copy}", "--out", "{pred_copy}"],
     "--out {pred_copy} is the prediction file {pred_copy}: writing there would replace it",
     2),
    ("score-out-is-a-folder", ["score", "{pred}", "--out", "{tmp}"],
     "--out {tmp}: is a folder; give the output file's name", 2),
    ("score-out-empty", ["score", "{pred}", "--out", ""], "--out needs a file name", 2),
    ("score-option-typo", ["score", "{pred}", "--bootstap", "5"],
     "sumbench score: error: unrecognized arguments: --bootstap 5; did you mean "
     "'--bootstrap'? (see 'sumbench score --help')", 2),
    ("nested-option-typo", ["leaderboard", "submit", "--chek", "{pred}"],
     "sumbench leaderboard submit: error: unrecognized arguments: --chek; did you mean "
     "'--check' or '--track'?", 2),
    ("option-before-its-command", ["--bogus", "tasks"],
     "sumbench: error: unrecognized arguments: --bogus (see 'sumbench --help')", 2),
    ("option-before-a-nested-command", ["leaderboard", "--chek", "status", "7", "--server",
                                        "http://127.0.0.1:9"],
     "sumbench leaderboard: error: unrecognized arguments: --chek (see 'sumbench "
     "leaderboard --help')", 2),
    ("extra-named-like-its-command", ["leaderboard", "status", "7", "leaderboard",
                                      "--server", "http://127.0.0.1:9"],
     "sumbench leaderboard status: error: unrecognized arguments: leaderboard (see", 2),
    ("unknown-options-at-two-levels", ["--bogus", "leaderboard", "submit", "--chek", "{pred}"],
     "sumbench: error: unrecognized arguments: --bogus (see 'sumbench --help')", 2),
    ("set-field-typo", ["train", "--tasks", "FAC", "--data", "{data}", "--out", "{out}",
                        "--profile", "tiny", "--set", "learnin_rate=0.1", "--print-spec"],
     "unknown spec field 'learnin_rate'; did you mean 'learning_rate'?", 2),
    ("score-json-too-deep", ["score", "{deep}"], "{deep}:2: JSON nested too deeply", 2),
    ("score-key-given-twice", ["score", "{dup_key}"], "{dup_key}:2, field 'prediction': given "
     "twice in one JSON object (which one is meant is ambiguous)", 2),
    ("meta-eval-key-given-twice", ["meta-eval", "--data", "{pyrxsum}", "--metric",
                                   "{dup_metric}"],
     "{dup_metric}, field 'bart': given twice in one JSON object", 2),
    ("missing-model", ["predict", "--model", "{tmp}/no-model", "--tasks", "FAC", "--data",
                       "{data}", "--out", "{out}"], "model path {tmp}/no-model does not exist", 2),
    ("truncated-safetensors", ["predict", "--model", "{truncated_model}", "--tasks", "FAC",
                               "--data", "{data}", "--out", "{out}"],
     "a weights file is damaged or incomplete (Error while deserializing header", 2),
    ("non-sqlite-cache", ["pyramid", "--data", "{pyrxsum}", "--units", "scus", "--presence",
                          "chat", "--model", "m", "--cache", "{a_file}"],
     "cache {a_file} is not a sumbench cache (SQLite: file is not a database)", 2),
    ("cache-is-a-folder", ["pyramid", "--data", "{pyrxsum}", "--units", "scus", "--presence",
                           "chat", "--model", "m", "--cache", "{tmp}"],
     "cache {tmp} is a folder; give a file path", 2),
    # --- data
    ("duplicate-documents-strict", ["data", "build", "--raw", "{dup_raw}", "--out", "{out}",
                                    "--strict"],
     "1 duplicate document(s) in companies/train: companies/doc7_0.json (line 3: listed "
     "again, line 1)", 2),
    ("train-test-overlap-strict", ["data", "build", "--raw", "{dup_raw}", "--out", "{out}",
                                   "--strict"],
     "companies: 1 document(s) in both train and test: companies/doc7_2.json", 2),
    # --- evaluators
    ("semi-auto-missing-output", ["qapyramid", "semi-auto", "--dataset", "{qa_missing}",
                                  "--presence", "lexical"],
     "example 'e2' has no output of system(s) 'B'", 2),
    ("meta-eval-one-system", ["meta-eval", "--data", "{pyrxsum}", "--metric", "rouge1_recall",
                              "--systems", "{one_system}"],
     "all systems: 1 system(s) ({one_system}); correlations across systems need at least 2",
     2),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, usb_fixture_dir, pyramid_data_dir) -> dict[str, str]:
    """The files the CLI cases point at (built once)."""
    from trainers.tiny import build_tiny_t5, build_tiny_tokenizer

    root = tmp_path_factory.mktemp("bad-input")
    good = (usb_fixture_dir / "predictions" / PRED).read_bytes().splitlines(keepends=True)
    (root / "bad.jsonl").write_bytes(good[0] + b'{"id": "x", \xff\xfe}\n')
    (root / "pred-copy.jsonl").write_bytes(b"".join(good))
    second = good[1].rstrip(b"\n")  # line 2 with a second "prediction"
    (root / "dup-key.jsonl").write_bytes(good[0] + second[:-1] + b', "prediction": [0.5]}\n')
    (root / "dup-metric.json").write_text('{"bart": {"a": 1}, "pegasus": {}, "bart": {}}')
    (root / "deep.jsonl").write_bytes(good[0] + b'{"id": ' + b"[" * 100_000 + b"]" * 100_000
                                      + b"}\n")
    data = shutil.copytree(usb_fixture_dir / "task_datasets", root / "data")
    (data / "all" / "factuality_classification" / "test.jsonl").write_bytes(b"\xc3\x28\n")
    bad_raw = shutil.copytree(usb_fixture_dir / "raw", root / "bad-raw")
    split = bad_raw / "splits" / "companies" / "test.txt"
    split.write_bytes(split.read_bytes().rstrip(b"\n") + b"\ncompanies/\xff.json\n")
    dup_raw = shutil.copytree(usb_fixture_dir / "raw", root / "dup-raw")
    splits = dup_raw / "splits" / "companies"
    train = (splits / "train.txt").read_text().split()
    test = (splits / "test.txt").read_text().split()
    (splits / "train.txt").write_text("\n".join([*train, test[0], train[0]]) + "\n")
    assert len(train) == 1 and test[0] == "companies/doc7_2.json"
    tokenizer = build_tiny_tokenizer(["Yes No fact summary document"] * 4)
    build_tiny_t5(tokenizer, save_dir=root / "model")
    truncated = shutil.copytree(root / "model", root / "truncated-model")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    (root / "a-file").write_text("not a folder, not a database\n")
    (root / "nan-spec.json").write_text('{"warmup_ratio": NaN}')
    from tests.test_qapyramid_cli import DATASET
    missing = json.loads(json.dumps(DATASET))
    del missing[1]["system_outputs"]["B"]
    (root / "qa-missing.jsonl").write_text("".join(json.dumps(r) + "\n" for r in missing))
    pyrxsum = pyramid_data_dir / "pyrxsum"
    one_system = sorted(p.stem for p in (pyrxsum / "summaries").iterdir())[0]
    return {"bad_utf8": str(root / "bad.jsonl"), "bad_data": str(data), "data":
            str(usb_fixture_dir / "task_datasets"), "bad_raw": str(bad_raw),
            "dup_raw": str(dup_raw), "model": str(root / "model"),
            "truncated_model": str(truncated), "a_file": str(root / "a-file"),
            "nan_spec": str(root / "nan-spec.json"), "qa_missing": str(root / "qa-missing.jsonl"),
            "pred": str(usb_fixture_dir / "predictions" / PRED), "pyrxsum": str(pyrxsum),
            "one_system": one_system, "tmp": str(root),
            "pred_copy": str(root / "pred-copy.jsonl"), "deep": str(root / "deep.jsonl"),
            "dup_key": str(root / "dup-key.jsonl"), "dup_metric": str(root / "dup-metric.json")}


@pytest.mark.parametrize("argv, message, code", [case[1:] for case in CLI_CASES],
                         ids=[case[0] for case in CLI_CASES])
def test_bad_input_gives_one_line_and_leaves_nothing(workspace, tmp_path, capsys, argv,
                                                     message, code):
    fill = {**workspace, "out": str(tmp_path / "out")}
    before = files_under(Path(workspace["tmp"]))
    try:
        got, _, err = sumbench(capsys, *[part.format(**fill) for part in argv])
    except SystemExit as stop:  # argparse refuses the option itself
        got, err = stop.code, capsys.readouterr().err
    assert got == code, err
    assert message.format(**fill) in err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()  # nothing partial
    assert files_under(Path(workspace["tmp"])) == before


def test_no_out_file_replaces_an_input_and_a_folder_is_refused_first(workspace, tmp_path,
                                                                      capsys, pyramid_data_dir,
                                                                      monkeypatch):
    """Every command writing one --out FILE refuses one of its inputs (or a file inside an
    input folder) before any work, leaving every byte as it was."""
    data = shutil.copytree(pyramid_data_dir / "pyrxsum", tmp_path / "pyrxsum")
    files = {name: tmp_path / name for name in ("metric.json", "judgments.json", "scores.json",
                                                "summaries.jsonl", "references.jsonl",
                                                "dataset.jsonl", "pred.jsonl")}
    for path in files.values():
        path.write_text("{}\n")
    cases = [
        (["pyramid", "--data", data, "--units", "scus", "--presence", "lexical", "--out",
          data / "SCUs.txt"], f"--out {data / 'SCUs.txt'} is a file inside the --data folder "
                              f"{data}: writing there would replace an input"),
        (["pyramid", "--data", data, "--units", "scus", "--presence", "lexical", "--out",
          tmp_path], f"--out {tmp_path}: is a folder; give the output file's name"),
        (["meta-eval", "--data", data, "--metric", files["metric.json"], "--out",
          files["metric.json"]], f"is the --metric file {files['metric.json']}: writing there "
                                 f"would replace it"),
        (["qapyramid", "human", "--judgments", files["judgments.json"], "--out",
          files["judgments.json"]], "is the --judgments file"),
        (["qapyramid", "normalize", "--scores", files["scores.json"], "--summaries",
          files["summaries.jsonl"], "--references", files["references.jsonl"], "--out",
          files["references.jsonl"]], "is the --references file"),
        (["qapyramid", "semi-auto", "--dataset", files["dataset.jsonl"], "--presence",
          "lexical", "--out", files["dataset.jsonl"]], "is the --dataset file"),
        (["score", files["pred.jsonl"], "--data", workspace["data"], "--out",
          Path(workspace["data"]) / "all" / "factuality_classification" / "test.jsonl"],
         "is a file inside the --data folder"),
    ]
    for argv, message in cases:
        before = files_under(tmp_path)
        code, _, err = sumbench(capsys, *argv)
        assert code == 2 and "error: --out " in err and message in err, err
        assert len(err.strip().splitlines()) == 1
        assert files_under(tmp_path) == before
    # an earlier output written there as --out is no input: the same command runs again
    data = shutil.copytree(workspace["data"], tmp_path / "data")
    pred = Path(workspace["pred"])
    argv = ["score", str(pred), "--data", str(data), "--out", str(data / "scores.json")]
    monkeypatch.setattr(sys, "argv", ["sumbench", *argv])  # what its provenance records
    for _ in range(2):
        code, _, err = sumbench(capsys, *argv)
        assert code == 0, err
    build_info = data / "build_info.json"  # the folder's own file, with provenance too
    build_info.write_text(json.dumps({"provenance": {"command": [
        "sumbench", "data", "build", "--raw", "raw", "--out", str(data)]}}))
    code, _, err = sumbench(capsys, "score", pred, "--data", data, "--out", build_info)
    assert code == 2 and "is a file inside the --data folder" in err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyramid").mkdir()  # --human's default is a name, not this folder
    (tmp_path / "pyramid" / "notes.txt").write_text("mine")
    code, _, err = sumbench(capsys, "meta-eval", "--data", data, "--metric", "rouge1_recall",
                            "--out", "pyramid/notes.txt")
    assert code == 2 and "--out" not in err  # refused as no Pyramid folder, not for --out


def test_model_names_a_new_user_mistypes_are_one_line(workspace, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()  # so runs/tiny-modle may be a typo of a local model
    code, _, err = sumbench(capsys, "predict", "--model", "runs/tiny-modle", "--tasks", "FAC",
                            "--data", workspace["data"], "--out", "out")  # tried on the hub
    assert code == 2 and err.startswith("sumbench predict: error: cannot load model "
                                        "runs/tiny-modle: ")
    assert err.endswith("; nor is there a local model folder runs/tiny-modle (the folder runs/ "
                        "exists)\n") and len(err.splitlines()) == 1
    code, _, err = sumbench(capsys, "run", "--model", "no-org/no-model", "--mode", "fewshot",
                            "--fewshot-backend", "hf-causal", "--tasks", "FAC", "--data",
                            workspace["data"], "--out", "few")  # the hub is offline here
    assert code == 2 and err.startswith("sumbench run: error: cannot load model "
                                        "no-org/no-model: ") and len(err.splitlines()) == 1


def test_load_failures_say_damaged_only_when_the_library_says_so(tmp_path, monkeypatch):
    from trainers.model_loading import load_failure

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    named = load_failure("runs/truncated-ckpt", OSError(
        "runs/truncated-ckpt is not a local folder and is not a valid model identifier"))
    assert str(named) == ("cannot load model runs/truncated-ckpt: runs/truncated-ckpt is not a "
                          "local folder and is not a valid model identifier; nor is there a "
                          "local model folder runs/truncated-ckpt (the folder runs/ exists)")
    damaged = load_failure("runs/m", OSError("Error while deserializing header: bad"))
    assert "a weights file is damaged or incomplete" in str(damaged)


def test_serve_reports_a_server_that_did_not_start_in_one_line(capsys, monkeypatch, tmp_path):
    import uvicorn

    import benchmark.commands.leaderboard_serve as leaderboard_command

    code, _, _ = sumbench(capsys, "leaderboard", "init", "--db", tmp_path / "lb.sqlite")
    assert code == 0

    def fails_to_start(*args, **kwargs):
        raise SystemExit(3)  # what uvicorn.run does when its server did not start

    monkeypatch.setattr(uvicorn, "run", fails_to_start)
    monkeypatch.setattr(leaderboard_command, "check_address", lambda host, port: None)
    code, _, err = sumbench(capsys, "leaderboard", "serve", "--db", tmp_path / "lb.sqlite",
                            "--port", "8999")
    assert code == 1 and err.splitlines()[-1] == (
        "sumbench leaderboard: error: the server could not start on 127.0.0.1:8999 (its log "
        "above says why)")


def test_duplicates_and_overlap_are_warnings_without_strict(workspace, tmp_path, capsys):
    code, _, err = sumbench(capsys, "data", "build", "--raw", workspace["dup_raw"], "--out",
                            tmp_path / "out", "--variant", "companies")
    assert code == 0
    assert "warning: " in err and "1 duplicate document(s) in companies/train" in err
    assert "1 document(s) in both train and test: companies/doc7_2.json" in err
    info = json.loads((tmp_path / "out" / "build_info.json").read_text())
    assert len(info["warnings"]) == 2


# ---------------------------------------------------------------- one writer per --out
@contextlib.contextmanager
def live_lock(out, command: str):
    """The lock of `out` held by another live process (its pid) for the block."""
    from tasks.locks import _process_start, lock_path

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock_path(out).write_text(json.dumps({
            "pid": owner.pid, "host": socket.gethostname(), "command": command,
            "process_start": _process_start(owner.pid), "since": "2026-11-24T10:00:00"}))
        yield owner.pid
    finally:
        owner.kill()
        owner.wait()


def test_a_second_process_on_the_same_out_refuses_and_a_stale_lock_is_replaced(
        workspace, tmp_path, capsys):
    from tasks.locks import lock_path

    out = tmp_path / "run"
    with live_lock(out, "predict") as owner:
        code, _, err = sumbench(capsys, "predict", "--model", workspace["model"], "--tasks",
                                "FAC", "--data", workspace["data"], "--out", out)
        assert code == 2 and not out.exists()
        assert (f"sumbench predict: error: {out} is in use by 'sumbench predict' (pid "
                f"{owner} on {socket.gethostname()}, since 2026-11-24T10:00:00)") in err
    # the owner is gone: its lock is stale, replaced with a note, and released at the end
    code, _, err = sumbench(capsys, "predict", "--model", tmp_path / "no-model", "--tasks",
                            "FAC", "--data", workspace["data"], "--out", out)
    assert code == 2 and f"removing the stale lock {lock_path(out)}" in err
    assert "does not exist" in err and not lock_path(out).exists()


def test_a_writable_out_under_a_read_only_parent_runs_without_the_lock(tmp_path, capsys,
                                                                        monkeypatch):
    """A writable volume mounted under a read-only folder (the lock file cannot be written
    beside it): the command runs unlocked, with a note; a folder that does not exist yet is
    still an error naming it."""
    import errno as errnos

    import tasks.locks as locks

    def read_only(folder, command, owner=None):
        raise OSError(errnos.EROFS, "Read-only file system", str(locks.lock_path(folder)))

    monkeypatch.setattr(locks, "acquire", read_only)
    mounted = tmp_path / "volume"
    mounted.mkdir()
    with locks.output_lock(mounted, "experiment fractions") as held:
        assert held is None
    assert (f"sumbench: note: running without a lock on {mounted}: its parent folder is not "
            f"writable (Read-only file system)") in capsys.readouterr().err
    with pytest.raises(OSError) as caught:
        with locks.output_lock(tmp_path / "new", "baseline"):
            pass
    assert caught.value.strerror == "cannot create new here (Read-only file system)"
    assert caught.value.filename == str(tmp_path)


def test_another_hosts_lock_is_stale_once_its_owner_stops_refreshing_it(tmp_path, capsys):
    """A lock from another host (a cluster's shared file system) cannot be checked by pid: it
    counts as alive while its owner refreshes it, and is replaced once it has not been
    refreshed for STALE_AFTER_SECONDS (a job killed with SIGKILL used to block the folder until
    someone deleted the lock by hand)."""
    import tasks.locks as locks

    out = tmp_path / "run"
    path = locks.lock_path(out)
    path.write_text(json.dumps({"pid": 4242, "host": "node-7", "command": "train",
                                "since": "2026-11-25T10:00:00"}))
    now = time.time()
    os.utime(path, (now - 30, now - 30))
    with pytest.raises(locks.FolderInUseError) as caught:
        with locks.output_lock(out, "predict"):
            pass
    message = re.sub(r"refreshed 3\d s ago", "refreshed 3x s ago", str(caught.value))
    assert (f"{out} is in use by 'sumbench train' (pid 4242 on node-7, since "
            f"2026-11-25T10:00:00; refreshed 3x s ago, stale after 600 s without)") in message
    stale = now - locks.STALE_AFTER_SECONDS - 5
    os.utime(path, (stale, stale))
    with locks.output_lock(out, "predict", heartbeat_seconds=0.05) as held:
        note = re.sub(r"for 6[01]\d s", "for 6xx s", capsys.readouterr().err)
        assert f"removing the stale lock {path} (owner pid 4242 on node-7 has not refreshed " \
               f"it for 6xx s)" in note
        assert json.loads(held.read_text())["pid"] == os.getpid()
        os.utime(held, (stale, stale))  # the heartbeat refreshes it again
        deadline = time.monotonic() + 10
        while time.time() - held.stat().st_mtime > 60 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert time.time() - held.stat().st_mtime < 60
    assert not path.exists()
    beats = [t for t in threading.enumerate() if t.name == "sumbench-lock-heartbeat"]
    assert beats == []  # stopped with the lock


def test_a_stale_lock_is_removed_only_while_it_is_still_the_stale_one(tmp_path, capsys):
    """Two processes that both found the same stale lock: the slower one used to remove the
    lock the faster one had just taken, and both held the folder. Removal now happens while
    holding the breaker (flock) and only if the lock is still the file judged stale; a
    process releases only its own lock (same pid on another host, or an earlier process of
    the pid, is not it)."""
    import fcntl

    import tasks.locks as locks

    path = locks.lock_path(tmp_path / "run")
    stale = {"pid": 4242, "host": "node-7", "command": "train", "since": "2026-11-25"}
    fresh = {"pid": 4243, "host": "node-8", "command": "train", "since": "2026-11-25"}
    old = time.time() - locks.STALE_AFTER_SECONDS - 60
    path.write_text(json.dumps(stale))
    os.utime(path, (old, old))
    judged = locks._identity(path)
    path.unlink()
    path.write_text(json.dumps(fresh))  # taken by another process since it was judged
    locks._remove_stale(path, stale, judged)
    assert json.loads(path.read_text()) == fresh
    path.write_text(json.dumps(stale))
    os.utime(path, (old, old))
    judged = locks._identity(path)
    breaker = path.with_name(path.name + ".break")
    holder = os.open(breaker, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is removing it: this one waits
    locks._remove_stale(path, stale, judged)
    assert path.exists()
    os.close(holder)  # as when that process dies: the kernel lets go of the breaker
    locks._remove_stale(path, stale, judged)
    assert not path.exists() and not breaker.exists()
    assert "owner pid 4242 on node-7 has not refreshed it" in capsys.readouterr().err
    mine = {"pid": os.getpid(), "host": "node-9", "command": "train"}
    path.write_text(json.dumps(mine))
    locks.release(path)  # the same pid on another host is another process
    assert path.exists()
    path.write_text(json.dumps({**mine, "host": socket.gethostname(), "process_start": "1"}))
    locks.release(path)  # an earlier process of this pid
    assert path.exists()
    assert locks._create(path, {"pid": 1}) is False  # and creation never replaces a lock
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no spare files


def test_locks_on_file_systems_without_links_or_with_leftovers(tmp_path, monkeypatch, capsys):
    """Hard links missing (ENOSYS on sshfs), a parent that cannot be written holding a live
    lock, a breaker and a spare file left by killed processes, and an empty lock whose owner
    is still writing it (file systems without hard links)."""
    import errno as errnos

    import tasks.locks as locks

    def no_links(source, target):
        raise OSError(errnos.ENOSYS, "Function not implemented")

    out = tmp_path / "run"
    path = locks.lock_path(out)
    with monkeypatch.context() as patched:
        patched.setattr(locks.os, "link", no_links)
        with locks.output_lock(out, "train") as held:
            assert json.loads(held.read_text())["command"] == "train"
    assert not path.exists()

    live = {**locks._owner_record("slow writer")}  # this process, as another taking
    def lock_appears_then_no_room(spare, owner):  # another process made the lock meanwhile
        path.write_text(json.dumps(live))
        raise PermissionError(errnos.EACCES, "Permission denied", str(spare))
    with monkeypatch.context() as patched:
        patched.setattr(locks, "_write_spare", lock_appears_then_no_room)
        with pytest.raises(locks.FolderInUseError, match="in use by 'sumbench slow writer'"):
            locks.acquire(out, "train")
    path.unlink()

    dead = _dead_pid()
    old = time.time() - 3600
    path.write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    breaker = path.with_name(path.name + ".break")
    breaker.write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    spare = path.with_name(f"{path.name}.node-3.77.88.new")
    spare.write_text("{}")
    os.utime(spare, (old, old))
    started = time.monotonic()
    with locks.output_lock(out, "train"):
        assert time.monotonic() - started < 5  # no waiting for the breaker to age
        assert not breaker.exists() and not spare.exists()
    assert "removing the stale lock" in capsys.readouterr().err

    monkeypatch.setattr(locks, "EMPTY_GRACE_SECONDS", 2.0)
    path.write_text("")  # created, its owner not written yet
    threading.Timer(0.3, lambda: path.write_text(json.dumps(live))).start()
    with pytest.raises(locks.FolderInUseError, match="in use by 'sumbench slow writer'"):
        locks.acquire(out, "train")
    path.write_text("")
    old = time.time() - 60
    os.utime(path, (old, old))  # an empty lock nobody wrote for a minute is stale
    assert locks.acquire(out, "train") == path
    locks.release(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


RACER = """
import json, os, sys, time
from pathlib import Path
from tasks.locks import FolderInUseError, output_lock
out, start = Path(sys.argv[1]), Path(sys.argv[2])
while not start.exists():
    time.sleep(0.001)
try:
    with output_lock(out, "race"):
        holders = out.parent / "holders"
        mine = holders / str(os.getpid())
        mine.touch()
        time.sleep(0.3)
        others = [p.name for p in holders.iterdir() if p != mine]
        mine.unlink()
        print(json.dumps({"held": True, "others": others}))
except FolderInUseError:
    print(json.dumps({"held": False}))
"""


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


STALE_LOCKS = {  # what a racer finds where the lock is, all of it left long ago
    "another host's": lambda: json.dumps({"pid": 4242, "host": "node-7", "command": "train"}),
    "a dead process's": lambda: json.dumps({"pid": _dead_pid(), "host": socket.gethostname()}),
    "a damaged": lambda: "{not json",
    "an empty": lambda: "",
}


@pytest.mark.parametrize("kind", sorted(STALE_LOCKS))
def test_processes_racing_for_a_stale_lock_never_hold_it_together(tmp_path, kind):
    """Eight processes find the same stale lock at once (a requeued cluster array): whoever
    takes the folder holds it alone. Five rounds per kind (a damaged or empty lock let two
    processes in about one round in 40)."""
    import tasks.locks as locks

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for round_number in range(5):
        root = tmp_path / str(round_number)
        (root / "holders").mkdir(parents=True)
        out, start = root / "run", root / "start"
        path = locks.lock_path(out)
        path.write_text(STALE_LOCKS[kind]())
        old = time.time() - locks.STALE_AFTER_SECONDS - 60
        os.utime(path, (old, old))
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(start)],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True) for _ in range(8)]
        time.sleep(1.0)  # every racer is waiting at the start line
        start.touch()
        results = []
        for racer in racers:
            stdout, stderr = racer.communicate(timeout=120)
            assert racer.returncode == 0, stderr
            results.append(json.loads(stdout))
        held = [result for result in results if result["held"]]
        assert held and all(result["others"] == [] for result in held), (kind, results)
        assert sorted(p.name for p in root.iterdir()) == ["holders", "start"]


def test_a_zombie_owner_an_interrupt_and_a_vanishing_parent(tmp_path, monkeypatch):
    """A killed owner its parent has not reaped (a container without init) counted as alive;
    an interrupt right after the lock was linked in left it behind; a sibling command that
    removed the parent folder it had made, between this one's mkdir and its lock, failed
    this one."""
    import tasks.locks as locks

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = locks._process_start(child.pid)
    deadline = time.monotonic() + 30
    while (locks._proc_stat(child.pid) or ["?"])[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # exited, not reaped: a zombie
    owner = {"pid": child.pid, "host": socket.gethostname(), "process_start": started}
    assert not locks._owner_alive(owner, tmp_path / "none")
    child.wait()

    out = tmp_path / "run"
    real_link = os.link

    def link_then_interrupt(source, target):
        real_link(source, target)
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(locks.os, "link", link_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            with locks.output_lock(out, "train"):
                pass
    assert not locks.lock_path(out).exists()

    deep = tmp_path / "new" / "deeper" / "out0"
    real_acquire, calls = locks.acquire, []

    def sibling_cleans_up_first(folder, command, owner=None):
        calls.append(folder)
        if len(calls) == 1:
            (tmp_path / "new" / "deeper").rmdir()  # as the sibling's failed command does
        return real_acquire(folder, command, owner)

    monkeypatch.setattr(locks, "acquire", sibling_cleans_up_first)
    with locks.output_lock(deep, "train") as held:
        assert held.exists() and len(calls) == 2
    monkeypatch.undo()

    real_mkdir, made = Path.mkdir, []

    def removed_while_checked(self, *args, **kwargs):  # what mkdir says in that race
        made.append(self)
        if len(made) == 1:
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", removed_while_checked)
    with locks.output_lock(tmp_path / "other" / "out1", "train") as held:
        assert held.exists() and len(made) >= 2


def test_baseline_and_experiments_hold_their_out_folder_too(workspace, tmp_path, capsys):
    """Two `baseline` runs on one --out both exited 0 with one output silently replaced, and
    two experiments on one folder ran each other's jobs; `experiment job` (many at once on a
    cluster) takes no lock."""
    out = tmp_path / "shared-out"
    with live_lock(out, "experiment fractions") as owner:
        for argv in (("baseline", "--data", workspace["data"], "--tasks", "abs", "--out", out),
                     ("experiment", "fractions", "--data", workspace["data"], "--model", "m",
                      "--fractions", "0.5", "--plan", "--out", out),
                     ("experiment", "collect", out)):
            code, _, err = sumbench(capsys, *argv)
            assert code == 2 and not out.exists(), argv
            assert f"{out} is in use by 'sumbench experiment fractions' (pid {owner}" in err
        code, _, err = sumbench(capsys, "experiment", "job", out, "1")
        assert code == 2 and "in use" not in err  # refused for its missing plan instead


def test_stale_staging_folders_of_a_killed_process_are_removed(tmp_path):
    from tasks.atomic import atomic_directory

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.{dead.pid}.abc123.partial"
    live = tmp_path / f".out.{os.getpid()}.def456.partial"
    stale.mkdir()
    live.mkdir()
    with atomic_directory(tmp_path / "out") as staging:
        (staging / "x").write_text("x")
    assert not stale.exists() and live.exists()  # a live writer's staging folder stays
    assert (tmp_path / "out" / "x").read_text() == "x"


# ---------------------------------------------------------------- resource limits, signals
def _sumbench_process(*args, limit_bytes: int | None = None, env: dict | None = None):
    def limits():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.Popen([sys.executable, "-m", "benchmark", *map(str, args)], cwd=REPO,
                            preexec_fn=limits, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv", [["tasks"], ["score", "{pred}"]])
def test_a_closed_output_pipe_stops_quietly(usb_fixture_dir, argv):
    """`sumbench tasks | head -1`: the reader is gone before the output is written."""
    pred = str(usb_fixture_dir / "predictions" / PRED)
    read, write = os.pipe()
    os.close(read)  # no reader: every write to the pipe fails (EPIPE)
    try:
        process = subprocess.run([sys.executable, "-m", "benchmark",
                                  *[part.format(pred=pred) for part in argv]], cwd=REPO,
                                 stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert process.returncode == 141 and process.stderr == ""


def test_another_broken_pipe_is_reported_not_taken_for_a_closed_stdout():
    code = ("import sys, benchmark.cli as cli, benchmark.commands.tasks as tasks\n"
            "def broken(args):\n"
            "    raise BrokenPipeError(32, 'Broken pipe')  # e.g. a chat server's socket\n"
            "tasks.run = broken\n"
            "sys.exit(cli.main(['tasks']))\n")
    process = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                             text=True, timeout=300)
    assert (process.returncode, process.stderr) == (1, "sumbench tasks: error: Broken pipe\n")


def test_disk_full_is_one_line_and_leaves_no_output(usb_fixture_dir, tmp_path):
    process = _sumbench_process("data", "build", "--raw", usb_fixture_dir / "raw", "--out",
                                tmp_path / "out", limit_bytes=4000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    # the output folder is named (a full disk names no file), never the staging folder
    assert err.strip() == ("sumbench data: error: File too large (the disk or the file-size "
                           f"limit is full): {tmp_path / 'out'}")
    assert list(tmp_path.iterdir()) == []
    process = _sumbench_process("baseline", "--data", usb_fixture_dir / "task_datasets",
                                "--tasks", "all", "--out", tmp_path / "base", limit_bytes=4000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1 and err.strip() == (
        "sumbench baseline: error: File too large (the disk or the file-size limit is full): "
        f"{tmp_path / 'base' / 'predictions' / 'abstractive_summarization.jsonl'}")
    assert list(tmp_path.iterdir()) == []


class _TcpServer:
    """A raw TCP server on 127.0.0.1 (a free port) handing each connection to `handle`."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", free_port()))
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.handle(connection)

    def handle(self, connection):
        raise NotImplementedError


class _SilentServer(_TcpServer):
    """Accepts connections and never answers (a hung endpoint)."""

    def __init__(self):
        self.accepted, self.connections = threading.Event(), []
        super().__init__()

    def handle(self, connection):
        self.connections.append(connection)
        self.accepted.set()

    def close(self):
        for connection in self.connections:
            connection.close()
        self.socket.close()


@pytest.mark.parametrize("signum, code, how", [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "terminated (SIGTERM)"),  # Slurm's time limit, `timeout`
])
def test_sigint_and_sigterm_are_one_line_and_their_exit_code(pyramid_data_dir, tmp_path,
                                                             signum, code, how):
    server, process = _SilentServer(), None
    try:
        process = _sumbench_process(
            "pyramid", "--data", pyramid_data_dir / "pyrxsum", "--units", "scus", "--presence",
            "chat", "--model", "m", "--cache", tmp_path / "cache.sqlite", "--out",
            tmp_path / "scores.json",
            env={"OPENAI_BASE_URL": f"http://127.0.0.1:{server.port}/v1",
                 "OPENAI_API_KEY": "test"})
        assert server.accepted.wait(120), process.communicate()[1]
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        server.close()
        if process is not None and process.poll() is None:  # a failed test leaves none behind
            process.kill()
            process.wait()
    assert process.returncode == code
    assert err.strip().splitlines()[-1] == (
        f"sumbench pyramid: {how}; finished work is kept, run the same command again "
        "(with --resume where it has one) to continue")
    assert "Traceback" not in err and not (tmp_path / "scores.json").exists()


# ---------------------------------------------------------------- chat endpoint faults
def _raw_reply(kind: str) -> bytes:
    body = json.dumps({"choices": [{"message": {"content": "Yes"}}]}).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    return {
        "non-utf8": head + b"Content-Length: 6\r\n\r\n\xff\xfe\xfd{}\n",
        "truncated": head + b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body,
        "bad-status-line": b"HTTP/1.1 OOPS\r\n\r\n",
        "reset": b"",
        "html-page": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 34\r\n"
                     b"\r\n<html><body>Bad gateway</body></html>"[:120],
        "no-reply-text": head + b'Content-Length: 13\r\n\r\n{"choices":[]',
    }[kind]


def read_request(connection) -> bytes:
    """The whole HTTP request: headers, then Content-Length bytes of body. Closing a socket
    with request bytes still unread makes the kernel send a reset instead of the reply, so the
    client would see "connection reset" where the test wants the reply's own fault."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class _RawServer(_TcpServer):
    """Answers every request with the same raw bytes (or resets the connection)."""

    def __init__(self, reply: bytes):
        self.reply, self.requests = reply, 0
        super().__init__()

    def handle(self, connection):
        with connection:
            read_request(connection)
            self.requests += 1
            if not self.reply:  # reset: close with SO_LINGER 0
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                      b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            connection.sendall(self.reply)


@pytest.mark.parametrize("kind, reason", [
    ("non-utf8", "response body is not UTF-8"),
    ("truncated", "IncompleteRead"),
    ("bad-status-line", "BadStatusLine"),
    ("reset", "Connection"),
    ("html-page", "response body is an HTML page"),
    ("no-reply-text", "response body is not JSON"),
])
def test_chat_faults_are_retried_then_fail_with_a_reason(tmp_path, kind, reason):
    from trainers.chat_client import ChatClient, ChatError

    server = _RawServer(_raw_reply(kind))
    waits = []
    client = ChatClient(model="m", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k",
                        max_attempts=3, timeout_s=10, sleep=waits.append,
                        cache=tmp_path / "cache.sqlite")
    with pytest.raises(ChatError) as caught:
        client.complete([{"role": "user", "content": "hi"}])
    assert "failed after 3 attempts" in str(caught.value) and reason in str(caught.value)
    assert server.requests == 3 and waits == [1.0, 2.0]
    assert len(client.cache) == 0  # nothing cached


def test_retry_after_is_capped_and_logged(tmp_path):
    from trainers.chat_client import ChatClient, ChatError

    server = _RawServer(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3600\r\n"
                        b"Content-Length: 0\r\n\r\n")
    waits, logged = [], []
    client = ChatClient(model="m", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k",
                        max_attempts=2, sleep=waits.append, log=logged.append,
                        max_retry_after_s=5)
    with pytest.raises(ChatError, match="HTTP 429"):
        client.complete([{"role": "user", "content": "hi"}])
    assert waits == [5]
    assert logged == [f"http://127.0.0.1:{server.port}/v1/chat/completions asked to retry "
                      "after 3600 s; waiting 5 s (capped by max_retry_after_s=5)"]


# ---------------------------------------------------------------- checkpoints, fetch cache
def test_a_truncated_checkpoint_names_its_file(tmp_path):
    import torch

    from tasks.errors import SumbenchError
    from trainers.checkpoints import _torch_file

    path = tmp_path / "step-4" / "optimizer.pt"
    path.parent.mkdir()
    torch.save({"state": {}, "param_groups": []}, path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(SumbenchError, match=f"{path}: checkpoint file is missing, truncated "
                       f"or damaged .*; delete {path.parent} to resume"):
        _torch_file(path, "cpu")


def test_a_damaged_fetch_cache_is_extracted_again(data_dir, tmp_path):
    from tasks.usb.archive import fetch_archive
    from tests.test_loaders import LocalHub, make_archive

    hub = LocalHub(make_archive(tmp_path / "a.tar.gz", data_dir))
    first = fetch_archive(cache_dir=tmp_path / "cache", downloader=hub)
    victim = first.data_dir / "all" / "evidence_extraction" / "test.jsonl"
    expected = victim.read_bytes()
    victim.write_bytes(expected[:10])  # truncated by a full disk, say
    again = fetch_archive(cache_dir=tmp_path / "cache", downloader=hub)
    assert again.status == "repaired" and victim.read_bytes() == expected
    assert fetch_archive(cache_dir=tmp_path / "cache", downloader=hub).status == "cached"
    assert len(hub.calls) == 2


def test_a_failed_run_does_not_block_its_own_retry(workspace, tmp_path, capsys):
    model = tmp_path / "model"
    args = ["run", "--mode", "finetune", "--training", "none", "--model", model, "--tasks",
            "FAC", "--data", workspace["data"], "--out", tmp_path / "run", "--batch-size", "4"]
    code, _, err = sumbench(capsys, *args)
    assert code == 2 and "does not exist" in err
    shutil.copytree(workspace["model"], model)
    code, _, err = sumbench(capsys, *args)  # the same command again, no --resume
    assert code == 0, err
    assert "continuing the unfinished identical run" in err
    assert (tmp_path / "run" / "results.json").is_file()
    code, _, err = sumbench(capsys, *args)  # a finished run is still protected
    assert code == 2 and "already holds a run; pass --resume" in err


def test_scores_of_a_file_whose_name_is_not_utf8_are_written(usb_fixture_dir, tmp_path, capsys):
    name = os.fsdecode(b"pred-\xff.jsonl")  # a surrogate escape in Python's str
    shutil.copy(usb_fixture_dir / "predictions" / PRED, tmp_path / name)
    code, _, err = sumbench(capsys, "score", str(tmp_path / name), "--out",
                            str(tmp_path / "scores.json"))
    assert code == 0 and "Traceback" not in err
    written = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert written["_provenance"]["config"]["inputs"][0]["path"] == str(tmp_path / name)
