"""Bad input (issue 10, part B): each case gives one error line naming the file, line, field
or option at fault, an exit code other than 0, no traceback, and leaves nothing partial
behind. The command-line cases are one row each of CLI_CASES: the argv (with {placeholders}
filled from the `workspace` fixture, tests/benchmark/conftest.py), the expected message
fragment and the exit code."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers import files_under, sumbench

PRED = "factuality_classification.jsonl"
REPO = Path(__file__).resolve().parents[2]


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
     "--device: training device must be auto, cpu, cuda or (one process) cuda:N; got 'mps'",
     2),
    ("train-device", ["train", "--tasks", "FAC", "--out", "{out}", "--device", "mps"],
     "--device: training device must be auto, cpu, cuda or (one process) cuda:N; got 'mps'",
     2),
    # --- non-finite or out-of-range numbers
    ("learning-rate-inf", ["run", "--tasks", "FAC", "--out", "{out}", "--learning-rate", "inf"],
     "argument --learning-rate: expected a finite number, got 'inf'", 2),
    ("learning-rate-negative", ["run", "--tasks", "FAC", "--out", "{out}",
                                "--learning-rate=-1e-4"],
     "argument --learning-rate: must be > 0", 2),
    ("alpha-nan", ["qapyramid", "normalize", "--scores", "s", "--summaries", "s",
                   "--references", "r", "--alpha", "nan"],
     "argument --alpha: expected a finite number, got 'nan'", 2),
    ("scu-share-range", ["pyramid", "--pyramid", "d", "--units", "mix-by-example", "--presence",
                         "human", "--scu-share", "1.5"],
     "argument --scu-share: must be in [0, 1]", 2),
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
    ("meta-eval-key-given-twice", ["meta-eval", "--pyramid", "{pyrxsum}", "--metric",
                                   "{dup_metric}"],
     "{dup_metric}, field 'bart': given twice in one JSON object", 2),
    ("missing-model", ["predict", "--model", "{tmp}/no-model", "--tasks", "FAC", "--data",
                       "{data}", "--out", "{out}"], "model path {tmp}/no-model does not exist", 2),
    ("truncated-safetensors", ["predict", "--model", "{truncated_model}", "--tasks", "FAC",
                               "--data", "{data}", "--out", "{out}"],
     "a weights file is damaged or incomplete (Error while deserializing header", 2),
    ("non-sqlite-cache", ["pyramid", "--pyramid", "{pyrxsum}", "--units", "scus", "--presence",
                          "chat", "--model", "m", "--cache", "{a_file}"],
     "cache {a_file} is not a sumbench cache (SQLite: file is not a database)", 2),
    ("cache-is-a-folder", ["pyramid", "--pyramid", "{pyrxsum}", "--units", "scus", "--presence",
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
    ("meta-eval-one-system", ["meta-eval", "--pyramid", "{pyrxsum}", "--metric", "rouge1_recall",
                              "--systems", "{one_system}"],
     "all systems: 1 system(s) ({one_system}); correlations across systems need at least 2",
     2),
]


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
        (["pyramid", "--pyramid", data, "--units", "scus", "--presence", "lexical", "--out",
          data / "SCUs.txt"], f"--out {data / 'SCUs.txt'} is a file inside the --pyramid folder "
                              f"{data}: writing there would replace an input"),
        (["pyramid", "--pyramid", data, "--units", "scus", "--presence", "lexical", "--out",
          tmp_path], f"--out {tmp_path}: is a folder; give the output file's name"),
        (["meta-eval", "--pyramid", data, "--metric", files["metric.json"], "--out",
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
    code, _, err = sumbench(capsys, "meta-eval", "--pyramid", data, "--metric", "rouge1_recall",
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
    from trainers.models.model_loading import load_failure

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
                            tmp_path / "out", "--variants", "companies")
    assert code == 0
    assert "warning: " in err and "1 duplicate document(s) in companies/train" in err
    assert "1 document(s) in both train and test: companies/doc7_2.json" in err
    info = json.loads((tmp_path / "out" / "build_info.json").read_text())
    assert len(info["warnings"]) == 2


@pytest.mark.slow
def test_a_failed_run_does_not_block_its_own_retry(workspace, tmp_path, capsys):
    model = tmp_path / "model"
    args = ["run", "--mode", "finetune", "--training", "none", "--model", model, "--tasks",
            "FAC", "--data", workspace["data"], "--out", tmp_path / "run", "--batch-size", "4",
            "--max-new-tokens", "4"]
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

