"""Leaks and repeats in a raw USB folder's split files, found while deriving.

A document listed twice in one split is counted twice by every metric; one listed in two
splits of a variant (train and test, say) leaks test data into training. Both are found by
annotation path and by content (the source text's digest, so a copy under another name counts
too). `data build` prints them as warnings naming the split files, lines and ids; `--strict`
makes them an error.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

SPLIT_PAIRS = (("train", "test"), ("validation", "test"), ("train", "validation"))


def source_digest(annotation: dict) -> str:
    """SHA-256 of a document's source lines (what makes two documents the same)."""
    lines = annotation["annotations"]["source"]
    return hashlib.sha256("\n".join(str(line["txt"]) for line in lines).encode("utf-8")
                          ).hexdigest()


def _shown(items: list[str], limit: int = 5) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit
                                       else "")


def duplicate_problems(variant: str, split: str, split_file: Path,
                       entries: Iterable[tuple[int, str]], digests: dict[str, str]) -> list[str]:
    """Documents listed more than once in one split (same path or same content)."""
    first_line: dict[str, tuple[int, str]] = {}
    repeats = []
    for line, relative in entries:
        key = digests.get(relative, relative)
        if key in first_line:
            earlier_line, earlier = first_line[key]
            same = "listed again" if earlier == relative else f"same text as {earlier}"
            repeats.append(f"{relative} (line {line}: {same}, line {earlier_line})")
        else:
            first_line[key] = (line, relative)
    if not repeats:
        return []
    return [f"{split_file}: {len(repeats)} duplicate document(s) in {variant}/{split}: "
            f"{_shown(repeats)}"]


def overlap_problems(variant: str, by_split: dict[str, list[str]],
                     digests: dict[str, str]) -> list[str]:
    """Documents of one variant that appear in two of its splits (train/test leaks)."""
    problems = []
    for first, second in SPLIT_PAIRS:
        if first not in by_split or second not in by_split:
            continue
        known = {digests.get(relative, relative): relative for relative in by_split[first]}
        shared = [relative + ("" if known[key] == relative else f" (= {known[key]})")
                  for relative in by_split[second]
                  if (key := digests.get(relative, relative)) in known]
        if shared:
            problems.append(f"{variant}: {len(shared)} document(s) in both {first} and "
                            f"{second}: {_shown(sorted(set(shared)))}")
    return problems
