"""Gold of the `summaries` and `evaluators` tracks (REALSumm/PyrXSum-layout folders) and the
base class of the two tracks (one board per set; lines keyed by id fields, one value each).

A folder (see tasks.qapyramid.pyramid_data) becomes one JSON payload: ids, the documents
(public inputs: what the summaries track's QuestEval column compares a summary with), cleaned
references, SCUs and STUs, the human-judged systems' summaries and SCU presence labels, the
lexical presence threshold calibrated on the folder's train split (so the server never needs
the folder again), and the sha256 of every file read. An optional `qas.jsonl` beside the
other files (`{"id": ..., "qas": ["<question> <answer>", ...]}` per line, every id once) adds
QA units, which enable the QAPyramid evaluator of the summaries track. Unit files given beside
a folder (`init --pyramid-units NAME:KIND=FILE`: the SCU-approximation study's SMUs, SGUs,
SSUs or n-grams, one line per example, TAB-separated, or the paper's JSON) are kept under
their kind, and their digests join the gold's.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from leaderboard.evaluators.pyramid.scoring import lexical_calibration
from leaderboard.tracks.base import (
    ErrorCollector,
    Track,
    check_id_types,
    check_item,
    report_missing,
    unplaced_count,
)
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import file_sha256, iter_jsonl
from tasks.qapyramid.pyramid_data import PyramidDataset, load_pyramid_dataset
from tasks.units.kinds import GOLD, UnitKind, check_unit_kind, spellings
from tasks.units.unit_files import read_example_units

QA_FILE = "qas.jsonl"
BOARD = "all"
#: the unit kinds a gold may add from files beside its folder, as the gold keys them (file-given
#: sentences as "ssus": stored golds, their digests and `ssus` columns read that key)
EXTRA_UNIT_KINDS = spellings(UnitKind.SMUS, UnitKind.SGUS, UnitKind.SENTENCES, UnitKind.NGRAMS,
                             spelling=GOLD)


def folder_digest(root: Path) -> str:
    """sha256 over the relative paths and bytes of every file of the folder (sorted)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def read_qa_units(path: Path, ids: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """QA units per example (ids order) from a qas.jsonl file; every id exactly once."""
    by_id: dict[str, tuple[str, ...]] = {}
    for line, record in iter_jsonl(path):
        example_id, qas = record.get("id"), record.get("qas")
        if example_id not in ids:
            raise DataError(f"unknown example id {example_id!r}", path=str(path), line=line,
                            field="id")
        if example_id in by_id:
            raise DataError(f"example {example_id!r} listed twice", path=str(path), line=line,
                            field="id")
        if not isinstance(qas, list) or not qas or not all(isinstance(q, str) and q.strip()
                                                         for q in qas):
            raise DataError("expected a non-empty list of QA strings", path=str(path),
                            line=line, field="qas")
        by_id[example_id] = tuple(qas)
    missing = [example_id for example_id in ids if example_id not in by_id]
    if missing:
        raise DataError(f"no QAs for {len(missing)} examples (first: {missing[0]})",
                        path=str(path))
    return tuple(by_id[example_id] for example_id in ids)


def read_extra_units(unit_files: Mapping[str, str], count: int) -> tuple[dict, dict]:
    """({kind: units per example}, {kind: sha256 of its file}) of the extra unit files (a
    kind in any spelling of tasks.units.kinds, kept as EXTRA_UNIT_KINDS spells it); every
    file holds `count` examples, each with at least one unit."""
    units, digests = {}, {}
    for given, path in sorted(unit_files.items()):
        kind = check_unit_kind(given, EXTRA_UNIT_KINDS, "extra unit kind")
        if kind in units:
            raise SumbenchError(f"two unit files of kind {kind!r} (one is given as {given!r})")
        units[kind] = [list(example) for example in read_example_units(path, count)]
        digests[kind] = file_sha256(path)
    return units, digests


def load_pyramid_gold(folder: str | Path, unit_files: Mapping[str, str] | None = None) -> dict:
    """The gold payload of one REALSumm/PyrXSum-layout folder (and its extra unit files)."""
    root = Path(folder).resolve()
    if not root.is_dir():
        raise SumbenchError(f"{root}: no such Pyramid data folder")
    dataset = load_pyramid_dataset(root, unit_kinds=("scus", "stus"), labels=True,
                                   require_labels=True)
    units = {kind: [list(example) for example in dataset.units[kind]]
             for kind in dataset.units}
    if (root / QA_FILE).is_file():
        units["qas"] = [list(example) for example in read_qa_units(root / QA_FILE,
                                                                   dataset.ids)]
    extra, digests = read_extra_units(unit_files or {}, len(dataset.ids))
    units.update(extra)
    calibration = lexical_calibration(root)
    digest = folder_digest(root)
    if digests:
        digest = hashlib.sha256(json.dumps([digest, digests], sort_keys=True).encode())\
            .hexdigest()
    return {"name": root.name, "sha256": digest, "ids": list(dataset.ids),
            **({"unit_files": digests} if digests else {}),
            "documents": list(dataset.documents),
            "references": list(dataset.references), "units": units,
            "summaries": {system: list(texts) for system, texts in dataset.summaries.items()},
            "labels": {system: [list(row) for row in rows]
                       for system, rows in dataset.labels.items()},
            "lexical_threshold": calibration["threshold"],
            "calibration": {key: calibration[key] for key in ("split", "seed", "n_examples")}}


def dataset_of(payload: Mapping) -> PyramidDataset:
    """The payload as a PyramidDataset (root: the payload name; empty documents where a
    payload stored before documents were kept has none)."""
    count = len(payload["ids"])
    return PyramidDataset(
        name=payload["name"], root=payload["name"], ids=tuple(payload["ids"]),
        documents=tuple(payload.get("documents") or ("",) * count),
        references=tuple(payload["references"]),
        units={kind: tuple(tuple(example) for example in examples)
               for kind, examples in payload["units"].items()},
        summaries={system: tuple(texts) for system, texts in payload["summaries"].items()},
        labels={system: tuple(tuple(row) for row in rows)
                for system, rows in payload["labels"].items()})


def load_gold_folders(sources) -> dict[str, dict[str, dict]]:
    """board "all" -> dataset name -> payload, for one or several folders (each a path, or
    (path, {kind: unit file}))."""
    folders = [sources] if isinstance(sources, (str, Path)) else list(sources)
    parts: dict[str, dict] = {}
    for source in folders:
        folder, unit_files = source if isinstance(source, tuple) else (source, None)
        payload = load_pyramid_gold(folder, unit_files)
        if payload["name"] in parts:
            raise SumbenchError(f"two Pyramid folders are named {payload['name']!r}")
        parts[payload["name"]] = payload
    return {BOARD: parts}


def human_pyramid(payload: Mapping) -> dict[str, list[float]]:
    """system -> per-example human Pyramid score (share of SCUs labelled present)."""
    return {system: [sum(row) / len(row) for row in rows]
            for system, rows in payload["labels"].items()}


class PyramidSetTrack(Track):
    """A track over Pyramid sets: one board (and part) per set; each submitted line names a
    set (`dataset`), an item (`id_fields`) and carries one value (`value_field`, checked by
    `value_problem`)."""

    part_kind = "dataset"
    id_fields: tuple[str, ...] = ("id",)
    value_field: str = "value"

    def load_gold(self, source) -> dict[str, dict[str, dict]]:
        (parts,) = load_gold_folders(source).values()
        return {name: {name: payload} for name, payload in parts.items()}

    def manifest_items(self, payload: Mapping) -> list[dict]:
        return [{"id": example_id} for example_id in payload["ids"]]

    def manifest(self, gold, board: str) -> dict:
        return {"track": self.name, "board": board,
                "parts": {board: self.manifest_items(gold[board][board])}}

    def manifest_from_records(self, located, board: str) -> dict:
        items: dict[tuple, dict] = {}
        for _, _, record in located:
            if all(isinstance(record.get(field), str) for field in self.id_fields):
                item = {field: record[field] for field in self.id_fields}
                items.setdefault(tuple(item.values()), item)
        return {"track": self.name, "board": board, "parts": {board: list(items.values())}}

    def value_problem(self, value) -> str | None:
        """Why a submitted value is unusable, or None."""
        raise NotImplementedError

    def _describe(self, key: tuple) -> str:
        return ", ".join(f"{field}={value!r}" for field, value in zip(self.id_fields, key))

    def check(self, located, manifest: Mapping) -> dict[str, list[dict]]:
        errors, board = ErrorCollector(), manifest["board"]
        expected = {tuple(item[f] for f in self.id_fields): item
                    for item in manifest["parts"][board]}
        seen: dict[tuple, tuple[str, int]] = {}
        values: dict[tuple, object] = {}
        unplaced: list[tuple | None] = []  # keys of records rejected before being counted
        for entry in located:
            path, line, record = entry
            if record.get("dataset") != board:
                errors.add(f"expected dataset {board!r}, got {record.get('dataset')!r}",
                           path=path, line=line, field="dataset")
                continue
            if not check_id_types(errors, entry, self.id_fields):
                unplaced.append(None)
                continue
            key = tuple(record[field] for field in self.id_fields)
            problem = self.value_problem(record.get(self.value_field))
            if problem:
                errors.add(problem, path=path, line=line, field=self.value_field)
                unplaced.append(key)
                continue
            if check_item(errors, entry, seen, key, expected,
                          lambda key=key: self._describe(key)):
                values[key] = record[self.value_field]
            else:  # unknown, or a duplicate (left out by unplaced_count)
                unplaced.append(key)
        report_missing(errors, board, list(expected), seen, self._describe,
                       unplaced=unplaced_count(unplaced, seen))
        errors.raise_if_any()
        return {board: [{**dict(zip(self.id_fields, key)), self.value_field: values[key]}
                        for key in expected]}
