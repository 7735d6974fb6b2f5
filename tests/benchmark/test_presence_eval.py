"""`sumbench qapyramid presence-eval` (benchmark/commands/presence_eval.py): a presence
backend's decisions against human labels, on REALSumm's SCU labels and on QAPyramid's crowd
judgments (QA_presence.json, strict majority, ties absent) with summaries supplied; the
numbers against an independent computation, and bad requests as one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from leaderboard.evaluators.pyramid.presence import LexicalBackend
from leaderboard.evaluators.qapyramid.scoring import human_qapyramid
from tasks.metrics.classification import decision_scores
from tasks.qapyramid.judgments import load_qa_judgments
from tasks.qapyramid.presence_detection import pyramid_instances
from tasks.qapyramid.pyramid_data import load_pyramid_dataset

from helpers import sumbench

SYSTEMS = ("abs_bart_out", "ext_bart_out")


def test_decision_scores_by_hand():
    # labels 1 1 0 0 0, decisions 1 0 0 1 0: 3 right of 5; recall of 1: 1/2, of 0: 2/3
    scores = decision_scores([1, 1, 0, 0, 0], [1, 0, 0, 1, 0], [0.9, 0.4, 0.1, 0.6, 0.2])
    assert scores["micro_f1"] == scores["accuracy"] == 0.6
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.5, 0.5, 0.5)
    assert scores["balanced_accuracy"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert scores["auc"] == pytest.approx(5 / 6)   # 5 of the 6 (positive, negative) pairs
    assert (scores["n"], scores["positives"]) == (5, 2)
    one_class = decision_scores([1, 1], [1, 0], [0.7, 0.2])
    assert one_class["balanced_accuracy"] is None and one_class["auc"] is None


def test_realsumm_scus_with_the_lexical_backend(pyramid_data_dir, tmp_path, capsys):
    out = tmp_path / "presence.json"
    code, stdout, stderr = sumbench(
        capsys, "qapyramid", "presence-eval", "--pyramid", pyramid_data_dir / "realsumm",
        "--presence", "lexical", "--threshold", "0.4", "--systems", *SYSTEMS,
        "--out", out)
    assert code == 0, stderr
    written = json.loads(out.read_text())
    # independently: the task's pairs, the backend called directly, the counts by numpy
    dataset = load_pyramid_dataset(pyramid_data_dir / "realsumm")
    pairs = [item for item in pyramid_instances(dataset) if item["system"] in SYSTEMS]
    results = LexicalBackend(0.4).score([(p["summary"], p["unit"]) for p in pairs])
    labels = np.array([p["label"] for p in pairs])
    decisions = np.array([result.label for result in results])
    assert written["all"]["n"] == len(pairs) == sum(
        scores["n"] for scores in written["systems"].values())
    assert written["all"]["micro_f1"] == pytest.approx(float(np.mean(labels == decisions)))
    assert written["all"]["positives"] == int(labels.sum())
    recall = [float(np.mean(decisions[labels == v] == v)) for v in (0, 1)]
    assert written["all"]["balanced_accuracy"] == pytest.approx(sum(recall) / 2)
    assert [row["decision"] for row in written["pairs"]] == decisions.tolist()
    assert list(written["systems"]) == list(SYSTEMS)
    assert written["config"]["unit_kind"] == "scu" and written["provenance"]["git"]
    table = stdout.splitlines()
    assert table[0].split("\t")[:3] == ["systems", "micro_f1", "f1"]
    assert table[1].startswith(f"all\t{written['all']['micro_f1']:.4f}")


def test_qapyramid_judgments_with_summaries(qapyramid_judgments, tmp_path, capsys):
    """Summaries built from the judgments themselves (the release ships none): each holds
    the answers of its present QAs, so the lexical backend finds most of them. The labels
    are the strict majorities that `sumbench qapyramid human` scores: per summary, their
    mean is its QAPyramid."""
    judgments = load_qa_judgments(qapyramid_judgments)
    human = human_qapyramid(judgments)["per_example"]
    chosen = ("bart", "GPT4")
    texts: dict[tuple[str, str], list[str]] = {}
    for item in judgments:
        if item.system in chosen:
            present = 2 * sum(item.values) > len(item.values)
            texts.setdefault((item.system, item.example_id), []).extend(
                [item.answer] if present else [])
    summaries = tmp_path / "summaries.jsonl"
    summaries.write_text("".join(json.dumps({"system": system, "example_id": example,
                                             "summary": " ".join(answers)}) + "\n"
                                 for (system, example), answers in texts.items()))
    out = tmp_path / "qa.json"
    code, _, stderr = sumbench(capsys, "qapyramid", "presence-eval", "--judgments",
                               qapyramid_judgments, "--summaries", summaries, "--presence",
                               "lexical", "--threshold", "0.5", "--out", out)
    assert code == 0, stderr
    written = json.loads(out.read_text())
    assert sorted(written["systems"]) == sorted(chosen)
    for system in chosen:
        rows = [row for row in written["pairs"] if row["system"] == system]
        by_example: dict[str, list[int]] = {}
        for row in rows:
            by_example.setdefault(row["id"].split(":")[0], []).append(row["label"])
        assert {example: float(np.mean(labels)) for example, labels in by_example.items()} \
            == pytest.approx(human[system])
    assert written["all"]["n"] == sum(1 for item in judgments if item.system in chosen)
    assert written["all"]["recall"] > 0.9   # a present QA's answer is in its summary


@pytest.mark.parametrize("extra, needle", [
    ([], "give one source of pairs: --pyramid DIR, --dataset FILE, or --judgments"),
    (["--pyramid", "PYRAMID", "--judgments", "JUDGMENTS"], "give one source of pairs"),
    (["--judgments", "JUDGMENTS"], "--judgments takes --summaries"),
    (["--pyramid", "PYRAMID", "--summaries", "EMPTY"], "--judgments takes --summaries"),
    (["--pyramid", "PYRAMID", "--unit-kind", "statement"],
     "--unit-kind is a QAPyramid setting; a Pyramid folder has SCUs"),
    (["--pyramid", "PYRAMID", "--systems", "nobody"], "unknown system 'nobody'"),
    (["--pyramid", "PYRAMID", "--split", "dev"], "unknown split 'dev'"),
    (["--judgments", "JUDGMENTS", "--summaries", "EMPTY"],
     "no judged QA has a summary in --summaries"),
])
def test_bad_requests_are_one_line_errors(pyramid_data_dir, qapyramid_judgments, tmp_path,
                                          capsys, extra, needle):
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"system": "x", "example_id": "y", "summary": "z"}) + "\n")
    given = {"PYRAMID": str(pyramid_data_dir / "realsumm"), "JUDGMENTS": str(qapyramid_judgments),
             "EMPTY": str(empty)}
    out = tmp_path / "out.json"
    code, stdout, stderr = sumbench(capsys, "qapyramid", "presence-eval", "--presence",
                                    "lexical", *[given.get(arg, arg) for arg in extra],
                                    "--out", out)
    assert code == 2 and stdout == "" and not out.exists()
    assert len(stderr.strip().splitlines()) == 1 and needle in stderr, stderr


def test_pyrxsum_with_a_tiny_nli_backend(pyramid_data_dir, tmp_path, capsys):
    """A tiny random NLI classifier by `--presence nli --nli-mode label3`: its decisions are
    the backend's own, called directly on the same pairs."""
    from leaderboard.evaluators.pyramid.presence import build_backend
    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    dataset = load_pyramid_dataset(pyramid_data_dir / "pyrxsum")
    pairs = [item for item in pyramid_instances(dataset, "test") if item["system"] == "t5-large"]
    tokenizer = build_tiny_tokenizer([p["summary"] + " " + p["unit"] for p in pairs[:60]],
                                     vocab_size=400)
    model = tmp_path / "nli"
    build_tiny_classifier(tokenizer, labels=("contradiction", "entailment", "neutral"),
                          save_dir=model, seed=3)
    out = tmp_path / "nli.json"
    code, _, stderr = sumbench(capsys, "qapyramid", "presence-eval", "--pyramid",
                               pyramid_data_dir / "pyrxsum", "--split", "test",
                               "--systems", "t5-large", "--presence", "nli", "--model", model,
                               "--nli-mode", "label3", "--device", "cpu", "--out", out)
    assert code == 0, stderr
    written = json.loads(out.read_text())
    direct = build_backend("nli", model=str(model), mode="label3", device="cpu").score(
        [(p["summary"], p["unit"]) for p in pairs])
    assert [row["decision"] for row in written["pairs"]] == [r.label for r in direct]
    assert written["all"]["n"] == len(pairs)
    assert "nli" in written["config"]["presence_backend"]["fingerprint"]
