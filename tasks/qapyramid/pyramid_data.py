"""Loader for Pyramid meta-evaluation folders (REALSumm, PyrXSum).

Layout of a folder (see shared/README.md), one example per line, all files aligned with ids.txt:

    ids.txt, documents.txt, references.txt
    SCUs.txt, STUs.txt          units of each reference, TAB-separated
    summaries/<system>.summary  one summary per line
    labels/<system>.label       TAB-separated 0/1 presence of each SCU of SCUs.txt

Every file is checked: line counts against ids.txt, no empty id/reference/summary/unit, labels
that are 0/1 and exactly as many per line as the example has SCUs. Errors name the file, the
1-based line and the field. A single final newline is allowed; "\\r\\n" line ends are accepted.

References keep their text except for REALSumm's sentence tags: `<t>` and `</t>` are removed and
white space collapsed (`clean_reference`), so ROUGE and sentence splitting see plain text.
The "sentences" units (the SSU baseline) are the cleaned reference split with
`pysbd.Segmenter(language="en", clean=False)`, each sentence stripped.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks.plumbing.errors import DataError, check_choices
from tasks.plumbing.io import read_item_lines, read_text, refuse_non_file
from tasks.units.kinds import UnitKind, check_unit_kind, spellings

#: unit kinds: human SCUs, automatic STUs, reference sentences (SSUs)
UNIT_KINDS = spellings(UnitKind.SCUS, UnitKind.STUS, UnitKind.SENTENCES)
UNIT_FILES = {UnitKind.SCUS.value: "SCUs.txt", UnitKind.STUS.value: "STUs.txt"}
SUMMARY_DIR, SUMMARY_SUFFIX = "summaries", ".summary"
LABEL_DIR, LABEL_SUFFIX = "labels", ".label"
_SENTENCE_TAG = re.compile(r"</?t>")

Units = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class PyramidDataset:
    """One Pyramid meta-evaluation folder, aligned over examples (the order of ids.txt).

    `units[kind][i]` are the units of example i; `summaries[system][i]` its summary;
    `labels[system][i][j]` the human presence (0/1) of SCU j in that summary.
    """
    name: str
    root: str
    ids: tuple[str, ...]
    documents: tuple[str, ...]
    references: tuple[str, ...]
    units: dict[str, Units] = field(default_factory=dict)
    summaries: dict[str, tuple[str, ...]] = field(default_factory=dict)
    labels: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    @property
    def systems(self) -> tuple[str, ...]:
        return tuple(sorted(self.summaries))

    def __len__(self) -> int:
        return len(self.ids)

    def label_path(self, system: str) -> str:
        return str(Path(self.root) / LABEL_DIR / f"{system}{LABEL_SUFFIX}")


def clean_reference(text: str) -> str:
    """Drop REALSumm's `<t>`/`</t>` sentence tags and collapse white space."""
    return " ".join(_SENTENCE_TAG.sub(" ", text).split())


def sentence_units(references: Iterable[str]) -> Units:
    """Each reference split into sentences (pysbd, English, clean=False), stripped."""
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)
    return tuple(tuple(s.strip() for s in segmenter.segment(clean_reference(text)) if s.strip())
                 for text in references)


def read_lines(path: str | os.PathLike, what: str) -> list[str]:
    """The lines of a UTF-8 text file (one final newline allowed; "\\r\\n" accepted)."""
    lines = read_text(path, what=f"{what} file").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _check_count(path: Path, lines: Sequence, expected: int, what: str) -> None:
    if len(lines) != expected:
        raise DataError(f"{len(lines)} {what} lines, but ids.txt has {expected} examples "
                        f"(files must be aligned line by line)", path=str(path))


def _check_nonempty(path: Path, lines: Sequence[str], what: str) -> None:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise DataError(f"empty {what} (every example needs a non-empty {what})",
                            path=str(path), line=number, field=what)


def _read_aligned(path: Path, expected: int, what: str) -> tuple[str, ...]:
    lines = read_lines(path, what)
    _check_count(path, lines, expected, what)
    _check_nonempty(path, lines, what)
    return tuple(lines)


def _read_ids(root: Path) -> tuple[str, ...]:
    path = root / "ids.txt"
    lines = read_lines(path, "ids")
    if not lines:
        raise DataError("no examples (ids.txt is empty)", path=str(path))
    _check_nonempty(path, lines, "id")
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        example_id = line.strip()
        if example_id in seen:
            raise DataError(f"duplicate id {example_id!r} (first on line {seen[example_id]})",
                            path=str(path), line=number, field="id")
        seen[example_id] = number
    return tuple(seen)


def read_units_file(path: str | os.PathLike, expected: int, rows: str,
                    what: str = "units file") -> Units:
    """The units of a TAB-separated file of `expected` lines (`rows` names what each line
    belongs to, in the error when the count differs)."""
    return parse_units(Path(path), read_item_lines(path, expected, what=what, lines_for=rows))


def parse_units(path: Path, lines: Sequence[str]) -> Units:
    """TAB-separated units per line; an empty unit is an error naming line and position."""
    units = []
    for number, line in enumerate(lines, start=1):
        row = tuple(unit.strip() for unit in line.split("\t"))
        for position, unit in enumerate(row, start=1):
            if not unit:
                raise DataError(f"empty unit {position} of {len(row)} (units are separated by "
                                f"one TAB)", path=str(path), line=number, field=f"unit {position}")
        units.append(row)
    return tuple(units)


def parse_labels(path: Path, lines: Sequence[str], scus: Units,
                 scus_path: Path) -> tuple[tuple[int, ...], ...]:
    """0/1 labels per line, exactly one per SCU of the same line of SCUs.txt."""
    labels = []
    for number, (line, units) in enumerate(zip(lines, scus), start=1):
        values = line.split("\t")
        if len(values) != len(units):
            raise DataError(f"{len(values)} labels but {scus_path.name} line {number} has "
                            f"{len(units)} SCUs", path=str(path), line=number, field="labels")
        row = []
        for position, value in enumerate(values, start=1):
            if value.strip() not in ("0", "1"):
                raise DataError(f"label {position} is {value!r}, expected 0 or 1",
                                path=str(path), line=number, field=f"label {position}")
            row.append(int(value))
        labels.append(tuple(row))
    return tuple(labels)


def list_systems(root: str | os.PathLike) -> list[str]:
    """System names of the folder: the `summaries/*.summary` files, sorted."""
    folder = Path(root) / SUMMARY_DIR
    if not folder.is_dir():
        raise DataError(f"no {SUMMARY_DIR}/ folder (expected {SUMMARY_DIR}/<system>"
                        f"{SUMMARY_SUFFIX} files)", path=str(folder))
    systems = sorted(p.name[:-len(SUMMARY_SUFFIX)] for p in folder.iterdir()
                     if p.is_file() and p.name.endswith(SUMMARY_SUFFIX))
    if not systems:
        raise DataError(f"no *{SUMMARY_SUFFIX} files", path=str(folder))
    return systems


def select_systems(available: Sequence[str], requested: Sequence[str] | None) -> list[str]:
    """`requested` (in the given order, duplicates dropped) or all; unknown names suggest."""
    if not requested:
        return list(available)
    return list(dict.fromkeys(check_choices(requested, available, "system", cutoff=0.5)))


def _load_units(root: Path, kinds: Iterable[str], count: int,
                references: Sequence[str]) -> dict[str, Units]:
    units: dict[str, Units] = {}
    for kind in (check_unit_kind(kind, UNIT_KINDS) for kind in kinds):
        if kind in units:  # named twice, in two spellings
            continue
        if kind == "sentences":
            units[kind] = sentence_units(references)
            continue
        path = root / UNIT_FILES[kind]
        lines = read_lines(path, kind)
        _check_count(path, lines, count, kind)
        units[kind] = parse_units(path, lines)
    return units


def _check_stray_labels(root: Path, systems: Sequence[str]) -> None:
    folder = root / LABEL_DIR
    if not folder.is_dir():
        return
    for path in sorted(folder.glob(f"*{LABEL_SUFFIX}")):
        if path.name[:-len(LABEL_SUFFIX)] not in systems:
            raise DataError(f"label file without a matching {SUMMARY_DIR}/"
                            f"{path.name[:-len(LABEL_SUFFIX)]}{SUMMARY_SUFFIX}", path=str(path))


def _load_labels(root: Path, systems: Sequence[str], scus: Units, count: int,
                 require: bool) -> dict[str, tuple[tuple[int, ...], ...]]:
    labels = {}
    for system in systems:
        path = root / LABEL_DIR / f"{system}{LABEL_SUFFIX}"
        refuse_non_file(path, "a labels file")
        if not path.is_file():
            if require:
                raise DataError(f"no human labels for system {system!r}", path=str(path))
            continue
        lines = read_lines(path, "labels")
        _check_count(path, lines, count, "label")
        labels[system] = parse_labels(path, lines, scus, root / UNIT_FILES["scus"])
    return labels


def load_pyramid_dataset(root: str | os.PathLike, systems: Sequence[str] | None = None,
                         unit_kinds: Sequence[str] = ("scus",), labels: bool = True,
                         require_labels: bool = False) -> PyramidDataset:
    """Load and validate a Pyramid folder.

    `systems`: a subset (default: every `summaries/*.summary`). `unit_kinds`: which units to
    load ("scus", "stus", "sentences"; tasks.units.kinds' other spellings, such as "ssus", read
    as these). `labels`: load `labels/<system>.label` where present
    (SCUs are then always loaded to check them); `require_labels`: a missing label file is an
    error.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError("Pyramid data folder not found", path=str(root))
    ids = _read_ids(root)
    documents = _read_aligned(root / "documents.txt", len(ids), "document")
    references = tuple(clean_reference(text) for text in
                       _read_aligned(root / "references.txt", len(ids), "reference"))
    available = list_systems(root)
    _check_stray_labels(root, available)
    chosen = select_systems(available, systems)
    kinds = list(dict.fromkeys([*unit_kinds, *(["scus"] if labels or require_labels else [])]))
    units = _load_units(root, kinds, len(ids), references)
    summaries = {system: _read_aligned(root / SUMMARY_DIR / f"{system}{SUMMARY_SUFFIX}",
                                       len(ids), "summary") for system in chosen}
    loaded_labels = (_load_labels(root, chosen, units["scus"], len(ids), require_labels)
                     if labels or require_labels else {})
    return PyramidDataset(name=root.name, root=str(root), ids=ids, documents=documents,
                          references=references, units=units, summaries=summaries,
                          labels=loaded_labels)
