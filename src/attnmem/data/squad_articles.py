"""The seeded split of a SQuAD file's articles, shared by the span family's reader and the embeddings corpus."""

from __future__ import annotations

import random
from collections.abc import Sequence

from attnmem.core.errors import UserError

__all__ = ["split_articles"]


def split_articles(count: int, fractions: Sequence[float], seed: int) -> list[list[int]]:
    """Article indices in seeded random order, cut into parts of the given fractions (each >= 1 when > 0)."""
    order = list(range(count))
    random.Random(f"squad/{seed}").shuffle(order)
    sizes = [max(1, round(f * count)) if f > 0 else 0 for f in fractions]
    if sum(sizes) >= count:
        raise UserError(f"data.source.val_fraction/test_fraction leave no training article out of {count}")
    parts, first = [], 0
    for size in sizes:
        parts.append(sorted(order[first : first + size]))
        first += size
    return [sorted(order[first:]), *parts]
