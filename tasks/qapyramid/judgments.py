"""Loader for the QAPyramid crowd judgments (`QA_presence.json`).

Shape: `{system: {example_id: {predicate_id: {"<question> <answer>": [[annotator, 0/1], ...]}}}}`.
The QA key is the QA-SRL question (ending in "?") followed by a space and the answer; it is
split at the first "?". Every level is checked; errors name the file and the JSON path of the
field at fault (and the line for malformed JSON). A QA must have at least one vote, each vote
an `[annotator_id, 0|1]` pair, and an annotator may vote only once per QA.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import DataError, json_type
from tasks.plumbing.io import read_json


@dataclass(frozen=True)
class QAJudgment:
    """The presence votes on one reference QA pair for one system summary."""
    system: str
    example_id: str
    predicate_id: str
    qa: str
    votes: tuple[tuple[str, int], ...]

    @property
    def question(self) -> str:
        return self.qa[:self.qa.index("?") + 1].strip() if "?" in self.qa else self.qa.strip()

    @property
    def answer(self) -> str:
        return self.qa[self.qa.index("?") + 1:].strip() if "?" in self.qa else ""

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(value for _, value in self.votes)


@dataclass(frozen=True)
class QAJudgments:
    """All judgments of a file, in file order."""
    path: str
    items: tuple[QAJudgment, ...]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[QAJudgment]:
        return iter(self.items)

    @property
    def systems(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(item.system for item in self.items))

    def examples(self, system: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(item.example_id for item in self.items
                                   if item.system == system))


def _json_path(*keys: Any) -> str:
    return "".join(f"[{json.dumps(key)}]" for key in keys)


def _expect_object(value: Any, path: str, keys: tuple, what: str) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"expected a JSON object of {what}, got {json_type(value)}",
                        path=path, field=_json_path(*keys) or "(top level)")
    if not value:
        raise DataError(f"empty object: no {what}", path=path,
                        field=_json_path(*keys) or "(top level)")
    return value


def _parse_votes(raw: Any, path: str, keys: tuple) -> tuple[tuple[str, int], ...]:
    where = _json_path(*keys)
    if not isinstance(raw, list) or not raw:
        raise DataError("expected a non-empty list of [annotator_id, 0|1] votes", path=path,
                        field=where)
    votes, seen = [], set()
    for index, vote in enumerate(raw):
        if (not isinstance(vote, list) or len(vote) != 2 or not isinstance(vote[0], str)
                or isinstance(vote[1], bool) or vote[1] not in (0, 1)):
            raise DataError(f"vote {index} is {json.dumps(vote)}, expected "
                            f"[annotator_id, 0|1]", path=path, field=f"{where}[{index}]")
        if vote[0] in seen:
            raise DataError(f"annotator {vote[0]!r} votes twice on this QA", path=path,
                            field=f"{where}[{index}]")
        seen.add(vote[0])
        votes.append((vote[0], int(vote[1])))
    return tuple(votes)


def _iter_items(data: Any, path: str) -> Iterator[QAJudgment]:
    for system, examples in _expect_object(data, path, (), "systems").items():
        for example_id, predicates in _expect_object(examples, path, (system,),
                                                     "examples").items():
            for predicate_id, qas in _expect_object(predicates, path, (system, example_id),
                                                    "predicates").items():
                keys = (system, example_id, predicate_id)
                for qa, raw_votes in _expect_object(qas, path, keys, "QA pairs").items():
                    if not qa.strip():
                        raise DataError("empty QA key", path=path, field=_json_path(*keys, qa))
                    votes = _parse_votes(raw_votes, path, (*keys, qa))
                    yield QAJudgment(system, example_id, predicate_id, qa, votes)


def load_qa_judgments(path: str | os.PathLike) -> QAJudgments:
    """Read and validate a QA_presence.json file."""
    path = Path(path)
    data = read_json(path, what="QAPyramid judgments file")
    return QAJudgments(path=str(path), items=tuple(_iter_items(data, str(path))))
