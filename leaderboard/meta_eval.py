"""Meta-evaluation: how well a metric's scores agree with human scores.

Inputs: `{system: [score per example]}` for the metric and for the humans, aligned over the
same examples. For every system group (optional `{group: [systems]}`, plus "all" = every
system) and every method (Kendall tau-b, Pearson, Spearman; see tasks.metrics.correlation):
- system level: correlation of the per-system means;
- summary level: per example the correlation across the group's systems, averaged over
  examples, undefined correlations counted as 0.

Result shape: `{group: {"system": {method: r}, "summary": {method: r}, "systems": [...]}}`.
Score files: JSON `{system: [score per example]}` in the order of the dataset's ids, or
`{system: {example_id: score}}` (reordered by ids; every id must be present).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks.metrics.correlation import METHODS, Scores, check_aligned, summary_level, system_level
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json

ALL_GROUP = "all"
LEVELS = ("system", "summary")


def check_groups(groups: Mapping[str, Sequence[str]] | None, systems: Sequence[str],
                 path: str | None = None) -> dict[str, list[str]]:
    """`groups` plus "all"; every member must be a known system, no group may be "all"."""
    checked: dict[str, list[str]] = {}
    for name, members in (groups or {}).items():
        if name == ALL_GROUP:
            raise DataError(f"group name {ALL_GROUP!r} is reserved (it is added automatically)",
                            path=path, field=name)
        if not isinstance(members, list) or not members:
            raise DataError("a group must be a non-empty list of system names", path=path,
                            field=name)
        unknown = [m for m in members if m not in systems]
        if unknown:
            raise DataError(f"unknown systems {', '.join(map(str, unknown))} (known: "
                            f"{', '.join(systems)})", path=path, field=name)
        checked[name] = list(dict.fromkeys(members))
    checked[ALL_GROUP] = list(systems)
    return checked


def meta_evaluate(metric: Scores, human: Scores,
                  groups: Mapping[str, Sequence[str]] | None = None,
                  methods: Sequence[str] = METHODS,
                  rule: str = "zero") -> dict[str, dict[str, Any]]:
    """System- and summary-level correlations for each group (and "all"); `rule` says how
    summary level treats constant examples (tasks.metrics.correlation.UNDEFINED_RULES)."""
    systems = check_aligned(metric, human)
    result: dict[str, dict[str, Any]] = {}
    for name, members in check_groups(groups, systems).items():
        if len(members) < 2:
            raise SumbenchError(
                f"{'all systems' if name == 'all' else f'group {name!r}'}: "
                f"{len(members)} system(s) ({', '.join(members)}); correlations across systems "
                "need at least 2 (summary level would otherwise print a meaningless 0.0)")
        result[name] = {
            "systems": members,
            "system": {m: system_level(metric, human, m, members) for m in methods},
            "summary": {m: summary_level(metric, human, m, members, rule) for m in methods},
        }
    return result


def format_table(result: Mapping[str, Mapping[str, Any]], digits: int = 4) -> str:
    """A readable table: one row per group and level, one column per method."""
    methods = list(next(iter(result.values()))["system"]) if result else []
    header = ["group", "level", "n_sys", *methods]
    rows = [header]
    for group, entry in result.items():
        for level in LEVELS:
            cells = [f"{entry[level][m]:.{digits}f}" if not math.isnan(entry[level][m])
                     else "nan" for m in methods]
            rows.append([group, level, str(len(entry["systems"])), *cells])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def _as_score(value: Any, path: Path, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"expected a finite number, got {json.dumps(value)}", path=str(path),
                        field=field)
    return float(value)


def is_positional(raw: Mapping, count: int) -> bool:
    """Whether an {example: score} object is keyed by position, "0" to "count - 1", as the
    SCU-approximation paper's released score files are."""
    return len(raw) == count and set(raw) == {str(i) for i in range(count)}


def _system_scores(raw: Any, ids: Sequence[str], path: Path, system: str) -> list[float]:
    if isinstance(raw, list):
        if len(raw) != len(ids):
            raise DataError(f"{len(raw)} scores but the dataset has {len(ids)} examples",
                            path=str(path), field=system)
        return [_as_score(v, path, f"{system}[{i}]") for i, v in enumerate(raw)]
    if isinstance(raw, dict):
        missing = [i for i in ids if i not in raw]
        if missing and is_positional(raw, len(ids)):  # the paper's files: {"0".."N-1": score}
            return [_as_score(raw[str(i)], path, f"{system}.{i}") for i in range(len(ids))]
        if missing:
            raise DataError(f"no score for example(s) {', '.join(missing[:5])}"
                            f"{' ...' if len(missing) > 5 else ''}", path=str(path),
                            field=system)
        return [_as_score(raw[i], path, f"{system}.{i}") for i in ids]
    raise DataError("expected a list of scores or an {example_id: score} object",
                    path=str(path), field=system)


def load_scores(path: str | os.PathLike, ids: Sequence[str],
                systems: Sequence[str] | None = None) -> dict[str, list[float]]:
    """Per-example scores from a JSON file, aligned with `ids` (an example's id, or its
    position as "0", "1", ...); restricted to `systems` (each of which must be present) when
    given. Systems come in the file's order: the order that the lite-pyramid rule perturbs
    constant examples in, as the official code does with its human score file."""
    path = Path(path)
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("per_example"), dict) and \
            "provenance" in data:  # a `sumbench pyramid --out` file: its per-example scores
        scored = data.get("ids")
        data = {system: dict(zip(scored, values)) if isinstance(scored, list) and
                isinstance(values, list) and len(values) == len(scored) else values
                for system, values in data["per_example"].items()}
    if not isinstance(data, dict) or not data:
        raise DataError("expected a non-empty JSON object {system: scores}", path=str(path))
    chosen = list(data) if systems is None else [s for s in data if s in set(systems)]
    missing = [s for s in (systems or ()) if s not in data]
    if missing:
        raise DataError(f"no scores for system(s) {', '.join(missing)}", path=str(path))
    return {s: _system_scores(data[s], ids, path, s) for s in chosen}


def load_groups(path: str | os.PathLike, systems: Sequence[str]) -> dict[str, list[str]]:
    """System groups from a JSON file `{group: [system, ...]}` (checked against `systems`)."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError("expected a JSON object {group: [systems]}", path=str(path))
    groups = check_groups(data, systems, str(path))
    groups.pop(ALL_GROUP)
    return groups
