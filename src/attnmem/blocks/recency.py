"""The temporal index of a story's sentences (Sukhbaatar et al. 2015, §4.1): 0 for the most recent."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["noisy_recency", "recency"]


def recency(slot_mask: Tensor, sentence: Tensor | None = None) -> Tensor:
    """How many real sentences follow each one, from `slot_mask (B, S)` (True on a sentence, left-aligned).

    `sentence (B, T)`, each token's sentence index, gives the index per token instead of per slot;
    indices past the last real sentence (empty slots, the question) are 0. Returns (B, S) or (B, T).
    """
    count = slot_mask.sum(-1, keepdim=True)  # (B, 1) real sentences
    index = torch.arange(slot_mask.shape[-1], device=slot_mask.device) if sentence is None else sentence
    return (count - 1 - index).clamp_min(0)


def noisy_recency(slot_mask: Tensor, drawn: dict[str, Tensor], random_noise: float, memory_size: int) -> Tensor:
    """Recency with random noise (RN, §4.1): `slot_mask (B, S)`'s n real sentences take n distinct indices drawn
    from 0 .. n + blank - 1, blank ~ U{0..ceil(n · random_noise)}, the oldest highest, from the uniform numbers
    `drawn` (`rn_blank (B, 1)`, `rn_keys (B, S + most)`: `MemN2N.draws`); clamped below `memory_size`: (B, S)."""
    s = slot_mask.shape[-1]
    n = slot_mask.sum(-1, keepdim=True)  # (B, 1) real sentences
    slots = torch.arange(s, device=slot_mask.device)  # (S,)
    blank = (drawn["rn_blank"] * (torch.ceil(n * random_noise) + 1)).long()  # (B, 1)
    span = torch.arange(drawn["rn_keys"].shape[-1], device=slot_mask.device)  # (S + most,)
    keys = drawn["rn_keys"].masked_fill(span >= n + blank, math.inf)  # (B, S + most)
    picks = keys.argsort(-1)[:, :s].masked_fill(slots >= n, -1)  # (B, S) a random n-subset first
    return picks.sort(-1, descending=True).values.clamp(0, memory_size - 1)
