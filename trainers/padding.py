"""Right padding of token-id rows into int64 arrays.

Filled row by row in NumPy (several times faster than `torch.tensor` per row) and handed to
torch with `torch.from_numpy`, which shares the memory instead of copying it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def right_padded(rows: Sequence[Sequence[int]], fill: int, width: int | None = None) -> np.ndarray:
    """[len(rows), width] int64: each row from the left, `fill` after it (default width: the
    longest row)."""
    width = max((len(row) for row in rows), default=0) if width is None else width
    padded = np.full((len(rows), width), fill, dtype=np.int64)
    for position, row in enumerate(rows):
        padded[position, :len(row)] = row
    return padded


def row_mask(rows: Sequence[Sequence[int]], width: int | None = None) -> np.ndarray:
    """[len(rows), width] int64: 1 where a row has a token, 0 on its padding."""
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max(initial=0)) if width is None else width
    return (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
