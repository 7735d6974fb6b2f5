"""EVEXT: for one summary sentence (the claim), label each article line as evidence or not."""
from __future__ import annotations

from collections.abc import Sequence

from tasks.metrics.classification import evidence_line_labels
from tasks.plumbing.errors import DataError
from tasks.plumbing.registry import TASKS
from tasks.usb.common import LineLabelTask, instructed
from tasks.validation import is_int, require, require_probabilities, require_str_list


@TASKS.decorator("EVEXT")
class EvidenceExtraction(LineLabelTask):
    name = "evidence_extraction"
    description = "Find the article sentences that support a summary sentence (F1)."
    title = "Evidence extraction"
    #: instances (and prediction records) are per (article, summary sentence)
    record_fields = ("task", "id", "summ_idx", "input_lines", "labels", "claim")
    main_metric = "f1"
    #: evidence line indices: the dataset lists them in its order, the official windows in
    #: line order; the scoring marks each line
    set_fields = ("labels",)
    #: an instance's answer: its claim's evidence lines (the dataset's `evidence_labels`)
    answer_fields = ("labels",)
    #: as the release: a line's count is capped so that it fits an empty window
    cap_line_tokens = True

    def instances(self, records: Sequence[dict]) -> list[dict]:
        """One instance per summary sentence: its evidence indices as `labels` (none for a
        record without `evidence_labels`: unlabelled inputs)."""
        instances = []
        for record in records:
            claims, evidence = record["summary_lines"], record.get("evidence_labels")
            if evidence is not None and len(claims) != len(evidence):
                raise DataError(f"{len(evidence)} evidence lists for {len(claims)} summary "
                                f"lines in {record.get('id')!r}", field="evidence_labels")
            for summ_idx, claim in enumerate(claims):
                instance = {"task": self.name, "id": record["id"], "summ_idx": summ_idx,
                            "input_lines": list(record["input_lines"]), "claim": claim}
                if evidence is not None:
                    instance["labels"] = list(evidence[summ_idx])
                instances.append(instance)
        return instances

    def first_of_its_record(self, instance: dict) -> bool:
        """The record's first summary line (the release's few-shot pool takes only it)."""
        return instance.get("summ_idx") == 0

    def prefix(self, instance: dict) -> str:
        return instructed("For each sentence in the content, predict if it provides any "
                          "evidence for the claim. ", f"CLAIM: {instance['claim']} CONTENT: ")

    def fewshot_header(self, instance: dict) -> str:
        """As in the release's GPT-3.5 prompts: a space after `CONTENT:`, so that the
        numbered sentences follow two spaces after it."""
        return f"CLAIM: {instance['claim']}\nCONTENT: "

    def line_labels(self, instance: dict) -> list[int]:
        evidence = set(instance["labels"])
        return [int(j in evidence) for j in range(len(instance["input_lines"]))]

    def validate_fields(self, record: dict) -> None:
        require_probabilities(record, "prediction")
        n_lines = len(require_str_list(record, "input_lines"))
        labels = require(record, "labels")
        if not isinstance(labels, list) or not all(is_int(j) and 0 <= j < n_lines
                                                   for j in labels):
            raise DataError(f"expected a list of line indices in 0..{n_lines - 1}",
                            field="labels")

    def record_line_labels(self, record: dict) -> list[int]:
        return evidence_line_labels(record["labels"], len(record["input_lines"]))
