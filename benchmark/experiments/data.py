"""Experiment data: the task datasets an experiment reads, and seeded article subsamples.

Source: a raw USB folder (`--raw`, derived once into OUT/data/full with the official
derivation) or a task-datasets folder (`--data`). Articles are named by the records' `id`
(the annotation path, e.g. `companies/doc7_2.json`); every task record of an article follows
it into a subsample, so all tasks see the same articles.

Subsampling draws, for each (domain, split), `count` article ids with a generator seeded by
(seed, domain, split) — the same ids whatever the other domains or the order they are
drawn in — and keeps the ids in their file order. A domain with fewer articles than asked
gives what it has, and the shortfall is reported.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks.base import SPLITS
from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.io import iter_jsonl, write_jsonl
from tasks.usb.derive import build_task_datasets, reusable_build


@dataclass(frozen=True)
class DataSource:
    """Where the task datasets come from: a raw folder or a task-datasets folder."""
    raw: str | None = None
    data: str | None = None

    def __post_init__(self) -> None:
        if bool(self.raw) == bool(self.data):
            raise SumbenchError("give exactly one of --raw (raw USB annotations) and --data "
                                "(task datasets)")
        folder = Path(self.raw or self.data)
        if not folder.is_dir():
            raise SumbenchError(f"{folder}: no such folder ({'--raw' if self.raw else '--data'})")

    def task_datasets(self, out: Path, variants: Sequence[str]) -> Path:
        """The task-datasets folder (derived into OUT/data/full from --raw when needed)."""
        if self.data:
            return Path(self.data).resolve()

        full = out / "data" / "full"
        if not reusable_build(full, self.raw, variants):
            build_task_datasets(self.raw, full, variants=list(variants), progress=False)
        return full.resolve()

    def available_variants(self) -> list[str]:
        """Variants (domains) the source has: split folders of a raw folder, or the
        variant folders of a task-datasets folder."""
        root = Path(self.raw) / "splits" if self.raw else Path(self.data)
        return sorted(path.name for path in root.iterdir() if path.is_dir()) \
            if root.is_dir() else []


def split_article_ids(data_dir: Path, variant: str, split: str,
                      tasks: Sequence[str]) -> list[str]:
    """Article ids of a variant's split (first seen order over the tasks' files)."""
    seen: dict[str, None] = {}
    for task in tasks:
        path = data_dir / variant / task / f"{split}.jsonl"
        if path.is_file():
            for _, record in iter_jsonl(path):
                seen.setdefault(str(record.get("id")), None)
    return list(seen)


def seeded_choice(ids: Sequence[str], count: int, seed: int, *labels: str) -> list[str]:
    """`count` ids (all when fewer) drawn with a generator seeded by (seed, labels), in the
    order of `ids`."""
    if count >= len(ids):
        return list(ids)
    key = hashlib.sha256("\x00".join([str(seed), *labels]).encode()).digest()
    rng = np.random.default_rng(int.from_bytes(key[:8], "little"))
    chosen = set(rng.choice(len(ids), size=count, replace=False).tolist())
    return [doc for index, doc in enumerate(ids) if index in chosen]


def write_subset(data_dir: Path, out_dir: Path, source_variant: str, target_variant: str,
                 split: str, tasks: Sequence[str], ids: Iterable[str]) -> dict[str, int]:
    """Copy the records of the chosen articles (file order kept); records per task."""
    keep = set(ids)
    counts = {}
    for task in tasks:
        path = data_dir / source_variant / task / f"{split}.jsonl"
        records = [record for _, record in iter_jsonl(path)] if path.is_file() else []
        chosen = [record for record in records if str(record.get("id")) in keep]
        write_jsonl(out_dir / target_variant / task / f"{split}.jsonl", chosen)
        counts[task] = len(chosen)
    return counts


def subsample_domain(data_dir: Path, out_dir: Path, domain: str, counts: Mapping[str, int],
                     seed: int, tasks: Sequence[str], target: str | None = None) -> dict:
    """Subsample each split of a domain into OUT/<target>/...; returns, per split, the
    requested and available article counts and the ids drawn (count None: every article)."""
    record = {}
    for split in SPLITS:
        ids = split_article_ids(data_dir, domain, split, tasks)
        wanted = counts.get(split)
        chosen = ids if wanted is None else seeded_choice(ids, wanted, seed, domain, split)
        write_subset(data_dir, out_dir, domain, target or domain, split, tasks, chosen)
        record[split] = {"requested": wanted, "available": len(ids), "ids": chosen}
    return record


def shortfalls(subsamples: Mapping[str, Mapping[str, dict]]) -> list[str]:
    """One sentence per (domain, split) with fewer articles than requested."""
    notes = []
    for domain, splits in sorted(subsamples.items()):
        for split, entry in splits.items():
            if entry["requested"] is not None and entry["available"] < entry["requested"]:
                notes.append(f"{domain} has {entry['available']} {split} articles; "
                             f"{entry['requested']} were requested, all {entry['available']} "
                             f"are used")
    return notes
