"""The presence_detection task: loaders (QAPyramid format, REALSumm, PyrXSum), splits, formats,
parsing, records and metrics."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tasks.plumbing.errors import DataError
from tasks.plumbing.registry import TASKS
from tasks.qapyramid.presence_detection import PresenceDetection


@pytest.fixture(scope="module")
def realsumm(pyramid_data_dir):
    task = PresenceDetection()
    return {split: task.load_instances(split, "realsumm", str(pyramid_data_dir))
            for split in ("train", "validation", "test")}


def test_pyramid_splits_do_not_leak(realsumm, pyramid_data_dir):
    ids = {split: {i["example_id"] for i in rows} for split, rows in realsumm.items()}
    assert not (ids["train"] & ids["validation"] or ids["train"] & ids["test"]
                or ids["validation"] & ids["test"])
    assert sum(len(v) for v in ids.values()) == 100
    assert [len(v) for v in ids.values()] == [59, 20, 21]
    assert [len(rows) for rows in realsumm.values()] == [15275, 5050, 6075]  # 25 x 1056 SCUs
    again = PresenceDetection().load_instances("test", "realsumm",
                                               str(pyramid_data_dir / "realsumm"))
    assert again == realsumm["test"]
    other_seed = PresenceDetection(split_seed=1).load_instances("test", "realsumm",
                                                                str(pyramid_data_dir))
    assert {i["example_id"] for i in other_seed} != ids["test"]


def test_realsumm_labels_reproduce_the_known_pyramid_score(realsumm):
    per_example = defaultdict(list)
    for rows in realsumm.values():
        for instance in rows:
            if instance["system"] == "abs_bart_out":
                per_example[instance["example_id"]].append(instance["label"])
    scores = [sum(v) / len(v) for v in per_example.values()]
    assert sum(scores) / len(scores) == pytest.approx(0.48349483849483854, abs=1e-12)


def test_pyrxsum_loads(pyramid_data_dir):
    rows = PresenceDetection().load_instances("all", "pyrxsum", str(pyramid_data_dir))
    assert len(rows) == 10 * 478 and {r["unit_kind"] for r in rows} == {"scu"}


def test_pyramid_variant_needs_a_folder():
    with pytest.raises(DataError, match="needs data_dir"):
        PresenceDetection().load_instances("test", "realsumm", None)


def _qapyramid_file(tmp_path):
    records = [{"example_id": f"e{i}", "source": "", "reference": "Arango scored a goal .",
                "QAs": ["Who scored something? Arango", "What did someone score? a goal"],
                "QA_labels": {"bart": [1, 0], "t5": [1, 1]},
                "system_outputs": {"bart": f"Summary {i} of bart.", "t5": f"Summary {i}."}}
               for i in range(10)]
    path = tmp_path / "qapyramid.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_qapyramid_variant_units_and_formats(tmp_path):
    path = _qapyramid_file(tmp_path)
    task = TASKS.get("PRESENCE")()
    rows = task.load_instances("all", "qapyramid", str(path))
    assert len(rows) == 10 * 2 * 2
    first = rows[1]
    assert (first["id"], first["unit"], first["label"]) == \
        ("e0:bart:1", "What did someone score? a goal", 0)
    statements = PresenceDetection(unit_kind="statement").load_instances("all", "qapyramid",
                                                                         str(path))
    assert statements[1]["unit"] == "Someone did score a goal."
    model_input = task.format(first)[0]
    assert model_input.source == ("Is the content unit present in the summary? :  UNIT: What "
                                  "did someone score? a goal SUMMARY: Summary 0 of bart.")
    assert (model_input.target, task.format(rows[0])[0].target) == ("No", "Yes")
    parts = task.fewshot_parts(first)
    assert (parts.content, parts.output, parts.cue) == (
        "SUMMARY: Summary 0 of bart.\nUNIT: What did someone score? a goal", "No", "ANSWER:")
    prompt = task.fewshot_prompt(first, [rows[0]])
    assert prompt.endswith("UNIT: What did someone score? a goal\nANSWER:")
    assert "ANSWER: Yes" in prompt and task.group_key(first) == "e0"
    dataset = task.load("test", "qapyramid", str(path))
    assert set(dataset.column_names) >= {"summary", "unit", "label", "example_id"}


def test_parse_records_and_scores():
    task = PresenceDetection()
    assert task.parse(" Yes.", {}) == [1.0] and task.parse("no", {}) == [0.0]
    assert task.parse("maybe", {}) == [0.5] and not task.is_parseable("maybe", {})
    instances = [{"id": f"x:{k}", "example_id": "x", "system": "s", "unit_index": k,
                  "unit_kind": "qa", "summary": "S", "unit": f"U{k}", "label": label}
                 for k, label in enumerate([1, 1, 0, 0, 1])]
    probabilities = [0.9, 0.4, 0.6, 0.1, 0.5]
    records = [task.prediction_record(i, [p]) for i, p in zip(instances, probabilities)]
    for record in records:
        task.validate_record(record)
    assert "summary" not in records[0] and records[0]["task"] == "presence_detection"
    scores = task.score(records)
    # rounded (0.5 -> 0): predicted [1, 0, 1, 0, 0]; tp 1, fp 1, fn 2
    assert (scores["precision"], scores["recall"]) == (0.5, pytest.approx(1 / 3))
    assert scores["f1"] == pytest.approx(0.4) and scores["accuracy"] == pytest.approx(0.4)
    assert scores["auc"] == pytest.approx(4 / 6) and scores["length_mismatches"] == 0
    assert task.headline(scores) == pytest.approx(40.0)
    records[0]["prediction"] = [0.9, 0.1]
    assert task.score(records)["length_mismatches"] == 1
    with pytest.raises(DataError) as error:
        task.validate_record(dict(records[1], label=2))
    assert error.value.field == "label"
    with pytest.raises(DataError) as error:
        task.validate_record(dict(records[1], prediction=[1.5]))
    assert error.value.field == "prediction"


@pytest.mark.slow
def test_score_examples_aggregate_to_the_pooled_scores_and_bootstrap():
    import random

    from tasks.metrics.classification import binary_scores
    from tasks.scoring import score_records

    task, rng = PresenceDetection(), random.Random(0)
    records = []
    for k in range(40):
        label = int(rng.random() < 0.4)
        probability = min(1.0, max(0.0, 0.35 * label + 0.65 * rng.random()))
        records.append({"task": "presence_detection", "id": f"e{k % 8}:s:{k}",
                        "example_id": f"e{k % 8}", "system": "s", "unit_index": k,
                        "unit_kind": "scu", "unit": f"U{k}", "label": label,
                        "prediction": [round(probability, 3)]})
    records[3]["prediction"] = [0.9, 0.2]  # counts as p = 0
    examples = task.score_examples(records)
    assert examples[3] == ([0.0], [records[3]["label"]], True)
    # the former `score`: binary_scores over the pooled values, plus the mismatch count
    probabilities = [r["prediction"][0] if len(r["prediction"]) == 1 else 0.0 for r in records]
    labels = [r["label"] for r in records]
    former = {**binary_scores(probabilities, labels), "length_mismatches": 1,
              "micro_f1": sum(int(p > 0.5) == y for p, y in zip(probabilities, labels)) / 40}
    assert task.aggregate_scores(examples) == former == task.score(records)
    assert former["micro_f1"] == former["accuracy"]
    result = score_records({"presence_detection": records}, bootstrap=50,
                           seed=0)["presence_detection"]
    low, high = result["ci95"]["f1"]
    assert low < result["f1"] < high and result["f1"] == former["f1"]
    assert result["bootstrap"]["resamples"] == 50 and result["n_records"] == 40
    again = score_records({"presence_detection": records}, bootstrap=50, seed=0)
    assert again["presence_detection"]["ci95"] == result["ci95"]
