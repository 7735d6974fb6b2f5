"""Right padding in NumPy equals torch's pad_sequence, for every caller's kind of row."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from trainers.models.padding import right_padded, row_mask


@pytest.mark.parametrize("kind", [tuple, list, np.array])
def test_right_padded_and_mask_equal_pad_sequence(kind):
    rng = np.random.default_rng(0)
    rows = [kind(rng.integers(0, 1000, size=length).tolist()) for length in (3, 0, 7, 1, 7)]
    expected = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(list(row), dtype=torch.long) for row in rows], batch_first=True,
        padding_value=-100)
    padded = right_padded(rows, -100)
    assert padded.dtype == np.int64 and torch.equal(torch.from_numpy(padded), expected)
    assert row_mask(rows).tolist() == [[1] * len(row) + [0] * (7 - len(row)) for row in rows]
    assert right_padded(rows, 5, width=9)[:, 7:].tolist() == [[5, 5]] * 5
    assert row_mask(rows, width=9).shape == (5, 9)
    assert right_padded([], 0).shape == row_mask([]).shape == (0, 0)


def test_a_row_longer_than_the_width_is_an_error():
    with pytest.raises(ValueError):
        right_padded([[1, 2, 3]], 0, width=2)
