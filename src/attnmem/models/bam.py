"""Bidirectional associative memory (Kosko 1988): x ⇄ y by alternating thresholded reads of one matrix."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.associative import PairStorage, check_partner_size
from attnmem.blocks.output import Retrieval
from attnmem.core.float32 import in_float32
from attnmem.models.contract import RecallsPairs

__all__ = ["BAM", "bam_energy", "threshold"]


def threshold(field: Tensor, previous: Tensor) -> Tensor:
    """Kosko's signal function: +1 where `field` > 0, -1 where < 0, the `previous` state where it is 0."""
    return torch.where(field > 0, 1.0, torch.where(field < 0, -1.0, previous)).to(field.dtype)


def bam_energy(weights: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """E(x, y) = -yᵀ W x of `x (B, N)`, `y (B, M)` with `weights (M, N)`: (B,)."""
    return -((y @ weights) * x).sum(-1)


class BAM(nn.Module, RecallsPairs):
    """Bidirectional associative memory, Kosko 1988, "Bidirectional associative memories" (IEEE Trans. SMC 18(1)).

    `store(patterns, pairs)` sets W = Σₖ yₖ xₖᵀ (M, N), the sum of the pairs' outer products (the
    binary pairs enter as bipolar ±1 vectors, Kosko's eq. 15). Recall from a probe x₀ starts with
    y₀ = sgn(W x₀) (+1 on a zero field: there is no previous y) and then alternates, one step being
    x ← S(Wᵀ y), y ← S(W x), where S thresholds each unit and keeps its previous state on a zero
    field (eqs. 4-5). Either half lowers or keeps E(x, y) = -yᵀ W x (eq. 8), which is bounded below,
    so every probe settles in a stable pair (x, y) (Theorem 1): updating stops when neither layer changes,
    or after `max_steps` steps. `forward` returns the recalled `pred (B, M)` y, `energy (B, T+1)`
    (E(x₀, y₀), then after each step) and the steps that changed a probe.
    """

    families: ClassVar[tuple[str, ...]] = ("patterns",)
    recalls: ClassVar[str] = "pairs"  # the batch key whose rows pred is compared with

    def __init__(self, *, size: int, partner_size: int, max_steps: int = 100) -> None:
        super().__init__()
        check_partner_size("BAM", size, partner_size)
        if max_steps < 1:
            raise ValueError(f"BAM: max_steps must be >= 1, got {max_steps}")
        self.size, self.partner_size, self.max_steps = size, partner_size, max_steps
        self.memory = PairStorage("BAM", size, partner_size)

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
    @in_float32  # a field of 0 must stay exactly 0, so a unit keeps its state
    def recall(self, probes: Tensor) -> Retrieval:
        """Alternate the two layers from `probes (B, N)` until no probe changes or `max_steps`."""
        x = probes.to(self.weights.dtype)  # (B, N); a masked unit (0) keeps 0 until its field takes a side
        y = threshold(x @ self.weights.T, torch.ones(len(x), self.partner_size, device=x.device))  # (B, M)
        energies = [bam_energy(self.weights, x, y)]
        steps = torch.zeros(len(x), dtype=torch.long, device=x.device)
        for _ in range(self.max_steps):
            new_x = threshold(y @ self.weights, x)  # x ← S(Wᵀ y), (B, N)
            new_y = threshold(new_x @ self.weights.T, y)  # y ← S(W x), (B, M)
            changed = (new_x != x).any(-1) | (new_y != y).any(-1)  # (B,)
            x, y = new_x, new_y
            steps += changed
            energies.append(bam_energy(self.weights, x, y))
            if not changed.any():
                break
        return Retrieval(pred=y, energy=torch.stack(energies, dim=-1), steps=steps)
