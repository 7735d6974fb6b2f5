"""Batches that pad little: the model-backed evaluators run their inputs longest first and cut
a batch where padding would take more than a fifth of it. On a CPU, a padded position costs
what a real one does, and larger batches gain almost nothing once a batch holds a few hundred
tokens; on a GPU, the batch size still bounds memory."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")

#: the least share of a padded batch that real tokens fill
PADDING_LIMIT = 0.8


def filled_batches(items: Iterable[Item], sizes: Callable[[Item], Sequence[int]],
                   batch_size: int, limit: float = PADDING_LIMIT) -> Iterator[list[Item]]:
    """`items` (in the order to run them, longest first) cut into batches of at most
    `batch_size`, each closed before an item that would leave its real tokens under `limit`
    of the batch padded to its longest in every padded dimension (`sizes(item)`: the item's
    length in each, e.g. (source, target) for an encoder-decoder)."""
    batch: list[Item] = []
    filled, longest = 0, ()
    for item in items:
        lengths = tuple(sizes(item))
        grown = tuple(map(max, longest, lengths)) if batch else lengths
        if batch and (len(batch) == batch_size or
                      filled + sum(lengths) < limit * (len(batch) + 1) * sum(grown)):
            yield batch
            batch, filled, grown = [], 0, lengths
        batch.append(item)
        filled, longest = filled + sum(lengths), grown
    if batch:
        yield batch
