"""A board's public inputs on disk: what `sumbench leaderboard inputs` writes for a
participant and the server writes for a model it evaluates, in the shape `sumbench predict
--data` reads."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tasks import canonical_task_name
from tasks.plumbing.errors import SumbenchError
from tasks.usb.loaders import check_variant_name


def write_inputs(out: Path, answer: Mapping) -> list[Path]:
    """A board's public inputs (the answer of GET /api/v1/inputs/{track}) as
    OUT/<variant>/<task>/test.jsonl, what `sumbench predict --data OUT` reads; names are
    checked (a variant is one folder name, a task a registered task)."""
    variant = answer["variant"]
    check_variant_name(variant)
    written = []
    for task, records in sorted(answer["parts"].items()):
        if canonical_task_name(task) != task:
            raise SumbenchError(f"the server names an unknown task {task!r}")
        path = Path(out) / variant / task / "test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n"
                                for record in records), encoding="utf-8")
        written.append(path)
    return written
