"""`sumbench score` and tasks.scoring: official numbers end to end, errors, bootstrap."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmark.cli import main
from tasks import get_task, scoring
from tasks.identity import record_digest
from tasks.metrics import rouge
from tasks.metrics.bootstrap import bootstrap, percentile_interval, resample_indices
from tasks.plumbing.io import read_jsonl

HEADLINE = {"abstractive_summarization": "gmean", "multisentence_compression": "gmean",
            "topicbased_summarization": "gmean", "fixing_factuality": "exactmatch",
            "extractive_summarization": "auc", "factuality_classification": "auc",
            "evidence_extraction": "f1", "unsupported_span_prediction": "f1"}
ABS_RECORD = {"task": "abstractive_summarization", "id": "doc1", "prediction": "a b c",
              "output_string": "a b d"}


@pytest.fixture(scope="module")
def expected(usb_fixture_dir) -> dict:
    return json.loads((usb_fixture_dir / "expected_scores.json").read_text())


@pytest.fixture(scope="module")
def prediction_files(usb_fixture_dir) -> list[str]:
    return sorted(str(path) for path in (usb_fixture_dir / "predictions").glob("*.jsonl"))


def write_lines(path: Path, lines: list) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines))
    return str(path)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["score", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def expected_headline(task: str, scores: dict) -> float:
    kind = HEADLINE[task]
    if kind == "gmean":
        return 100 * (scores["rouge1"] * scores["rouge2"] * scores["rougel"]) ** (1 / 3)
    return 100 * scores[kind]


# ---- end to end --------------------------------------------------------------------------
def test_cli_reproduces_official_scores(capsys, tmp_path, prediction_files, expected):
    out = tmp_path / "scores.json"
    code, stdout, _ = run_cli(capsys, *prediction_files, "--out", str(out))
    assert code == 0
    printed, written = json.loads(stdout), json.loads(out.read_text())
    provenance = written.pop("_provenance")
    assert printed == written and "_provenance" not in printed
    assert set(written) == set(expected) == set(HEADLINE)
    for task, official in expected.items():
        for key, value in official.items():
            assert written[task][key] == pytest.approx(value, abs=1e-9), (task, key)
        assert written[task]["headline"] == pytest.approx(
            expected_headline(task, official), abs=1e-7), task
        assert written[task]["length_mismatches"] == 0
    assert written["factuality_classification"]["n_records"] == 14
    assert written["evidence_extraction"]["n_records"] == 13
    assert provenance["config"]["bootstrap"] == 0
    assert provenance["seeds"] == {"bootstrap": 0, "rouge": 0}
    assert provenance["config"]["rouge_aggregate"] == "mean"
    assert written["abstractive_summarization"]["rouge_aggregate"] == "mean"
    assert len(provenance["config"]["inputs"]) == 8
    assert stdout == json.dumps(printed, indent=1, sort_keys=True) + "\n"


def test_score_records_accepts_aliases_and_ignores_workers(usb_fixture_dir, expected):
    records = read_jsonl(usb_fixture_dir / "predictions" / "multisentence_compression.jsonl")
    one = scoring.score_records({"COMP": [dict(r, task="COMP") for r in records]})
    rouge_min = rouge.PARALLEL_MIN_EXAMPLES
    try:
        rouge.PARALLEL_MIN_EXAMPLES = 1
        two = scoring.score_records({"multisentence_compression": records}, workers=2)
    finally:
        rouge.PARALLEL_MIN_EXAMPLES = rouge_min
    assert one == two
    assert one["multisentence_compression"]["rouge2"] == pytest.approx(
        expected["multisentence_compression"]["rouge2"], abs=1e-9)


def test_length_mismatches_are_counted_and_reported(capsys, tmp_path):
    lines = [{"task": "EXT", "id": "a", "labels": [1, 0, 1], "prediction": [0.9, 0.1]},
             {"task": "EXT", "id": "b", "labels": [0, 1], "prediction": [0.2, 0.7, 0.4]}]
    code, stdout, stderr = run_cli(capsys, write_lines(tmp_path / "ext.jsonl", lines))
    assert code == 0
    result = json.loads(stdout)["extractive_summarization"]
    assert result["length_mismatches"] == 2 and result["n_records"] == 2
    assert result["recall"] == pytest.approx(2 / 3)  # the padded third line of "a" is missed
    assert "2 predictions had the wrong length (truncated or zero-padded" in stderr
    fac = [{"task": "FAC", "id": "a", "summ_idx": 0, "label": label, "prediction": [0.9, 0.1]}
           for label in (0, 1)]
    code, stdout, stderr = run_cli(capsys, write_lines(tmp_path / "fac.jsonl", fac))
    assert code == 0 and json.loads(stdout)["factuality_classification"]["auc"] == 0.5
    assert "2 predictions had the wrong length (scored 0 as officially)" in stderr


# ---- errors -------------------------------------------------------------------------------
@pytest.mark.parametrize("line, field, message", [
    (dict(ABS_RECORD, task="abstractive_sumarization"), "task", "did you mean"),
    ({k: v for k, v in ABS_RECORD.items() if k != "task"}, "task", "missing field"),
    ({k: v for k, v in ABS_RECORD.items() if k != "prediction"}, "prediction", "missing"),
    ({k: v for k, v in ABS_RECORD.items() if k != "output_string"}, "output_string", "missing"),
    (dict(ABS_RECORD, prediction=["a"]), "prediction", "expected a string"),
    ({"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "prediction": [1.5]},
     "prediction", "not a probability"),
    ({"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "prediction": [-0.1]},
     "prediction", "not a probability"),
    ({"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "prediction": ["0.3"]},
     "prediction", "not a number"),
    ({"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "prediction": 0.3},
     "prediction", "expected a list"),
])
def test_bad_records_name_file_line_and_field(capsys, tmp_path, line, field, message):
    path = write_lines(tmp_path / "pred.jsonl", [ABS_RECORD | {"id": "ok"}, line])
    out = tmp_path / "scores.json"
    code, stdout, stderr = run_cli(capsys, path, "--out", str(out))
    assert code == 2 and stdout == ""
    assert f"{path}:2" in stderr and f"field '{field}'" in stderr and message in stderr
    assert not out.exists()


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_probabilities_are_rejected(capsys, tmp_path, token):
    path = tmp_path / "fac.jsonl"
    path.write_text('{"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, '
                    f'"prediction": [{token}]}}\n')
    code, _, stderr = run_cli(capsys, str(path))
    assert code == 2 and f"{path}:1" in stderr and "not a probability" in stderr


def test_duplicates_name_both_places(capsys, tmp_path):
    first = write_lines(tmp_path / "a.jsonl", [ABS_RECORD, "", dict(ABS_RECORD, id="x")])
    code, _, stderr = run_cli(capsys, first, write_lines(tmp_path / "b.jsonl", [
        dict(ABS_RECORD, task="ABS", prediction="other")]))
    assert code == 2
    assert f"{tmp_path / 'b.jsonl'}:1" in stderr and f"first seen at {first}:1" in stderr
    code, _, stderr = run_cli(capsys, write_lines(tmp_path / "c.jsonl", [
        {"task": "FAC", "id": "d", "summ_idx": 0, "label": 0, "summary_sent": "s",
         "prediction": [0.4]},
        {"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "summary_sent": "t",
         "prediction": [0.4]},
        {"task": "FAC", "id": "d", "summ_idx": 0, "label": 1, "summary_sent": "t",
         "prediction": [0.2]}]))
    assert code == 2 and "c.jsonl:3" in stderr and "c.jsonl:2" in stderr


def test_an_item_scored_twice_is_a_duplicate_whatever_its_text(capsys, tmp_path,
                                                              usb_fixture_dir):
    """Identity is (id, summ_idx) plus FAC's label: a second copy of an item with an edited
    claim or summary sentence, or an item given both windowed and whole, is refused."""
    predictions = usb_fixture_dir / "predictions"
    evext = read_jsonl(predictions / "evidence_extraction.jsonl")
    fac = read_jsonl(predictions / "factuality_classification.jsonl")
    copies = {"evext.jsonl": evext + [dict(evext[0], claim=evext[0]["claim"] + " ")],
              "fac.jsonl": fac + [dict(fac[1], summary_sent="another sentence")]}
    for name, records in copies.items():
        code, _, stderr = run_cli(capsys, write_lines(tmp_path / name, records))
        assert code == 2 and f"{name}:{len(records)}" in stderr, stderr
        assert "duplicate record" in stderr and "summ_idx=0" in stderr
        assert "summ_idx='0'" not in stderr
    item = evext[0]
    windows = [{"task": item["task"], "id": item["id"], "summ_idx": 0, "sub_index": index,
                "input_lines": item["input_lines"][start:start + 4],
                "labels": [j - start for j in item["labels"] if start <= j < start + 4],
                "prediction": item["prediction"][start:start + 4]}
               for index, start in enumerate(range(0, len(item["input_lines"]), 4))]
    code, _, stderr = run_cli(capsys, write_lines(tmp_path / "mixed.jsonl", evext + windows))
    assert code == 2 and "duplicate record (evidence_extraction: id=" in stderr


def test_records_without_summ_idx_are_told_apart_by_their_text(capsys, tmp_path):
    records = [{"task": "FAC", "id": "d", "label": label, "summary_sent": text,
                "prediction": [0.3]} for label, text in ((0, "s"), (1, "t"), (0, "u"))]
    code, stdout, _ = run_cli(capsys, write_lines(tmp_path / "fac.jsonl", records))
    assert code == 0 and json.loads(stdout)["factuality_classification"]["n_records"] == 3
    code, _, stderr = run_cli(capsys, write_lines(tmp_path / "dup.jsonl", records + [
        dict(records[2], prediction=[0.9])]))
    assert code == 2 and "dup.jsonl:4" in stderr and "summary_sent='u'" in stderr


@pytest.mark.parametrize("changes, field, message", [
    ({"summ_idx": 0.0}, "summ_idx", "non-negative integer below 2**63, got 0.0"),
    ({"summ_idx": "0"}, "summ_idx", "got '0'"),
    ({"summ_idx": -1}, "summ_idx", "got -1"),
    ({"id": ["d"]}, "id", "expected a string, got array"),
    ({"task": None}, "task", "expected a task name, got null"),
])
def test_identity_fields_have_their_types_so_duplicates_cannot_hide(capsys, tmp_path, changes,
                                                                     field, message):
    record = {"task": "FAC", "id": "d", "summ_idx": 0, "label": 0, "summary_sent": "s",
              "prediction": [0.4]}
    path = write_lines(tmp_path / "fac.jsonl", [record, dict(record, **changes)])
    code, _, stderr = run_cli(capsys, path)
    assert code == 2 and f"{path}:2, field '{field}'" in stderr and message in stderr


def test_malformed_empty_and_missing_files(capsys, tmp_path):
    code, _, stderr = run_cli(capsys, write_lines(tmp_path / "bad.jsonl", [ABS_RECORD, "{oops"]))
    assert code == 2 and "bad.jsonl:2" in stderr and "malformed JSON" in stderr
    code, _, stderr = run_cli(capsys, write_lines(tmp_path / "empty.jsonl", []))
    assert code == 2 and "no prediction records" in stderr
    code, _, stderr = run_cli(capsys, str(tmp_path / "absent.jsonl"))
    assert code == 2 and "file not found" in stderr


def test_undefined_auc_is_null_listed_and_reported(capsys, tmp_path):
    lines = [{"task": "FAC", "id": str(i), "summ_idx": 0, "label": 0, "prediction": [0.5]}
             for i in range(3)]
    out = tmp_path / "scores.json"
    code, stdout, stderr = run_cli(capsys, write_lines(tmp_path / "fac.jsonl", lines),
                                   "--out", str(out))
    assert code == 0
    result = json.loads(stdout)["factuality_classification"]
    # 1 - 0.5 = 0.5 rounds to class 0 (half to even): every record is right, none positive
    assert result == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 1.0,
                      "auc": None, "headline": None, "undefined": ["auc"], "n_records": 3,
                      "length_mismatches": 0}
    assert '"auc": null' in stdout and "NaN" not in stdout
    assert json.loads(out.read_text())["factuality_classification"] == result
    assert ("sumbench score: factuality_classification: auc undefined: only one class in the "
            "labels (all 3 are 0); the headline is null") in stderr


def test_evext_with_only_evidence_lines_keeps_its_f1_headline(capsys, tmp_path):
    lines = [{"task": "EVEXT", "id": "a", "summ_idx": 0, "input_lines": ["x", "y"],
              "labels": [0, 1], "prediction": [0.9, 0.4]}]
    code, stdout, stderr = run_cli(capsys, write_lines(tmp_path / "evext.jsonl", lines))
    assert code == 0
    result = json.loads(stdout)["evidence_extraction"]
    assert result["f1"] == pytest.approx(2 / 3) and result["headline"] == pytest.approx(200 / 3)
    assert result["precision"] == 1.0 and result["recall"] == 0.5 and result["accuracy"] == 0.5
    assert result["auc"] is None and result["undefined"] == ["auc"]
    assert "evidence_extraction: auc undefined: only one class" in stderr
    assert "headline is null" not in stderr


def test_unsup_without_any_span_has_null_scores(capsys, tmp_path):
    lines = [{"task": "UNSUP", "id": "a", "summ_idx": 0, "summary": "a b .",
              "annotated_summary": "a b .", "prediction": "a b ."}]
    code, stdout, stderr = run_cli(capsys, write_lines(tmp_path / "unsup.jsonl", lines))
    assert code == 0
    result = json.loads(stdout)["unsupported_span_prediction"]
    assert [result[k] for k in ("precision", "recall", "f1", "headline")] == [None] * 4
    assert result["undefined"] == ["precision", "recall", "f1"]
    for key in ("precision", "recall", "f1"):
        assert (f"unsupported_span_prediction: {key} undefined: no spans in either the gold "
                f"or the predicted summaries") in stderr


def test_defined_metrics_report_nothing_undefined(capsys, prediction_files):
    code, stdout, stderr = run_cli(capsys, *prediction_files)
    assert code == 0 and "undefined" not in stderr
    assert all(result["undefined"] == [] for result in json.loads(stdout).values())


def test_bad_options_are_usage_errors(capsys, prediction_files):
    for option in (["--bootstrap", "-1"], ["--workers", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            main(["score", prediction_files[0], *option])
        assert exit_info.value.code == 2


# ---- bootstrap ------------------------------------------------------------------------------
@pytest.mark.slow
def test_bootstrap_is_seeded_and_keeps_point_estimates(capsys, prediction_files, expected):
    files = [p for p in prediction_files if "factuality" in p or "compression" in p]
    code, stdout, _ = run_cli(capsys, *files, "--bootstrap", "50", "--seed", "3")
    assert code == 0
    first = json.loads(stdout)
    _, again, _ = run_cli(capsys, *files, "--bootstrap", "50", "--seed", "3")
    _, other, _ = run_cli(capsys, *files, "--bootstrap", "50", "--seed", "4")
    assert json.loads(again) == first and json.loads(other) != first
    fac = first["factuality_classification"]
    assert fac["auc"] == pytest.approx(expected["factuality_classification"]["auc"], abs=1e-9)
    assert set(fac["ci95"]) == {"precision", "recall", "f1", "accuracy", "auc", "headline"}
    assert fac["bootstrap"] == {"resamples": 50, "seed": 3, "confidence": 0.95,
                                "undefined_resamples": dict.fromkeys(fac["ci95"], 0)}
    for low, high in fac["ci95"].values():
        assert 0 <= low <= high
    low, high = first["multisentence_compression"]["ci95"]["rouge1"]
    assert low < first["multisentence_compression"]["rouge1"] < high


@pytest.mark.slow
def test_bootstrap_intervals_do_not_depend_on_record_order_or_files(capsys, tmp_path,
                                                                    prediction_files):
    """Resampled in the order of identity digests: the same records shuffled into one file,
    or spread over other files, give the same intervals (point estimates may move in the
    last bit of a float sum)."""
    import random

    records = [record for path in prediction_files for record in read_jsonl(path)]
    random.Random(7).shuffle(records)
    shuffled = write_lines(tmp_path / "shuffled.jsonl", records)
    halves = [write_lines(tmp_path / "one.jsonl", records[::2]),
              write_lines(tmp_path / "two.jsonl", records[1::2])]
    results = []
    for files in (prediction_files, [shuffled], halves):
        code, stdout, _ = run_cli(capsys, *files, "--bootstrap", "60", "--seed", "7")
        assert code == 0
        results.append(json.loads(stdout))
    for task, result in results[0].items():
        for other in results[1:]:
            assert other[task]["ci95"] == result["ci95"], task
            assert other[task]["headline"] == pytest.approx(result["headline"], abs=1e-9)
    in_memory = scoring.score_records({"FAC": [r for r in records if r["task"].startswith(
        "factuality")]}, bootstrap=60, seed=7)["factuality_classification"]
    assert in_memory["ci95"] == results[0]["factuality_classification"]["ci95"]


def test_per_example_bootstrap_equals_resampling_records(usb_fixture_dir):
    """Resampling the per-record material gives the intervals of re-scoring resampled
    records from scratch."""
    records = read_jsonl(usb_fixture_dir / "predictions" / "multisentence_compression.jsonl")
    task = get_task("COMP")
    keys = ("rouge1", "rouge2", "rougel", "exactmatch")
    fast = scoring.bootstrap_task(task, task.score_examples(records), keys, n_resamples=40,
                                  seed=5)

    def rescored(sample):
        scores = task.score(sample)
        return {**{key: scores[key] for key in keys}, "headline": task.headline(scores)}
    plain = bootstrap(records, rescored, n_resamples=40, seed=5)
    for key in keys + ("headline",):
        assert fast["ci95"][key] == pytest.approx(plain.intervals[key], abs=1e-12)


def test_bootstrap_helpers():
    assert (resample_indices(5, 3, seed=1) == resample_indices(5, 3, seed=1)).all()
    assert resample_indices(5, 3, seed=1).shape == (3, 5)
    assert percentile_interval([float(i) for i in range(101)]) == [2.5, 97.5]
    result = bootstrap([1.0, 1.0, 1.0], lambda sample: {"mean": sum(sample) / len(sample)},
                       n_resamples=20, seed=0)
    assert result.intervals == {"mean": [1.0, 1.0]} and result.undefined == {"mean": 0}

    def spread(sample):  # the range needs two distinct values; the mean never does
        defined = len(set(sample)) > 1
        return {"mean": sum(sample) / len(sample), "range": 1.0 if defined else None}
    result = bootstrap([0.0, 1.0], spread, n_resamples=200, seed=0)
    rows = resample_indices(2, 200, seed=0)
    one_value = int(sum(len(set(row.tolist())) == 1 for row in rows))
    assert result.undefined == {"mean": 0, "range": one_value} and 0 < one_value < 200
    assert result.intervals["mean"] == percentile_interval(rows.mean(axis=1).tolist())
    assert result.intervals["range"] == [1.0, 1.0]
    result = bootstrap([0.0], spread, n_resamples=5, seed=0)
    assert result.intervals == {"mean": [0.0, 0.0], "range": None}
    assert result.undefined == {"mean": 0, "range": 5}


@pytest.mark.parametrize("n_items", [1, 2, 3, 7, 64, 1001])
def test_resamples_drawn_in_blocks_are_those_of_one_draw(monkeypatch, n_items):
    """Bounded memory changes no interval: blocks of any size continue the generator's stream
    exactly as one (n_resamples, n_items) draw does."""
    from tasks.metrics import bootstrap as bootstrap_module

    whole = np.random.default_rng(11).integers(0, n_items, size=(37, n_items))
    for block in (1, n_items, 3 * n_items + 1, 10 ** 9):
        monkeypatch.setattr(bootstrap_module, "BLOCK_INDICES", block)
        rows = list(bootstrap_module.resample_rows(n_items, 37, seed=11))
        assert len(rows) == 37 and np.array_equal(np.stack(rows), whole)
    assert np.array_equal(resample_indices(n_items, 37, seed=11), whole)


def test_bootstrap_keeps_one_block_of_indices_in_memory(monkeypatch):
    from tasks.metrics import bootstrap as bootstrap_module

    drawn = []
    real_draw = bootstrap_module._draw
    monkeypatch.setattr(bootstrap_module, "_draw",
                        lambda rng, n, rows: drawn.append(rows) or real_draw(rng, n, rows))
    monkeypatch.setattr(bootstrap_module, "BLOCK_INDICES", 100)
    items = [float(i) for i in range(30)]
    result = bootstrap(items, lambda s: {"mean": sum(s) / len(s)}, n_resamples=10, seed=2)
    assert drawn == [3, 3, 3, 1]  # 100 // 30 resamples per block
    means = resample_indices(30, 10, seed=2).mean(axis=1)  # items[i] == i
    assert result.intervals["mean"] == percentile_interval(means.tolist())


FAC_ONE_POSITIVE = [0.7836, 0.6102, 0.5114, 0.5102, 0.7044, 0.878, 0.4291]  # p_yes, label 0


@pytest.mark.slow
def test_bootstrap_drops_only_the_undefined_metric_per_resample(capsys):
    """8 FAC records, one positive: the resamples without it leave AUC (and the headline)
    undefined, but accuracy, precision, recall and F1 still use all 1000 resamples."""
    from sklearn import metrics as sk

    records = [{"task": "FAC", "id": f"r{i}", "summ_idx": 0, "label": 0, "prediction": [p]}
               for i, p in enumerate(FAC_ONE_POSITIVE)]
    records.append({"task": "FAC", "id": "r7", "summ_idx": 0, "label": 1,
                    "prediction": [0.51]})
    result = scoring.score_records({"FAC": records}, bootstrap=1000, seed=0)
    fac = result["factuality_classification"]
    stderr = capsys.readouterr().err
    task = get_task("FAC")  # resampled in the order of the records' identity digests
    order = sorted(range(8), key=lambda i: record_digest(task, records[i]))
    labels = np.array([0] * 7 + [1])[order]
    scores = (1 - np.array(FAC_ONE_POSITIVE + [0.51]))[order]
    rows = resample_indices(8, 1000, seed=0)
    accuracy = [float(np.mean(labels[row] == np.round(scores[row]))) for row in rows]
    with_positive = [row for row in rows if labels[row].any()]
    auc = [sk.roc_auc_score(labels[row], scores[row]) for row in with_positive]
    assert len(with_positive) == 648
    assert fac["bootstrap"]["undefined_resamples"] == {
        "precision": 0, "recall": 0, "f1": 0, "accuracy": 0, "auc": 352, "headline": 352}
    assert fac["ci95"]["accuracy"] == percentile_interval(accuracy)
    assert fac["ci95"]["auc"] == percentile_interval(auc)
    assert fac["ci95"]["headline"] == pytest.approx([100 * v for v in fac["ci95"]["auc"]])
    # the last negative (1 - 0.4291) and the positive (1 - 0.51) are misclassified
    assert fac["auc"] == pytest.approx(6 / 7) and fac["accuracy"] == 0.75
    assert fac["undefined"] == [] and fac["ci95"]["accuracy"] == [0.375, 1.0]
    assert ("factuality_classification: auc undefined on 352 of 1000 bootstrap resamples "
            "(its interval uses the other 648)") in stderr
    assert "accuracy undefined" not in stderr


def test_qapyramid_records_score_through_the_same_path(tmp_path):
    """No per-task branch in scoring: QA generation records (a list of pairs as the
    prediction) are validated and scored by their task, aliases and bootstrap included."""
    records = [
        {"task": "qa_generation", "id": "e1-0", "example_id": "e1", "predicate_index": 0,
         "predicate": "won", "qas": [["Who won something?", "the team"],
                                     ["What did someone win?", "the cup"]],
         "prediction": [["Who won something?", "the team"]]},
        {"task": "QAGEN", "id": "e1-1", "example_id": "e1", "predicate_index": 1,
         "predicate": "said", "qas": [["Who said something?", "the coach"]],
         "prediction": [["Who said something?", "coach"]]},
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = scoring.score_files([path], bootstrap=20, seed=0)["qa_generation"]
    # UA: 2 of 3 gold answers matched (IoU("coach", "the coach") = 0.5), 2 of 2 generated
    assert result["ua_recall"] == pytest.approx(2 / 3) and result["ua_precision"] == 1.0
    assert result["ua_f1"] == pytest.approx(0.8) and result["n_records"] == 2
    assert set(result["ci95"]) >= {"rougel", "ua_f1", "headline"}
    bad = dict(records[0], prediction="Who won something? the team")
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"qa\.jsonl:1.*prediction"):
        scoring.score_files([path])


def test_rouge_bootstrap_mid_equals_the_official_aggregator(usb_fixture_dir, capsys):
    """`--rouge-aggregate bootstrap-mid --seed S` gives rouge-score's BootstrapAggregator
    mid.fmeasure exactly as USB's evaluation computes it (rouge1, rouge2, rougeL added in that
    order, lower-cased, no stemming), with NumPy's global generator seeded with S."""
    from rouge_score import rouge_scorer
    from rouge_score import scoring as official

    path = usb_fixture_dir / "predictions" / "multisentence_compression.jsonl"
    records = read_jsonl(path)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    aggregator = official.BootstrapAggregator()
    for record in records:
        aggregator.add_scores(scorer.score(record["output_string"].lower(),
                                           record["prediction"].lower()))
    state = np.random.get_state()
    try:
        np.random.seed(7)
        expected = aggregator.aggregate()
    finally:
        np.random.set_state(state)
    code, stdout, _ = run_cli(capsys, str(path), "--rouge-aggregate", "bootstrap-mid",
                              "--seed", "7")
    scores = json.loads(stdout)["multisentence_compression"]
    assert code == 0
    assert scores["rouge1"] == expected["rouge1"].mid.fmeasure
    assert scores["rouge2"] == expected["rouge2"].mid.fmeasure
    assert scores["rougel"] == expected["rougeL"].mid.fmeasure
    assert scores["rouge_aggregate"] == "bootstrap-mid (seed 7, 1000 resamples)"
    mean = scoring.score_files([path])["multisentence_compression"]
    assert mean["rouge1"] != scores["rouge1"] and mean["exactmatch"] == scores["exactmatch"]


def test_a_file_given_twice_is_named_before_any_record_is_read(capsys, tmp_path):
    path = write_lines(tmp_path / "abs.jsonl", [dict(ABS_RECORD, task="ABS")])
    (tmp_path / "link.jsonl").symlink_to(path)
    code, stdout, stderr = run_cli(capsys, path, path)
    assert code == 2 and stdout == ""
    assert stderr.strip() == f"sumbench score: error: prediction file {path} is given twice"
    code, _, stderr = run_cli(capsys, path, str(tmp_path / "link.jsonl"))
    assert code == 2 and f"{tmp_path / 'link.jsonl'} is given twice (as {path})" in stderr
    with pytest.raises(scoring.SumbenchError, match="given twice"):
        scoring.read_prediction_files([path, path])
