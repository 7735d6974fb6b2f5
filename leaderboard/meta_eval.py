"""Meta-evaluation: how well a metric's scores agree with human scores.

Inputs: `{system: [score per example]}` for the metric and for the humans, aligned over the
same examples. For every system group (optional `{group: [systems]}`, plus "all" = every
system) and every method (Kendall tau-b, Pearson, Spearman; see tasks.metrics.correlation):
- system level: correlation of the per-system means;
- summary level: per example the correlation across the group's systems, averaged over
  examples, undefined correlations counted as 0;
- global level (asked for: `levels`): every (system, example) score pooled.

Result shape: `{group: {"system": {method: r}, "summary": {method: r}, "systems": [...]}}`;
several metrics compared at once (`compare`): `{label: that shape}`.
Score files: JSON `{system: [score per example]}` in the order of the dataset's ids, or
`{system: {example_id: score}}` (reordered by ids; every id must be present), or a per-system
file `{system: value}`: one number per system, system level only ("summary" is None).
Human QAPyramid (`qapyramid_human`): each summary's score from QA_presence.json by strict
majority, ties absent (leaderboard.evaluators.qapyramid.scoring), aligned over examples.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leaderboard.evaluators.qapyramid.scoring import summary_scores, uneven_coverage
from tasks.metrics.correlation import (
    METHODS,
    Scores,
    check_aligned,
    correlation,
    global_level,
    summary_level,
    system_level,
)
from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import read_json, read_text
from tasks.qapyramid.judgments import load_qa_judgments

ALL_GROUP = "all"
LEVELS = ("system", "summary")
#: every level meta-eval computes (`--levels`)
ALL_LEVELS = ("system", "summary", "global")
#: a table cell of a level a metric does not have (a per-system file's summary level)
NOT_AVAILABLE = "n/a"


def score_matrix(per_example: Mapping[str, Sequence[float]], systems: Sequence[str]
                 ) -> np.ndarray:
    """systems x examples, in `systems` order."""
    return np.array([[float(v) for v in per_example[s]] for s in systems], dtype=float)


@dataclass(frozen=True)
class MetricScores:
    """One metric of a comparison: its per-example scores `{system: [score per example]}`,
    or only one value per system (`per_system`, a per-system score file: no summary level).
    `source` is the --metric as given; `kind`: evaluator, score file or per-system file."""
    label: str
    per_example: Mapping[str, Sequence[float]] | None = None
    per_system: Mapping[str, float] | None = None
    settings: dict | None = None
    source: str = ""
    kind: str = "evaluator"

    def means(self) -> dict[str, float]:
        """{system: mean score} (a per-system file's values as they are)."""
        if self.per_example is None:
            return dict(self.per_system or {})
        return {system: float(np.mean(scores)) for system, scores in self.per_example.items()}


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


def _correlated_groups(groups: Mapping[str, Sequence[str]] | None,
                       systems: Sequence[str]) -> dict[str, list[str]]:
    """The checked groups (and "all"), each of at least two systems."""
    checked = check_groups(groups, systems)
    for name, members in checked.items():
        if len(members) < 2:
            raise SumbenchError(
                f"{'all systems' if name == 'all' else f'group {name!r}'}: "
                f"{len(members)} system(s) ({', '.join(members)}); correlations across systems "
                "need at least 2 (summary level would otherwise print a meaningless 0.0)")
    return checked


def meta_evaluate(metric: Scores, human: Scores,
                  groups: Mapping[str, Sequence[str]] | None = None,
                  methods: Sequence[str] = METHODS,
                  rule: str = "zero", levels: Sequence[str] = LEVELS) -> dict[str, dict[str, Any]]:
    """The correlations of `levels` for each group (and "all"); `rule` says how summary
    level treats constant examples (tasks.metrics.correlation.UNDEFINED_RULES)."""
    systems = check_aligned(metric, human)
    functions = {"system": lambda m, members: system_level(metric, human, m, members),
                 "summary": lambda m, members: summary_level(metric, human, m, members, rule),
                 "global": lambda m, members: global_level(metric, human, m, members)}
    return {name: {"systems": members, **{level: {m: functions[level](m, members)
                                                   for m in methods} for level in levels}}
            for name, members in _correlated_groups(groups, systems).items()}


def meta_evaluate_systems(metric: Mapping[str, float], human: Scores,
                          groups: Mapping[str, Sequence[str]] | None = None,
                          methods: Sequence[str] = METHODS,
                          levels: Sequence[str] = LEVELS) -> dict[str, dict[str, Any]]:
    """System level only, for one value per system (a per-system score file): its
    correlation with the human per-system means for each group (and "all"); the other
    levels are None (not available)."""
    systems = list(human)
    missing = [system for system in systems if system not in metric]
    if missing:
        raise SumbenchError(f"systems without scores on both sides: {', '.join(missing)}")
    check_aligned(human, human)  # the human side's scores are finite and aligned
    means = {system: float(np.mean(human[system])) for system in systems}
    return {name: {
        "systems": members,
        "system": {m: correlation([float(metric[s]) for s in members],
                                  [means[s] for s in members], m) for m in methods},
        **{level: None for level in levels if level != "system"},
    } for name, members in _correlated_groups(groups, systems).items()}


def compare(metrics: Sequence[MetricScores], human: Scores,
            groups: Mapping[str, Sequence[str]] | None = None,
            methods: Sequence[str] = METHODS, rule: str = "zero",
            levels: Sequence[str] = LEVELS) -> dict[str, dict]:
    """`{label: result}`: each metric against the same human scores (`meta_evaluate`, or
    `meta_evaluate_systems` for a metric with per-system values only)."""
    return {metric.label: meta_evaluate(metric.per_example, human, groups, methods, rule,
                                        levels)
            if metric.per_example is not None else
            meta_evaluate_systems(metric.per_system or {}, human, groups, methods, levels)
            for metric in metrics}


def _methods(result: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return list(next(iter(result.values()))["system"]) if result else []


def _table_rows(result: Mapping[str, Mapping[str, Any]], methods: Sequence[str], digits: int,
                label: str | None = None) -> list[list[str]]:
    rows = []
    for group, entry in result.items():
        for level in (level for level in ALL_LEVELS if level in entry):
            values = entry[level]
            cells = ([NOT_AVAILABLE] * len(methods) if values is None else
                     [f"{values[m]:.{digits}f}" if not math.isnan(values[m]) else "nan"
                      for m in methods])
            rows.append([*([label] if label is not None else []), group, level,
                         str(len(entry["systems"])), *cells])
    return rows


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]],
                 markdown: bool = False) -> str:
    """Rows under a header: aligned plain columns, or a Markdown table."""
    if markdown:
        lines = [list(header), ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(row) + " |" for row in lines)
    lines = [list(header), *rows]
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in lines)


def format_table(result: Mapping[str, Mapping[str, Any]], digits: int = 4,
                 markdown: bool = False) -> str:
    """A readable table: one row per group and level, one column per method."""
    methods = _methods(result)
    return render_table(["group", "level", "n_sys", *methods],
                        _table_rows(result, methods, digits), markdown)


def format_comparison(results: Mapping[str, Mapping[str, Mapping[str, Any]]], digits: int = 4,
                      markdown: bool = False) -> str:
    """One table for several metrics (`compare`): a row per metric, group and level."""
    methods = _methods(next(iter(results.values()))) if results else []
    rows = [row for label, result in results.items()
            for row in _table_rows(result, methods, digits, label)]
    return render_table(["metric", "group", "level", "n_sys", *methods], rows, markdown)


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
    raise DataError("expected a list of scores or an {example_id: score} object (or, in a "
                    "per-system file, a number for every system)", path=str(path),
                    field=system)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_per_system(data: Any) -> bool:
    """Whether a score file's object is a per-system file `{system: value}` (its first value
    is a number)."""
    return isinstance(data, dict) and bool(data) and _is_number(next(iter(data.values())))


def _key_line(path: Path, key: str) -> int | None:
    """The line of `"key":` in a JSON file (its first occurrence), for an error message."""
    text = read_text(path)
    for spelling in dict.fromkeys((json.dumps(key, ensure_ascii=False), json.dumps(key))):
        match = re.search(re.escape(spelling) + r"\s*:", text)
        if match:
            return text.count("\n", 0, match.start()) + 1
    return None


def _per_system_values(data: Mapping, path: Path, systems: Sequence[str] | None
                       ) -> dict[str, float]:
    for system, value in data.items():
        if not _is_number(value) or not math.isfinite(value):
            raise DataError(f"expected a finite number (a per-system file holds one per "
                            f"system), got {json.dumps(value)}", path=str(path),
                            line=_key_line(path, system), field=system)
    chosen = list(data) if systems is None else [s for s in data if s in set(systems)]
    return {system: float(data[system]) for system in chosen}


def _score_data(path: Path) -> dict:
    """A score file's {system: scores} (a `sumbench pyramid --out` file: its per-example
    scores)."""
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("per_example"), dict) and \
            "provenance" in data:  # a `sumbench pyramid --out` file: its per-example scores
        scored = data.get("ids")
        data = {system: dict(zip(scored, values)) if isinstance(scored, list) and
                isinstance(values, list) and len(values) == len(scored) else values
                for system, values in data["per_example"].items()}
    if not isinstance(data, dict) or not data:
        raise DataError("expected a non-empty JSON object {system: scores}", path=str(path))
    return data


def _check_systems(data: Mapping, path: Path, systems: Sequence[str] | None) -> None:
    missing = [s for s in (systems or ()) if s not in data]
    if missing:
        raise DataError(f"no scores for system(s) {', '.join(missing)}", path=str(path))


def load_scores(path: str | os.PathLike, ids: Sequence[str],
                systems: Sequence[str] | None = None) -> dict[str, list[float]]:
    """Per-example scores from a JSON file, aligned with `ids` (an example's id, or its
    position as "0", "1", ...); restricted to `systems` (each of which must be present) when
    given. Systems come in the file's order: the order that the lite-pyramid rule perturbs
    constant examples in, as the official code does with its human score file."""
    path = Path(path)
    data = _score_data(path)
    _check_systems(data, path, systems)
    chosen = list(data) if systems is None else [s for s in data if s in set(systems)]
    return {s: _system_scores(data[s], ids, path, s) for s in chosen}


def load_metric_file(path: str | os.PathLike, ids: Sequence[str],
                     systems: Sequence[str] | None = None,
                     label: str | None = None) -> MetricScores:
    """A metric's score file: per-example scores (as `load_scores`), or a per-system file
    `{system: value}` (system level only)."""
    path = Path(path)
    data = _score_data(path)
    label = label or path.stem
    if is_per_system(data):
        values = _per_system_values(data, path, systems)  # checks every value first
        _check_systems(data, path, systems)
        return MetricScores(label, per_system=values, source=str(path),
                            kind="per-system score file")
    _check_systems(data, path, systems)
    chosen = list(data) if systems is None else [s for s in data if s in set(systems)]
    return MetricScores(label, per_example={s: _system_scores(data[s], ids, path, s)
                                            for s in chosen},
                        source=str(path), kind="score file")


def _judged(examples: Mapping[str, float], ids: Sequence[str], path: str,
            system: str) -> list[float]:
    missing = [i for i in ids if i not in examples]
    if missing:
        raise DataError(f"no judgments for example(s) {', '.join(missing[:5])}"
                        f"{' ...' if len(missing) > 5 else ''}", path=path, field=system)
    return [examples[i] for i in ids]


def qapyramid_human(path: str | os.PathLike, ids: Sequence[str] | None = None,
                    systems: Sequence[str] | None = None
                    ) -> tuple[list[str], dict[str, list[float]]]:
    """QAPyramid's human score of each summary from a QA_presence.json file (a QA is present
    by strict majority of its votes, ties absent; present / all QAs of the example), as
    (ids, {system: [score per example]}): over `ids` (default: the file's examples, which
    every system must share, in its first system's order) and `systems` (default: all; each
    must be in the file), systems in the file's order."""
    path = str(path)
    per_summary = summary_scores(load_qa_judgments(path))
    missing = [system for system in (systems or ()) if system not in per_summary]
    if missing:
        raise DataError(f"no judgments for system(s) {', '.join(missing)} (the file has "
                        f"{', '.join(per_summary)})", path=path)
    chosen = {system: examples for system, examples in per_summary.items()
              if systems is None or system in set(systems)}
    if ids is None:
        note = uneven_coverage(chosen)
        if note:
            raise DataError(f"{note}; summary level needs the same examples", path=path)
        ids = list(next(iter(chosen.values())))
    return list(ids), {system: _judged(examples, ids, path, system)
                       for system, examples in chosen.items()}


def load_groups(path: str | os.PathLike, systems: Sequence[str]) -> dict[str, list[str]]:
    """System groups from a JSON file `{group: [system, ...]}` (checked against `systems`)."""
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError("expected a JSON object {group: [systems]}", path=str(path))
    groups = check_groups(data, systems, str(path))
    groups.pop(ALL_GROUP)
    return groups
