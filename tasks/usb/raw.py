"""Reading a raw USB folder: the annotation schema the derivation reads, the split files
(`splits/<variant>/<split>.txt`, one annotation path per line), the listed documents, and a
digest of everything read (so a derived folder can tell when its raw input changed)."""
from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from tasks.plumbing.errors import DataError, json_type
from tasks.plumbing.io import file_sha256, read_json, read_text
from tasks.usb.layout import SPLITS


def _expect(value, kind: type | tuple, what: str, path: str, field: str):
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DataError(f"expected {what}, got {json_type(value)}", path=path, field=field)
    return value


def _member(mapping: dict, key: str, kind, what: str, path: str, field: str):
    if key not in mapping:
        raise DataError("missing key", path=path, field=field)
    return _expect(mapping[key], kind, what, path, field)


def validate_annotation(annotation, path: str) -> None:
    """Raise DataError (file, field) unless `annotation` has the raw schema the rules read."""
    _expect(annotation, dict, "a JSON object", path, "(top level)")
    body = _member(annotation, "annotations", dict, "an object", path, "annotations")
    source = _member(body, "source", list, "a list", path, "annotations.source")
    for j, line in enumerate(source):
        at = f"annotations.source[{j}]"
        _expect(line, dict, "an object", path, at)
        _member(line, "txt", str, "a string", path, at + ".txt")
        _member(line, "is_header", bool, "a boolean", path, at + ".is_header")
        _member(line, "section_index", int, "an integer", path, at + ".section_index")
        _member(line, "section_name", str, "a string", path, at + ".section_name")
    orig = _member(body, "orig_summary", list, "a list", path, "annotations.orig_summary")
    for i, sentence in enumerate(orig):
        _expect(sentence, dict, "an object", path, f"annotations.orig_summary[{i}]")
        _member(sentence, "txt", str, "a string", path, f"annotations.orig_summary[{i}].txt")
    edits = _member(body, "annotations", dict, "an object", path, "annotations.annotations")
    _validate_edits(edits, len(orig), len(source), path)


def _validate_edits(edits: dict, n_summary: int, n_source: int, path: str) -> None:
    field = "annotations.annotations"
    after = _member(edits, "summary_sents", list, "a list", path, field + ".summary_sents")
    refs = _member(edits, "refs", list, "a list", path, field + ".refs")
    for name, values in (("summary_sents", after), ("refs", refs)):
        if len(values) != n_summary:
            raise DataError(f"has {len(values)} entries but annotations.orig_summary has "
                            f"{n_summary}", path=path, field=f"{field}.{name}")
    for i, sentence in enumerate(after):
        _expect(sentence, str, "a string", path, f"{field}.summary_sents[{i}]")
    for i, group in enumerate(refs):
        _expect(group, list, "a list of source indices", path, f"{field}.refs[{i}]")
        for k, ref in enumerate(group):
            at = f"{field}.refs[{i}][{k}]"
            _expect(ref, int, "an integer source index", path, at)
            if not 0 <= ref < n_source:
                raise DataError(f"evidence index {ref} is out of range: annotations.source has "
                                f"{n_source} lines", path=path, field=at)


def list_variants(raw_dir: str | Path) -> list[str]:
    splits = Path(raw_dir) / "splits"
    if not splits.is_dir():
        raise DataError("splits folder not found (expected RAW/splits/<variant>/<split>.txt)",
                        path=str(splits))
    return sorted(p.name for p in splits.iterdir() if p.is_dir())


def read_split_file(path: Path) -> list[tuple[int, str]]:
    """(1-based line, annotation path) for each non-blank line; rejects unsafe paths."""
    if not path.is_file():
        raise DataError("split file not found", path=str(path))
    entries = []
    for number, line in enumerate(read_text(path, what="split file").splitlines(), start=1):
        relative = line.strip()
        if not relative:
            continue
        parts = PurePosixPath(relative).parts
        if relative.startswith(("/", "\\")) or ".." in parts or ":" in relative:
            raise DataError(f"annotation path '{relative}' must be relative to annotations/ "
                            f"and stay inside it", path=str(path), line=number)
        entries.append((number, relative))
    return entries


def load_annotation(annotations_dir: Path, relative: str, split_file: Path,
                    line: int) -> dict:
    """Parse and validate one annotation file listed at `split_file`:`line`."""
    path = annotations_dir / relative
    if not path.is_file():
        raise DataError(f"listed annotation file not found: {path}", path=str(split_file),
                        line=line)
    annotation = read_json(path, what="annotation file")
    validate_annotation(annotation, str(path))
    return annotation


class SplitJob(NamedTuple):
    variant: str
    split: str
    split_file: Path
    entries: list[tuple[int, str]]


def plan_splits(raw_dir: Path, variants: Iterable[str] | None,
                splits: Iterable[str] = SPLITS) -> list[SplitJob]:
    available = list_variants(raw_dir)
    chosen = list(dict.fromkeys(variants)) if variants else available
    if not chosen:
        raise DataError("no variant folders found", path=str(raw_dir / "splits"))
    jobs = []
    for variant in chosen:
        if variant not in available:
            raise DataError(f"variant folder not found; available: {', '.join(available)}",
                            path=str(raw_dir / "splits" / variant))
        for split in splits:
            split_file = raw_dir / "splits" / variant / f"{split}.txt"
            jobs.append(SplitJob(variant, split, split_file, read_split_file(split_file)))
    return jobs


def iter_documents(raw_dir: Path, jobs: list[SplitJob], progress: bool = False
                   ) -> Iterator[tuple[str, str, list[tuple[str, dict]]]]:
    """(variant, split, [(article id, validated annotation), ...]) per job; every file is
    read once whatever the number of variants listing it."""
    from tqdm.auto import tqdm
    annotations_dir = raw_dir / "annotations"
    cache: dict[str, dict] = {}
    total = sum(len(job.entries) for job in jobs)
    with tqdm(total=total, desc="USB documents", unit="doc", file=sys.stderr,
              disable=None if progress else True) as bar:
        for job in jobs:
            documents = []
            for line, relative in job.entries:
                if relative not in cache:
                    cache[relative] = load_annotation(annotations_dir, relative,
                                                      job.split_file, line)
                documents.append((relative, cache[relative]))
                bar.update(1)
            yield job.variant, job.split, documents


def read_documents(raw_dir: str | Path, variants: Iterable[str] | None = None,
                   splits: Iterable[str] = SPLITS
                   ) -> Iterator[tuple[str, str, list[tuple[str, dict]]]]:
    """(variant, split, documents) of a raw folder's split files (all variants by default)."""
    raw_dir = Path(raw_dir)
    return iter_documents(raw_dir, plan_splits(raw_dir, variants, splits))


def raw_input_digest(raw_dir: str | Path, variants: Iterable[str] | None = None) -> str:
    """sha256 over the split files of `variants` and every annotation file they list (names
    and contents): what a folder derived from them was built from."""
    raw_dir = Path(raw_dir)
    digest, seen = hashlib.sha256(), set()
    for job in plan_splits(raw_dir, variants):
        digest.update(f"{job.variant}/{job.split}\0{file_sha256(job.split_file)}\0".encode())
        for _, relative in job.entries:
            if relative not in seen:
                seen.add(relative)
                path = raw_dir / "annotations" / relative
                content = file_sha256(path) if path.is_file() else "missing"
                digest.update(f"{relative}\0{content}\0".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
