"""Gold test items of a task-datasets folder, and the check `sumbench score --data` runs.

The official evaluation scores the references that the prediction file itself holds, so a
file missing items (a subset of the test set, an EXT/EVEXT item without its last window) or
with edited references still gets numbers. `GoldCheck` holds, for every task it is asked
about, each gold item's identity digest (tasks.identity) and a digest of each of its reference
fields (the official prediction record minus `prediction`, as `Task.prediction_record` writes
it), and refuses, naming file, line and field:
  - a record whose item is not in the gold split;
  - a record whose references differ from the gold item's (the first differing field);
  - a task with gold items that no record covers (their count and the first one);
  - gold that lists one item twice (which copy a record is checked against is unclear).
A field the scoring reads as a set (`Task.set_fields`: EVEXT's evidence lines) is compared
as one; a record stitched from official windows (tasks.windowed) need not hold the fields they
lack (EVEXT's claim).
Only digests are kept (a few dozen bytes per gold item), never the records.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tasks import get_task
from tasks.base import SPLITS
from tasks.identity import describe, record_digest
from tasks.plumbing.errors import DataError, UnknownNameError
from tasks.usb.loaders import task_split_path
from tasks.windowed import NOT_IN_WINDOWS


def gold_templates(task, data_dir: str, variant: str, split: str = "test") -> list[dict]:
    """The task's official prediction records of `split` without `prediction`, in dataset
    order."""
    templates = []
    for instance in task.instances(task.load(split, variant, data_dir)):
        placeholder: Any = ""
        if task.output_kind == "probabilities":
            placeholder = [0.0] * len(instance.get("input_lines", [0]))
        record = task.prediction_record(instance, placeholder)
        record.pop("prediction")
        templates.append(record)
    return templates


def _compared(task, field: str, value: Any) -> Any:
    """What the check compares of a reference field: the set of a `task.set_fields` field
    (sorted; the scoring ignores order and repeats), else the value."""
    if field in task.set_fields and isinstance(value, list):
        return sorted(set(value))
    return value


def value_digest(value: Any) -> bytes:
    """An 8-byte digest of a JSON value (canonical form)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


class GoldCheck:
    """Prediction records checked against the gold `split` of `variant` in `data_dir`."""

    def __init__(self, data_dir: str | Path, variant: str = "all", split: str = "test"):
        if not Path(data_dir).is_dir():
            raise DataError("--data: no such task-datasets folder", path=str(data_dir))
        self.data_dir, self.variant, self.split = str(data_dir), variant, split
        #: task name -> identity digest -> ((field, value digest), ...)
        self._gold: dict[str, dict[int, tuple[tuple[str, bytes], ...]]] = {}
        self._seen: dict[str, set[int]] = {}

    def _items(self, task) -> dict[int, tuple[tuple[str, bytes], ...]]:
        if task.name not in self._gold:
            items: dict[int, tuple[tuple[str, bytes], ...]] = {}
            first: dict[int, int] = {}
            for number, template in enumerate(self._templates(task), start=1):
                digest = record_digest(task, template)
                if digest in items:  # which copy a record is checked against is unclear
                    raise DataError(
                        f"--data: the gold {self.split} split of {task.name} (variant "
                        f"{self.variant!r}) lists one item twice, as its items "
                        f"{first[digest]} and {number} in file order "
                        f"({describe(task, template)})", path=self._split_file(task))
                first[digest] = number
                items[digest] = tuple((field, value_digest(_compared(task, field, value)))
                                      for field, value in template.items())
            self._gold[task.name], self._seen[task.name] = items, set()
        return self._gold[task.name]

    def _split_file(self, task) -> str:
        """The gold split's file (the folder when the task has no such file)."""
        try:
            return str(task_split_path(Path(self.data_dir), task.name, self.split,
                                       self.variant))
        except DataError:
            return self.data_dir

    def _templates(self, task) -> list[dict]:
        try:
            return gold_templates(task, self.data_dir, self.variant, self.split)
        except DataError as error:
            raise DataError(f"--data: cannot read the gold {self.split} split of {task.name} "
                            f"(variant {self.variant!r}): {error.reason}", path=error.path,
                            line=error.line, field=error.field) from None
        except UnknownNameError as error:  # e.g. a variant the task does not have
            raise DataError(f"--data: cannot read the gold {self.split} split of {task.name}: "
                            f"{error}", path=self.data_dir) from None

    def check(self, task, record: dict, digest: int, path: str, line: int) -> None:
        """Refuse a record whose item is not gold or whose references differ from gold."""
        items = self._items(task)
        fields = items.get(digest)
        if fields is None:
            other = self._split_holding(task, digest)
            hint = f"; it is a {other} item: give --split {other}" if other else ""
            raise DataError(f"no such {self.split} item in {self.data_dir} "
                            f"(variant {self.variant!r}): {describe(task, record)}{hint}",
                            path=path, line=line, field="id")
        for field, expected in fields:
            if field not in record:
                if "windows" in record and field in NOT_IN_WINDOWS:
                    continue  # stitched from official windows, which lack it
                raise DataError("missing field (the gold item has it)", path=path, line=line,
                                field=field)
            if value_digest(_compared(task, field, record[field])) != expected:
                raise DataError(f"differs from the gold item's in {self.data_dir} (variant "
                                f"{self.variant!r}, {self.split}): {describe(task, record)}",
                                path=path, line=line, field=field)
        self._seen[task.name].add(digest)

    def _split_holding(self, task, digest: int) -> str | None:
        """The other split of the variant that holds the item (read only on this error path:
        predictions of the validation split checked against test, say), or None."""
        for split in SPLITS:
            if split == self.split:
                continue
            try:
                templates = gold_templates(task, self.data_dir, self.variant, split)
            except (DataError, UnknownNameError):
                continue
            if any(record_digest(task, template) == digest for template in templates):
                return split
        return None

    def check_complete(self, where: str) -> None:
        """Refuse a checked task whose gold items are not all covered (`where`: the files)."""
        for name, items in sorted(self._gold.items()):
            seen = self._seen[name]
            if len(seen) == len(items):
                continue

            task = get_task(name)
            first = next(template for template in self._templates(task)
                         if record_digest(task, template) not in seen)
            raise DataError(f"{len(items) - len(seen)} of {len(items)} gold {self.split} "
                            f"items of {name} have no prediction record (first: "
                            f"{describe(task, first)})", path=where)

    def provenance(self) -> dict:
        """What the records were checked against: folder, variant, split and the tasks."""
        return {"data": str(Path(self.data_dir).resolve()), "variant": self.variant,
                "split": self.split,
                "tasks": {name: {"items": len(items), "gold_digest": _gold_digest(items)}
                          for name, items in sorted(self._gold.items())}}


def _gold_digest(items: dict[int, tuple[tuple[str, bytes], ...]]) -> str:
    """A digest of a task's gold items (identities and references), independent of order."""
    text = repr(sorted(items.items())).encode("ascii")
    return hashlib.blake2b(text, digest_size=16).hexdigest()
