"""Raw USB annotations -> the eight task datasets, exactly as the official release derives them.

Input layout (``RAW``): ``annotations/<domain>/<doc>.json`` and
``splits/<variant>/{train,validation,test}.txt`` (one annotation path per line, relative to
``annotations/``). Output layout: ``OUT/<variant>/<task>/<split>.jsonl`` plus one provenance
file ``OUT/build_info.json``. Rules: ``docs/usb-format.md`` section 2. Reading and checking
the raw folder: tasks.usb.raw.

Every record is serialised like the official writer (the ``jsonlines`` package: ``json``
defaults, but ``ensure_ascii=False``), so the files match the published release byte for byte.
"""
from __future__ import annotations

import difflib
import hashlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from tasks.plumbing.atomic import atomic_directory
from tasks.plumbing.errors import DataError
from tasks.plumbing.io import dumps_record, read_json, write_json
from tasks.plumbing.provenance import provenance
from tasks.plumbing.text import treebank_words, word_tokenizer_name
from tasks.usb.layout import SPLITS, TASK_FOLDERS
from tasks.usb.raw import SplitJob, iter_documents, plan_splits, raw_input_digest
from tasks.usb.split_checks import duplicate_problems, overlap_problems, source_digest

BUILD_INFO_FILE = "build_info.json"
BUILD_INFO_FORMAT = "sumbench-usb-task-datasets/1"

Record = dict
TaskDatasets = dict[str, list[Record]]  # task folder -> records


class Article(NamedTuple):
    """The parts of one annotation document that the derivation reads."""
    source: list[dict]       # source lines: txt, is_header, section_index, section_name
    before: list[str]        # summary sentences before editing
    after: list[str]         # after editing; "" = deleted
    refs: list[list[int]]    # evidence line indices, per summary sentence

    @property
    def src(self) -> list[str]:
        return [line["txt"] for line in self.source]

    def evidence(self, i: int) -> list[str]:
        return [self.source[r]["txt"] for r in self.refs[i]]


def _article(annotation: dict) -> Article:
    body = annotation["annotations"]
    edits = body["annotations"]
    return Article(body["source"], [s["txt"] for s in body["orig_summary"]],
                   edits["summary_sents"], edits["refs"])


def derive_abstractive(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    return [{"id": doc_id, "input_lines": a.src, "output_lines": [s for s in a.after if s]}]


def derive_compression(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    kept = [i for i, sentence in enumerate(a.after) if sentence]
    return [{"id": doc_id, "summ_idx": k, "input_lines": a.evidence(i),
             "output_lines": [a.after[i]]} for k, i in enumerate(kept)]


def derive_extractive(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    labels = [0] * len(a.source)
    for sentence, group in zip(a.after, a.refs):
        if sentence:
            for ref in group:
                labels[ref] = 1
    return [{"id": doc_id, "input_lines": a.src, "labels": labels}]


def derive_evidence(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    kept = [i for i, sentence in enumerate(a.after) if sentence]
    return [{"id": doc_id, "input_lines": a.src, "summary_lines": [a.after[i] for i in kept],
             "evidence_labels": [list(a.refs[i]) for i in kept]}]


def _edited(a: Article) -> list[int]:
    """Indices of sentences that were edited but not deleted."""
    return [i for i, (b, s) in enumerate(zip(a.before, a.after)) if s and b != s]


def derive_factuality(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    records = []
    for k, i in enumerate(_edited(a)):
        for text, label in ((a.after[i], 0), (a.before[i], 1)):
            records.append({"id": doc_id, "summ_idx": k, "input_lines": a.evidence(i),
                            "summary_sent": text, "label": label})
    return records


def derive_fixing(doc_id: str, annotation: dict) -> list[Record]:
    a = _article(annotation)
    return [{"id": doc_id, "summ_idx": k, "input_lines": a.evidence(i),
             "initial_summary": a.before[i], "fixed_summary": a.after[i]}
            for k, i in enumerate(_edited(a))]


def tokenize_sentence(text: str) -> list[str]:
    """Penn Treebank-style words of a summary sentence, as the official script tokenizes it
    (``nltk.word_tokenize``, sentence splitting included; see tasks.plumbing.text)."""
    return treebank_words(text)


def annotate_deleted_spans(before: str, after: str,
                           tokenize: Callable[[str], list[str]] = tokenize_sentence) -> str | None:
    """`before` re-spaced by its tokens with deleted runs wrapped in []...[/]; None if the
    edit added any token (such sentences are left out of the task)."""
    pieces = []
    for entry in difflib.Differ().compare(tokenize(before), tokenize(after)):
        code, piece = entry[0], entry[1:]  # piece = " " + token
        if code == "+":
            return None
        if code == "-":
            pieces.append(f"[]{piece}[/]")
        elif code == " ":
            pieces.append(piece)
    return "".join(pieces).replace("[/][]", "").strip()


def derive_unsupported(doc_id: str, annotation: dict) -> list[Record]:
    """Key order differs by case, as in the official files: unedited sentences start with
    summ_idx, edited ones with id. summ_idx is the position in orig_summary."""
    a = _article(annotation)
    records = []
    for i, (before, after) in enumerate(zip(a.before, a.after)):
        if not after:
            continue
        if before == after:
            records.append({"summ_idx": i, "id": doc_id, "input_lines": a.evidence(i),
                            "summary": before, "annotated_summary": before})
            continue
        annotated = annotate_deleted_spans(before, after)
        if annotated is not None:
            records.append({"id": doc_id, "summ_idx": i, "input_lines": a.evidence(i),
                            "summary": before, "annotated_summary": annotated})
    return records


def derive_topic(doc_id: str, annotation: dict) -> list[Record]:
    """One record per section (keyed by section_name, as the official code does) that is the
    only section of some summary sentence's evidence; deleted sentences count too."""
    a = _article(annotation)
    inputs = [line["txt"] for line in a.source
              if not line["is_header"] or line["section_index"] == 0]
    by_section: dict[str, list[str]] = {}
    for sentence, group in zip(a.after, a.refs):
        names = {a.source[r]["section_name"] for r in sorted(group)}
        if len(names) == 1:
            by_section.setdefault(names.pop(), []).append(sentence)
    return [{"summ_idx": k, "id": doc_id, "input_lines": list(inputs),
             "topic_name": name.rstrip(".").strip(), "output_lines": sentences}
            for k, (name, sentences) in enumerate(by_section.items())]


DERIVERS: dict[str, Callable[[str, dict], list[Record]]] = {
    "abstractive_summarization": derive_abstractive,
    "multisentence_compression": derive_compression,
    "extractive_summarization": derive_extractive,
    "evidence_extraction": derive_evidence,
    "factuality_classification": derive_factuality,
    "fixing_factuality": derive_fixing,
    "unsupported_span_prediction": derive_unsupported,
    "topicbased_summarization": derive_topic,
}
assert tuple(DERIVERS) == TASK_FOLDERS


def derive_documents(documents: Iterable[tuple[str, dict]]) -> TaskDatasets:
    """Records of every task for (doc_id, annotation) pairs, in document order."""
    datasets: TaskDatasets = {task: [] for task in TASK_FOLDERS}
    for doc_id, annotation in documents:
        for task, derive in DERIVERS.items():
            datasets[task].extend(derive(doc_id, annotation))
    return datasets


def _derive_jobs(raw_dir: Path, jobs: list[SplitJob], progress: bool,
                 digests: dict[str, str] | None = None) -> dict[str, dict]:
    result: dict[str, dict] = {}
    for variant, split, documents in iter_documents(raw_dir, jobs, progress):
        if digests is not None:
            digests.update((relative, source_digest(annotation))
                           for relative, annotation in documents if relative not in digests)
        per_task = derive_documents(documents)
        by_task = result.setdefault(variant, {task: {} for task in TASK_FOLDERS})
        for task, records in per_task.items():
            by_task[task][split] = records
    return result


def derive_split(raw_dir: str | Path, variant: str, split: str) -> TaskDatasets:
    """task folder -> records for one variant and split."""
    if split not in SPLITS:
        raise DataError(f"unknown split '{split}'; expected one of {', '.join(SPLITS)}")
    raw_dir = Path(raw_dir)
    derived = _derive_jobs(raw_dir, plan_splits(raw_dir, [variant], [split]), progress=False)
    return {task: by_split[split] for task, by_split in derived[variant].items()}


def derive_all(raw_dir: str | Path, variants: Iterable[str] | None = None, *,
               progress: bool = True, problems: list[str] | None = None
               ) -> dict[str, dict[str, dict[str, list[Record]]]]:
    """variant -> task -> split -> records. Reads and validates every input first. A list
    given as `problems` receives the split files' duplicates and cross-split overlaps."""
    raw_dir = Path(raw_dir)
    jobs, digests = plan_splits(raw_dir, variants), {}
    derived = _derive_jobs(raw_dir, jobs, progress, digests)
    if problems is not None:
        for job in jobs:
            problems += duplicate_problems(job.variant, job.split, job.split_file,
                                           job.entries, digests)
        for variant in dict.fromkeys(job.variant for job in jobs):
            problems += overlap_problems(variant, {
                job.split: [relative for _, relative in job.entries]
                for job in jobs if job.variant == variant}, digests)
    return derived


def check_output_folder(out_dir: Path, raw_dir: Path) -> None:
    out, raw = out_dir.resolve(), raw_dir.resolve()
    if out == raw or raw.is_relative_to(out) or out.is_relative_to(raw):
        raise DataError("output folder must lie outside the raw folder and not contain it",
                        path=str(out_dir))
    if out.exists() and not out.is_dir():
        raise DataError("output path exists and is not a folder", path=str(out_dir))
    if out.is_dir() and any(out.iterdir()) and not (out / BUILD_INFO_FILE).is_file():
        raise DataError(f"output folder exists, is not empty and holds no {BUILD_INFO_FILE} "
                        f"from an earlier build; refusing to replace it", path=str(out_dir))


def write_task_datasets(datasets: dict, out_dir: Path) -> dict[str, str]:
    """Write OUT/<variant>/<task>/<split>.jsonl; return {relative path: sha256}."""
    digests = {}
    for variant, by_task in datasets.items():
        for task, by_split in by_task.items():
            for split, records in by_split.items():
                data = "".join(dumps_record(r) + "\n" for r in records).encode("utf-8")
                relative = f"{variant}/{task}/{split}.jsonl"
                (out_dir / variant / task).mkdir(parents=True, exist_ok=True)
                (out_dir / relative).write_bytes(data)
                digests[relative] = hashlib.sha256(data).hexdigest()
    return digests


def record_counts(datasets: dict) -> dict[str, dict[str, dict[str, int]]]:
    return {variant: {task: {split: len(records) for split, records in by_split.items()}
                      for task, by_split in by_task.items()}
            for variant, by_task in datasets.items()}


def build_task_datasets(raw_dir: str | Path, out_dir: str | Path,
                        variants: Iterable[str] | None = None, *, progress: bool = True,
                        strict: bool = False) -> dict[str, dict[str, dict[str, int]]]:
    """Derive everything, then write OUT all at once (or nothing on error).

    OUT is replaced as a whole; a non-empty OUT that is not an earlier build is refused.
    Returns variant -> task -> split -> record count; OUT/build_info.json holds the same,
    the sha256 of every file, a digest of the raw files read (`raw_sha256`, see
    `reusable_build`), the split problems (`warnings`) and the provenance. Duplicate
    documents in a split and documents shared by two splits are printed as warnings, or
    with `strict` raised as a DataError before anything is written.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    check_output_folder(out_dir, raw_dir)
    problems: list[str] = []
    datasets = derive_all(raw_dir, variants, progress=progress, problems=problems)
    if problems and strict:
        raise DataError("split problems (--strict): " + "; ".join(problems))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    counts = record_counts(datasets)
    with atomic_directory(out_dir) as staging:
        digests = write_task_datasets(datasets, staging)
        write_json(staging / BUILD_INFO_FILE, {
            "format": BUILD_INFO_FORMAT, "raw_dir": str(raw_dir.resolve()),
            "variants": list(datasets), "records": counts, "sha256": digests,
            "raw_sha256": raw_input_digest(raw_dir, list(datasets)),
            "warnings": problems,
            "provenance": provenance({"raw_dir": str(raw_dir), "variants": list(datasets),
                                      "word_tokenizer": word_tokenizer_name()}),
        })
    return counts


def reusable_build(out_dir: str | Path, raw_dir: str | Path, variants: Iterable[str]) -> bool:
    """Whether OUT holds a build of `raw_dir` covering `variants` whose raw files are still
    those it was derived from (an edited annotation or split file means: derive again)."""
    info_path = Path(out_dir) / BUILD_INFO_FILE
    if not info_path.is_file():
        return False
    built = read_json(info_path, what="build info")
    if not isinstance(built, dict) or built.get("raw_dir") != str(Path(raw_dir).resolve()):
        return False
    built_variants = built.get("variants") or []
    return set(variants) <= set(built_variants) and \
        built.get("raw_sha256") == raw_input_digest(raw_dir, built_variants)

