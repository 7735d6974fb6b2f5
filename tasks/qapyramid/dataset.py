"""The QAPyramid dataset format: local JSON/JSONL or the hub `shiyue/QAPyramid`, and id splits.

A record (one CNN/DM test example) has `example_id`, `source`, `reference`, `QAs` (QA-SRL
pairs, each "question? answer"), and for the 50 annotated examples `QA_labels`
({system: [0/1 per QA]}, majority of 3 annotators) and `system_outputs` ({system: text}); the
hub gives `null` for systems without labels or outputs, which are skipped. Extra fields
(e.g. `system_scores`) are ignored.

Local files: a JSON Lines file (one record per line), or a JSON file holding a list of records
or an object with one list of records (e.g. {"cnndm_test": [...]}). A folder is searched for
`QAPyramid.jsonl`, `QAPyramid.json`, `cnndm_test.jsonl`, `cnndm_test.json` in that order.
Without a local source the hub is read through a downloader: any callable taking the repo id
and returning the records (or a local file path); the default one uses `datasets` (split
`cnndm_test`) and fails cleanly when offline.

The raw judgments file `QA_presence.json` holds, per system and example, the QAs grouped by
predicate with each annotator's vote — but no source, reference or summary text. Alone it
supports predicate groupings of the gold QAs and presence labels; QA generation inputs need the
reference text and presence inputs need the system summaries, which only the dataset format
(or texts supplied by the caller) provides. `raw_predicate_groups` reads the groupings.

Splits: an example goes to train / validation / test (60/20/20) by a seeded hash of its id
(`split_of`), so every unit and system of one example lands in the same split.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.metrics.qa import split_qa
from tasks.plumbing.errors import DataError, SumbenchError, check_choice, json_type
from tasks.plumbing.io import iter_jsonl, read_json
from tasks.qapyramid.judgments import load_qa_judgments
from tasks.qapyramid.units import group_by_predicate

HUB_REPO_ID = "shiyue/QAPyramid"
HUB_SPLIT = "cnndm_test"
DATA_FILE_NAMES = ("QAPyramid.jsonl", "QAPyramid.json", "cnndm_test.jsonl", "cnndm_test.json")
#: cumulative split boundaries over the hash position in [0, 1)
SPLIT_FRACTIONS = (("train", 0.6), ("validation", 0.2), ("test", 0.2))
DEFAULT_SPLIT_SEED = 0

Downloader = Callable[[str], Any]


# ---- id-based splits ---------------------------------------------------------------------
def split_position(example_id: str, seed: int = DEFAULT_SPLIT_SEED) -> float:
    """A uniform number in [0, 1) from SHA-256 of "seed:example_id" (first 64 bits)."""
    digest = hashlib.sha256(f"{seed}:{example_id}".encode()).hexdigest()
    return int(digest[:16], 16) / 2 ** 64


def split_of(example_id: str, seed: int = DEFAULT_SPLIT_SEED) -> str:
    """train (60%), validation (20%) or test (20%) for an example id."""
    position, bound = split_position(example_id, seed), 0.0
    for name, fraction in SPLIT_FRACTIONS:
        bound += fraction
        if position < bound:
            return name
    return SPLIT_FRACTIONS[-1][0]


def check_split(split: str) -> str:
    return check_choice(split, [*(name for name, _ in SPLIT_FRACTIONS), "all"], "split")


def in_split(example_id: str, split: str, seed: int = DEFAULT_SPLIT_SEED) -> bool:
    """Whether the example belongs to `split` ("all" keeps everything)."""
    return check_split(split) == "all" or split_of(example_id, seed) == split


# ---- records -----------------------------------------------------------------------------
@dataclass(frozen=True)
class QAPyramidExample:
    example_id: str
    source: str
    reference: str
    qas: tuple[tuple[str, str], ...]
    qa_labels: dict[str, tuple[int, ...]] = field(default_factory=dict)
    system_outputs: dict[str, str] = field(default_factory=dict)

    def predicate_groups(self) -> list[list[int]]:
        """QA indices grouped by predicate (heuristic of `units.group_by_predicate`)."""
        return group_by_predicate(self.qas)

    @property
    def labelled_systems(self) -> list[str]:
        """Systems with both labels and a summary, in record order."""
        return [s for s in self.qa_labels if self.system_outputs.get(s) is not None]


def _text(record: dict, name: str, where: dict, required: bool = True) -> str:
    value = record.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise DataError("expected a non-empty string", field=name, **where)
    return value


def _labels(record: dict, n_qas: int, where: dict) -> dict[str, tuple[int, ...]]:
    raw = record.get("QA_labels") or {}
    if not isinstance(raw, dict):
        raise DataError("expected an object {system: [0/1 per QA]}", field="QA_labels", **where)
    labels = {}
    for system, values in raw.items():
        if values is None:
            continue
        if (not isinstance(values, list) or len(values) != n_qas
                or any(v not in (0, 1) or isinstance(v, bool) for v in values)):
            raise DataError(f"expected {n_qas} labels of 0/1 (one per QA)",
                            field=f"QA_labels.{system}", **where)
        labels[str(system)] = tuple(int(v) for v in values)
    return labels


def _outputs(record: dict, where: dict) -> dict[str, str]:
    raw = record.get("system_outputs") or {}
    if not isinstance(raw, dict):
        raise DataError("expected an object {system: text}", field="system_outputs", **where)
    for system, text in raw.items():
        if text is not None and not isinstance(text, str):
            raise DataError("expected a string", field=f"system_outputs.{system}", **where)
    return {str(system): text for system, text in raw.items() if text is not None}


def parse_record(record: Any, where: dict) -> QAPyramidExample:
    """Validate one dataset record; `where` holds `path` and `line` for error messages."""
    if not isinstance(record, dict):
        raise DataError(f"expected a JSON object, got {json_type(record)}", **where)
    qas = record.get("QAs")
    if not isinstance(qas, list) or not all(isinstance(qa, str) and qa.strip() for qa in qas):
        raise DataError("expected a list of \"question? answer\" strings", field="QAs", **where)
    return QAPyramidExample(
        example_id=_text(record, "example_id", where),
        source=_text(record, "source", where, required=False),
        reference=_text(record, "reference", where),
        qas=tuple(split_qa(qa) for qa in qas),
        qa_labels=_labels(record, len(qas), where),
        system_outputs=_outputs(record, where))


def _json_records(path: Path) -> Iterable[tuple[dict, Any]]:
    data = read_json(path, what="QAPyramid data file")
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))
    if not isinstance(data, list):
        hint = ""
        if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
            hint = ("; this looks like the raw judgments file (QA_presence.json), which holds "
                    "no reference or summary texts: use the dataset format (shiyue/QAPyramid)")
        raise DataError(f"expected a list of records (or an object holding one list){hint}",
                        path=str(path))
    return [({"path": f"{path}[record {i}]"}, record) for i, record in enumerate(data)]


def read_examples(path: str | os.PathLike) -> list[QAPyramidExample]:
    """Records of a local JSON or JSONL file (see module docstring), validated."""
    path = Path(path)
    if not path.is_file():
        raise DataError("QAPyramid data file not found", path=str(path))
    if path.suffix == ".jsonl":
        pairs = [({"path": str(path), "line": line}, record)
                 for line, record in iter_jsonl(path)]
    else:
        pairs = _json_records(path)
    return _unique([(where, parse_record(record, where)) for where, record in pairs])


def _place(where: dict) -> str:
    return f"{where['path']}:{where['line']}" if "line" in where else where["path"]


def _unique(located: list[tuple[dict, QAPyramidExample]]) -> list[QAPyramidExample]:
    """The examples; an example_id given twice is an error at its second record, naming the
    first."""
    first: dict[str, dict] = {}
    for where, example in located:
        if example.example_id in first:
            raise DataError(f"duplicate example_id {example.example_id!r} (first at "
                            f"{_place(first[example.example_id])})", field="example_id",
                            **where)
        first[example.example_id] = where
    return [example for _, example in located]


def find_data_file(directory: str | os.PathLike) -> Path:
    directory = Path(directory)
    for name in DATA_FILE_NAMES:
        if (directory / name).is_file():
            return directory / name
    raise DataError(f"no QAPyramid data file (looked for {', '.join(DATA_FILE_NAMES)})",
                    path=str(directory))


def hub_downloader(repo_id: str) -> list[dict]:
    """Records of the hub dataset (split `cnndm_test`) via `datasets.load_dataset`."""
    try:
        from datasets import load_dataset

        return list(load_dataset(repo_id, split=HUB_SPLIT))
    except Exception as error:  # offline, missing dataset, hub errors: one clear message
        raise SumbenchError(f"could not load {repo_id!r} from the Hugging Face hub "
                            f"({type(error).__name__}: {error}); pass a local JSON/JSONL "
                            f"file instead") from None


def load_examples(source: str | os.PathLike | None = None,
                  downloader: Downloader | None = None,
                  repo_id: str = HUB_REPO_ID) -> list[QAPyramidExample]:
    """QAPyramid examples from a local file/folder, or from the hub when `source` is None."""
    if source is not None:
        path = Path(source)
        return read_examples(find_data_file(path) if path.is_dir() else path)
    fetched = (downloader or hub_downloader)(repo_id)
    if isinstance(fetched, (str, os.PathLike)):
        return load_examples(fetched)
    places = [{"path": f"{repo_id}[record {i}]"} for i in range(len(fetched))]
    return _unique([(where, parse_record(record, where))
                    for where, record in zip(places, fetched)])


def raw_predicate_groups(path: str | os.PathLike) -> dict[str, list[tuple[str, list]]]:
    """From QA_presence.json: per example id, [(predicate_id, [(question, answer), ...])]
    in predicate-number order (every system carries the same QAs; the first system's are read)."""
    grouped: dict[str, dict[str, list]] = {}
    first_system: dict[str, str] = {}
    for item in load_qa_judgments(path):
        if first_system.setdefault(item.example_id, item.system) != item.system:
            continue
        predicates = grouped.setdefault(item.example_id, {})
        predicates.setdefault(item.predicate_id, []).append((item.question, item.answer))
    return {example_id: sorted(predicates.items(), key=lambda pair: _predicate_number(pair[0]))
            for example_id, predicates in grouped.items()}


def _predicate_number(predicate_id: str) -> tuple[int, str]:
    tail = predicate_id.rsplit("_", 1)[-1]
    return (int(tail), predicate_id) if tail.isdigit() else (10 ** 9, predicate_id)
