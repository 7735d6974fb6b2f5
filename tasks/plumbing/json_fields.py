"""Frozen dataclass specs as JSON, written once: `to_dict`, `from_dict` (unknown fields
refused, naming them), `to_json` and `from_json`. A spec class mixes in `JsonFields` and
says which error an unknown field raises and how its JSON is indented."""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from tasks.plumbing.errors import SumbenchError, unknown_names


class JsonFields:
    """`from_dict`/`to_dict`/`to_json`/`from_json` of a dataclass (mixed into one)."""

    #: what an unknown field raises
    unknown_field_error: ClassVar[type[Exception]] = SumbenchError
    #: what the fields are called in that error ("RunSpec field(s)")
    field_kind: ClassVar[str] = ""
    #: `json.dumps`'s indent (None: one line)
    json_indent: ClassVar[int | None] = 1

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (tuples become lists: `dataclasses.asdict` keeps them)."""
        return {name: _json_value(value) for name, value in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        unknown = unknown_names(data, (item.name for item in dataclasses.fields(cls)))
        if unknown:
            kind = cls.field_kind or f"{cls.__name__} field(s)"
            raise cls.unknown_field_error(f"unknown {kind}: {unknown}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=self.json_indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str):
        return cls.from_dict(json.loads(text))


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    return value
