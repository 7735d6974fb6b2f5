"""The layout of processed USB task data, ``DATA/<variant>/<task>/<split>.jsonl``, and how
to find it inside a folder (an extracted archive, a --data folder)."""
from __future__ import annotations

from pathlib import Path

from tasks.plumbing.errors import DataError

TASK_FOLDERS = (
    "abstractive_summarization",
    "multisentence_compression",
    "extractive_summarization",
    "evidence_extraction",
    "factuality_classification",
    "fixing_factuality",
    "unsupported_span_prediction",
    "topicbased_summarization",
)
SPLITS = ("train", "validation", "test")

HOW_TO_GET_DATA = (
    "Pass --data DIR (a folder holding <variant>/<task>/<split>.jsonl), set SUMBENCH_DATA, "
    "run `sumbench data fetch` while online, or build the datasets from the raw annotations "
    "with `sumbench data build --raw RAW --out DIR`.")


def _is_data_root(folder: Path) -> bool:
    """True when some child of `folder` has a task folder: <folder>/<variant>/<task>/."""
    try:
        return any(child.is_dir() and any((child / task).is_dir() for task in TASK_FOLDERS)
                   for child in folder.iterdir())
    except OSError:
        return False


def find_data_root(folder: str | Path, max_depth: int = 3) -> Path:
    """The folder at or below `folder` (breadth first) that holds <variant>/<task>/; several
    at the nearest depth that has any are an error (which one is meant is unclear)."""
    level = [Path(folder)]
    for _ in range(max_depth + 1):
        found = [candidate for candidate in level if _is_data_root(candidate)]
        if len(found) > 1:  # taking the first by name would pick one silently
            raise DataError(f"{len(found)} task-datasets folders under this folder "
                            f"({', '.join(str(f) for f in found[:5])}): give one of them",
                            path=str(folder))
        if found:
            return found[0]
        level = sorted(child for parent in level if parent.is_dir()
                       for child in parent.iterdir() if child.is_dir())
    raise DataError("no <variant>/<task>/<split>.jsonl layout found in this folder "
                    f"(task folders: {', '.join(TASK_FOLDERS)})", path=str(folder))
