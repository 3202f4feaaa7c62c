"""The temporal index of a story's sentences (Sukhbaatar et al. 2015, §4.1): 0 for the most recent."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["recency"]


def recency(slot_mask: Tensor, sentence: Tensor | None = None) -> Tensor:
    """How many real sentences follow each one, from `slot_mask (B, S)` (True on a sentence, left-aligned).

    `sentence (B, T)`, each token's sentence index, gives the index per token instead of per slot;
    indices past the last real sentence (empty slots, the question) are 0. Returns (B, S) or (B, T).
    """
    count = slot_mask.sum(-1, keepdim=True)  # (B, 1) real sentences
    index = torch.arange(slot_mask.shape[-1], device=slot_mask.device) if sentence is None else sentence
    return (count - 1 - index).clamp_min(0)
