"""A SQuAD file's articles: the first N of them and their seeded split, shared by the span, embeddings and classify
sources."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from attnmem.core.errors import UserError

__all__ = ["first_articles", "split_articles"]

T = TypeVar("T")


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


def first_articles(articles: list[T], count: int | None, path: Path) -> list[T]:
    """The file's first `count` articles (every one when None); one line when it has fewer."""
    if count is None:
        return articles
    if not 0 < count <= len(articles):
        raise UserError(f"{path} has {len(articles)} articles: data.source.first_articles={count} must be in "
                        f"[1, {len(articles)}], or null for all of them")
    return articles[:count]
