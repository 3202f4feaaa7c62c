"""What the recall sources share: the one-line error of an option out of its range, and k distinct draws per row."""

from __future__ import annotations

import torch
from torch import Tensor

IGNORE = -100  # the target of a position that is not scored (cross-entropy's default ignore_index)


def check_range(option: str, value: int | float, low: int | float, high: int | float | None = None,
                why: str = "") -> None:
    """A `ValueError` of one line naming `data.source.<option>`, its value and its valid range, unless it is in it."""
    if value >= low and (high is None or value <= high):
        return
    valid = f">= {low}" if high is None else f"in [{low}, {high}]"
    raise ValueError(f"data.source.{option}={value} is out of range: it must be {valid}{why}")


def distinct(generator: torch.Generator, rows: int, choices: int, k: int, chunk: int = 1024) -> Tensor:
    """`(rows, k)` draws of k distinct values of `range(choices)` per row, each row's a uniform ordered sample."""
    parts = [torch.rand(min(chunk, rows - start), choices, generator=generator).topk(k, dim=1).indices
             for start in range(0, rows, chunk)]  # in chunks: rows x choices at once could be gigabytes
    return torch.cat(parts) if parts else torch.zeros(0, k, dtype=torch.long)
