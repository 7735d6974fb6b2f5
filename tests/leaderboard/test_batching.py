"""leaderboard.evaluators.batching: batches that padding fills to at most a fifth."""
from __future__ import annotations

import pytest

from leaderboard.evaluators.batching import filled_batches


@pytest.mark.parametrize("lengths, batch_size, expected", [
    ([(10,), (9,), (8,), (3,)], 16, [[(10,), (9,), (8,)], [(3,)]]),  # 21 of 40 < 0.8
    ([(10,), (9,), (8,), (7,)], 16, [[(10,), (9,), (8,), (7,)]]),    # 34 of 40 >= 0.8
    ([(5,)] * 5, 2, [[(5,)] * 2, [(5,)] * 2, [(5,)]]),                 # the size still caps
    ([(10, 2), (2, 10)], 16, [[(10, 2)], [(2, 10)]]),                  # 24 of 40: two dims
    ([(10, 10), (9, 8), (8, 9)], 16, [[(10, 10), (9, 8), (8, 9)]]),   # 54 of 60
    ([], 4, []),
])
def test_batches_close_where_padding_would_pass_a_fifth(lengths, batch_size, expected):
    assert list(filled_batches(lengths, lambda item: item, batch_size)) == expected


def test_every_item_is_kept_once_in_order():
    lengths = [(n % 7 + 1, n % 5 + 1) for n in range(40)]
    batches = list(filled_batches(lengths, lambda item: item, 6))
    assert [item for batch in batches for item in batch] == lengths
    assert all(1 <= len(batch) <= 6 for batch in batches)
