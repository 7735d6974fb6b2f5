"""Markdown tables for the experiments' summary.md files (numbers as the paper prints them:
headlines x100 with one decimal; missing cells as "—")."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def number(value: Any, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}" if signed else f"{value:.1f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def grid(rows: Sequence[str], columns: Sequence[str],
         values: Mapping[str, Mapping[str, Any]], corner: str, signed: bool = False) -> str:
    return table([corner, *columns], [[row, *[number(values[row].get(column), signed)
                                              for column in columns]] for row in rows])


def notes(items: Sequence[str], title: str = "Notes") -> str:
    return "" if not items else f"\n## {title}\n\n" + "\n".join(f"- {item}" for item in items)


def job_lines(jobs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Failed and skipped jobs, with their log paths."""
    return [f"{name}: {entry['status']}" + (f" ({entry['error']})" if entry.get("error") else "")
            + (f", log {entry['log']}" if entry.get("log") else "")
            for name, entry in sorted(jobs.items())
            if entry.get("status") in ("failed", "skipped")]


def null_lines(reasons: Mapping[str, Any], prefix: str = "") -> list[str]:
    """One line per empty value of a result's `null_reasons` (nested by row, column, ...,
    down to task -> reason): "row / column / task: reason"."""
    lines = []
    for key, value in reasons.items():
        name = f"{prefix} / {key}" if prefix else str(key)
        lines += null_lines(value, name) if isinstance(value, Mapping) else [f"{name}: {value}"]
    return lines
