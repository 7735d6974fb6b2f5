"""Speed of `tasks.scoring.score_records` against a plain official-style loop.

A benchmark, not a test (never collected by pytest). It builds >= 20,000 prediction records by
repeating the shared fixture predictions of all eight tasks (mostly the ROUGE tasks; each copy
gets a distinct id, so nothing is a duplicate record), then in one run times

  (a) our scorer: score_records(..., workers=W);
  (b) one process, the official way: rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL"],
      use_stemmer=False).score(ref.lower(), pred.lower()) per example, plain means; pooled
      scikit-learn metrics for EXT/EVEXT/FAC; the same span code for UNSUP;

checks that every official number is IDENTICAL (==, not approximately), and reports both arms,
alternated `--repeat` times (bench/harness.py: min and median, ratio of medians; `--json` for one
line with "ratio" and "identical"). Our speed-up comes from an exact bit-parallel LCS and from
spreading ROUGE over worker processes, never from reusing results of repeated (prediction,
reference) pairs.

    python3 bench/score_speed.py [--rouge-copies 800] [--other-copies 20] [--workers 2]
                                 [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from harness import add_options, compare_arms, report  # noqa: E402

SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO.parent / "shared"))
PREDICTIONS = SHARED / "fixtures" / "usb" / "predictions"
ROUGE_TASKS = ("abstractive_summarization", "multisentence_compression",
               "topicbased_summarization", "fixing_factuality")
OTHER_TASKS = ("extractive_summarization", "evidence_extraction", "factuality_classification",
               "unsupported_span_prediction")


def build_records(rouge_copies: int, other_copies: int) -> dict[str, list[dict]]:
    """The fixture records of every task repeated, each copy with its own id."""
    from tasks.plumbing.io import read_jsonl

    by_task = {}
    for task in ROUGE_TASKS + OTHER_TASKS:
        records = read_jsonl(PREDICTIONS / f"{task}.jsonl")
        copies = rouge_copies if task in ROUGE_TASKS else other_copies
        by_task[task] = [dict(record, id=f"{record['id']}#copy{copy}")
                         for copy in range(copies) for record in records]
    return by_task


def official_rouge(records: list[dict]) -> dict:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    values: dict[str, list[float]] = {"rouge1": [], "rouge2": [], "rougel": [],
                                      "exactmatch": []}
    for record in records:
        prediction, reference = record["prediction"].lower(), record["output_string"].lower()
        scores = scorer.score(reference, prediction)
        values["rouge1"].append(scores["rouge1"].fmeasure)
        values["rouge2"].append(scores["rouge2"].fmeasure)
        values["rougel"].append(scores["rougeL"].fmeasure)
        values["exactmatch"].append(prediction == reference)
    return {key: float(np.mean(series)) for key, series in values.items()}


def official_classification(labels: list[int], probabilities: list[float]) -> dict:
    from sklearn import metrics

    y_true, y_score = np.array(labels), np.array(probabilities)
    y_class = np.round(y_score).astype(int)
    return {"precision": metrics.precision_score(y_true, y_class),
            "recall": metrics.recall_score(y_true, y_class),
            "f1": metrics.f1_score(y_true, y_class),
            "accuracy": metrics.accuracy_score(y_true, y_class),
            "auc": metrics.roc_auc_score(y_true, y_score)}


def official_lines(records: list[dict], labels_of) -> dict:
    labels, probabilities = [], []
    for record in records:
        record_labels = labels_of(record)
        prediction = list(record["prediction"])[:len(record_labels)]
        labels += record_labels
        probabilities += prediction + [0] * (len(record_labels) - len(prediction))
    return official_classification(labels, probabilities)


def official_scores(by_task: dict[str, list[dict]]) -> dict:
    """One process, per example, the way the official evaluation computes every task."""
    from tasks.metrics.spans import span_scores

    results = {task: official_rouge(by_task[task]) for task in ROUGE_TASKS}
    results["extractive_summarization"] = official_lines(
        by_task["extractive_summarization"], lambda record: list(record["labels"]))
    results["evidence_extraction"] = official_lines(
        by_task["evidence_extraction"],
        lambda record: [int(j in record["labels"]) for j in range(len(record["input_lines"]))])
    fac = by_task["factuality_classification"]
    results["factuality_classification"] = official_classification(
        [record["label"] for record in fac],
        [1 - r["prediction"][0] if len(r["prediction"]) == 1 else 0 for r in fac])
    unsup = by_task["unsupported_span_prediction"]
    results["unsupported_span_prediction"] = span_scores(
        [r["prediction"] for r in unsup], [r["summary"] for r in unsup],
        [r["annotated_summary"] for r in unsup])
    return results


def compare(ours: dict, official: dict) -> list[str]:
    """Every official key whose value is not identical."""
    return [f"{task}.{key}: ours {ours[task][key]!r} official {value!r}"
            for task, scores in official.items() for key, value in scores.items()
            if ours[task][key] != value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rouge-copies", type=int, default=800)
    parser.add_argument("--other-copies", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    add_options(parser)
    args = parser.parse_args(argv)
    if not PREDICTIONS.is_dir():
        print(f"shared fixtures not found at {PREDICTIONS}", file=sys.stderr)
        return 1
    from tasks.scoring import score_records

    by_task = build_records(args.rouge_copies, args.other_copies)
    result = compare_arms(lambda: score_records(by_task, workers=args.workers),
                          lambda: official_scores(by_task), repeat=args.repeat,
                          same=lambda ours, official: not compare(ours, official))
    mismatches = compare(result["outputs"]["ours"], result["outputs"]["baseline"])
    extra = {"records": sum(map(len, by_task.values())),
             "rouge_records": sum(len(by_task[t]) for t in ROUGE_TASKS),
             "workers": args.workers}
    report("score_speed", result, as_json=args.json, extra=extra,
           labels=(f"ours (score_records, workers={args.workers})",
                   "official-style loop (one process)"))
    if mismatches and not args.json:
        print("MISMATCH:\n" + "\n".join(mismatches))
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
