"""Heuristic training labels for EVEXT, FAC and FIX from (article, summary) pairs alone.

The summary is the article's final summary (its non-deleted `summary_sents`); the human
evidence (`refs`) and the human edits (before -> after) are never read, except to report how
the heuristic evidence agrees with the human one. Records have exactly the shapes of the
official derivation (tasks.usb.derive), so every command reads them unchanged:

- EVEXT: per article, `evidence_labels` = the source lines that best match each summary
  sentence: by ROUGE-L F1 (`rougeL`, ties kept), by overlap of names and numbers (`entity`,
  ROUGE-L when nothing overlaps), or by an alignment model (`superpal`, from trainers).
- FAC: per summary sentence with an applicable corruption, the sentence (label 0, supported)
  then its corruption (label 1), both with the heuristic evidence lines as `input_lines`;
  `summ_idx` numbers these pairs per article.
- FIX: corrupted -> original sentence, same `summ_idx`.
Corruptions are FactCC-style (tasks.usb.corruptions) or infilled by a seq2seq model
(`infill`, from trainers), seeded per (seed, article, sentence); their type and spans are
written beside each split as `<split>.corruptions.jsonl` (one line per FAC pair / FIX record).
Whether a human would call a corruption unsupported is unknowable here (nobody judged them):
the report says so instead of inventing a number.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import SumbenchError, check_choice
from tasks.plumbing.io import dumps_record, write_json
from tasks.plumbing.provenance import provenance
from tasks.usb.corruptions import Corruption, corrupt, names
from tasks.usb.derive import _article, check_output_folder
from tasks.usb.raw import read_documents

EVIDENCE_METHODS = ("rougeL", "entity", "superpal")
CORRUPTION_METHODS = ("factcc", "infill")
HEURISTIC_TASKS = ("evidence_extraction", "factuality_classification", "fixing_factuality")
INFO_FILE = "build_info.json"
INFO_FORMAT = "sumbench-usb-heuristic/1"
UNKNOWABLE = ("Whether a human would call each corruption unsupported is unknown: no human "
              "judged these sentences, so no agreement number is given for FAC and FIX.")

EvidenceFn = Callable[[Sequence[str], Sequence[dict]], list[list[int]]]
CorruptFn = Callable[[str, str, random.Random], "Corruption | None"]


@dataclass(frozen=True)
class HeuristicSpec:
    evidence: str = "rougeL"
    corruption: str = "factcc"
    seed: int = 0
    tasks: tuple[str, ...] = HEURISTIC_TASKS
    splits: tuple[str, ...] = ("train", "validation")

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "splits", tuple(self.splits))
        check_choice(self.evidence, EVIDENCE_METHODS, "evidence method")
        check_choice(self.corruption, CORRUPTION_METHODS, "corruption method")
        unknown = [task for task in self.tasks if task not in HEURISTIC_TASKS]
        if unknown or not self.tasks:
            raise SumbenchError(f"heuristic labels exist for {', '.join(HEURISTIC_TASKS)} "
                                f"only; got {', '.join(unknown) or 'none'}")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "tasks": list(self.tasks),
                "splits": list(self.splits)}


def _content_lines(source: Sequence[dict]) -> list[int]:
    return [j for j, line in enumerate(source) if not line["is_header"]]


def rouge_l_evidence(sentences: Sequence[str], source: Sequence[dict]) -> list[list[int]]:
    """Per sentence, the non-header source lines of highest ROUGE-L F1 (ties kept)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    candidates = _content_lines(source)
    evidence = []
    for sentence in sentences:
        scores = {j: scorer.score(source[j]["txt"], sentence)["rougeL"].fmeasure
                  for j in candidates}
        best = max(scores.values(), default=0.0)
        evidence.append([j for j in candidates if scores[j] == best and best > 0])
    return evidence


def _entity_tokens(text: str) -> set[str]:
    import re

    words = {word for name in names(text) for word in name.split()}
    return words | set(re.findall(r"\b\d+(?:[.,]\d+)?\b", text))


def entity_evidence(sentences: Sequence[str], source: Sequence[dict]) -> list[list[int]]:
    """Per sentence, the lines sharing the most names and numbers (ROUGE-L when none)."""
    candidates = _content_lines(source)
    fallback = rouge_l_evidence(sentences, source)
    evidence = []
    for index, sentence in enumerate(sentences):
        wanted = _entity_tokens(sentence)
        overlap = {j: len(wanted & _entity_tokens(source[j]["txt"])) for j in candidates}
        best = max(overlap.values(), default=0)
        evidence.append([j for j in candidates if overlap[j] == best] if best
                        else fallback[index])
    return evidence


BUILT_IN_EVIDENCE = {"rougeL": rouge_l_evidence, "entity": entity_evidence}


def article_records(doc_id: str, annotation: dict, evidence_fn: EvidenceFn,
                    corrupt_fn: CorruptFn, seed: int) -> tuple[dict, list[dict], list[tuple]]:
    """(task -> records, corruption notes, (human refs, heuristic refs) per sentence)."""
    article = _article(annotation)
    kept = [i for i, sentence in enumerate(article.after) if sentence]
    sentences = [article.after[i] for i in kept]
    evidence = evidence_fn(sentences, article.source)
    context = " ".join(article.src)
    records = {"evidence_extraction": [{"id": doc_id, "input_lines": article.src,
                                        "summary_lines": sentences,
                                        "evidence_labels": evidence}],
               "factuality_classification": [], "fixing_factuality": []}
    notes, pair = [], 0
    for sentence, lines in zip(sentences, evidence):
        corruption = corrupt_fn(sentence, context, random.Random(f"{seed}\x00{doc_id}\x00"
                                                                 f"{sentence}"))
        if corruption is None:
            continue
        inputs = [article.src[j] for j in lines]
        for text, label in ((sentence, 0), (corruption.text, 1)):
            records["factuality_classification"].append(
                {"id": doc_id, "summ_idx": pair, "input_lines": inputs, "summary_sent": text,
                 "label": label})
        records["fixing_factuality"].append(
            {"id": doc_id, "summ_idx": pair, "input_lines": inputs,
             "initial_summary": corruption.text, "fixed_summary": sentence})
        notes.append({"id": doc_id, "summ_idx": pair, "corruption": corruption.kind,
                      "old": corruption.old, "new": corruption.new})
        pair += 1
    agreement = [(tuple(article.refs[i]), tuple(lines)) for i, lines in zip(kept, evidence)]
    return records, notes, agreement


def evidence_agreement(pairs: Sequence[tuple]) -> dict:
    """Line-level precision / recall / F1 of heuristic evidence against the human refs."""
    true_positive = sum(len(set(human) & set(heuristic)) for human, heuristic in pairs)
    predicted = sum(len(set(heuristic)) for _, heuristic in pairs)
    actual = sum(len(set(human)) for human, _ in pairs)
    precision = true_positive / predicted if predicted else None
    recall = true_positive / actual if actual else None
    f1 = (2 * precision * recall / (precision + recall)
          if precision and recall else (0.0 if precision is not None and recall is not None
                                        else None))
    return {"sentences": len(pairs), "precision": precision, "recall": recall, "f1": f1}


def build_heuristic_datasets(raw_dir: str | Path, out_dir: str | Path, spec: HeuristicSpec,
                             *, evidence_fn: EvidenceFn | None = None,
                             corrupt_fn: CorruptFn | None = None) -> dict:
    """Write OUT/<variant>/<task>/<split>.jsonl (+ .corruptions.jsonl) and OUT/build_info.json
    for every variant of the raw folder; all or nothing. Returns the report."""
    check_output_folder(Path(out_dir), Path(raw_dir))
    evidence_fn = evidence_fn or BUILT_IN_EVIDENCE.get(spec.evidence)
    corrupt_fn = corrupt_fn or (corrupt if spec.corruption == "factcc" else None)
    if evidence_fn is None or corrupt_fn is None:
        raise SumbenchError(f"evidence {spec.evidence!r} / corruption {spec.corruption!r} need "
                            f"a model (give one by name)")
    counts: dict = {}
    per_article: dict[str, tuple[list, list]] = {}  # article -> (notes, agreement pairs)
    with atomic_directory(out_dir) as staging:
        for variant, split, documents in read_documents(raw_dir, None, spec.splits):
            by_task: dict[str, list] = {task: [] for task in spec.tasks}
            notes = []
            for doc_id, annotation in documents:
                records, doc_notes, pairs = article_records(doc_id, annotation, evidence_fn,
                                                            corrupt_fn, spec.seed)
                for task in spec.tasks:
                    by_task[task].extend(records[task])
                notes.extend(doc_notes)
                per_article[doc_id] = (doc_notes, pairs)
            for task, records in by_task.items():
                _write(staging / variant / task / f"{split}.jsonl", records)
                if task != "evidence_extraction":
                    _write(staging / variant / task / f"{split}.corruptions.jsonl", notes)
                counts.setdefault(variant, {}).setdefault(task, {})[split] = len(records)
        kinds: dict[str, int] = {}
        for doc_notes, _ in per_article.values():
            for note in doc_notes:
                kinds[note["corruption"]] = kinds.get(note["corruption"], 0) + 1
        agreement = [pair for _, pairs in per_article.values() for pair in pairs]
        report = {"format": INFO_FORMAT, "spec": spec.to_dict(), "records": counts,
                  "articles": len(per_article),
                  "evidence_agreement_with_human": evidence_agreement(agreement),
                  "corruption_types": dict(sorted(kinds.items())),
                  "corruption_agreement_with_human": UNKNOWABLE}
        write_json(staging / INFO_FILE, {**report, "provenance": provenance(
            {"raw_dir": str(Path(raw_dir).resolve()), **spec.to_dict()},
            {"seed": spec.seed})})
    return report


def _write(path: Path, records: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps_record(record) + "\n" for record in records),
                    encoding="utf-8")
