"""Hetero-associative linear memory: x → y by Hebbian outer-product storage and one thresholded read."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.associative import PairStorage, check_partner_size
from attnmem.blocks.output import Retrieval
from attnmem.core.float32 import in_float32
from attnmem.models.contract import RecallsPairs

__all__ = ["HeteroAssociative"]


class HeteroAssociative(nn.Module, RecallsPairs):
    """Linear hetero-associative memory (the correlation matrix memory of Kohonen 1972, "Correlation matrix
    memories", IEEE Trans. Computers; Anderson 1972), read once through a threshold.

    `store(patterns, pairs)` sets W = Σₖ yₖ xₖᵀ (M, N), the sum of the outer products of each stored
    pair; a probe x recalls y = sgn(W x) (+1 on a zero field), in one step and without feedback.
    For random ±1 pairs the field of a unit is the wanted bit times x·xₖ plus crosstalk from the
    K - 1 other pairs, of variance (K - 1)·N: recall fails as K grows towards N. `forward` returns
    the recalled `pred (B, M)`, no energy and one step per probe.
    """

    families: ClassVar[tuple[str, ...]] = ("patterns",)
    recalls: ClassVar[str] = "pairs"  # the batch key whose rows pred is compared with

    def __init__(self, *, size: int, partner_size: int) -> None:
        super().__init__()
        check_partner_size("HeteroAssociative", size, partner_size)
        self.size, self.partner_size = size, partner_size
        self.memory = PairStorage(type(self).__name__, size, partner_size)

    @property
    def weights(self) -> Tensor:
        """W = Σₖ yₖ xₖᵀ of the stored pairs, (M, N)."""
        return self.memory.weights

    def store(self, patterns: Tensor, pairs: Tensor) -> None:
        """Store the pairs `patterns (K, N)` x, `pairs (K, M)` y by the outer-product rule (replacing what was)."""
        self.memory.store(patterns, pairs)

    @torch.no_grad()
    def forward(self, batch: dict[str, Tensor]) -> Retrieval:
        """Recall y from `batch["probes"] (B, N)`; a memory that has stored nothing stores the batch's pairs first."""
        self.memory.store_once(batch)
        return self.recall(batch["probes"])

    @torch.no_grad()
    @in_float32
    def recall(self, probes: Tensor) -> Retrieval:
        """y = sgn(W x) of `probes (B, N)`: (B, M)."""
        field = probes.to(self.weights.dtype) @ self.weights.T  # (B, M)
        recalled = torch.where(field >= 0, 1.0, -1.0).to(field.dtype)
        return Retrieval(
            pred=recalled, energy=None, steps=torch.ones(len(probes), dtype=torch.long, device=probes.device)
        )
