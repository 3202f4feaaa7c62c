"""Modern (continuous) Hopfield network, Ramsauer et al. 2020: retrieval is attention over the stored patterns.

`ModernHopfield` retrieves ±1 patterns of the `patterns` family by softmax attention over them, its
similarity the `attention` group's score; its trainable layers (`Hopfield`, `HopfieldPooling`, `HopfieldLayer`)
are in `attnmem.blocks.hopfield`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.attention import softmax
from attnmem.blocks.output import Retrieval
from attnmem.blocks.tempered import Tempered
from attnmem.models.contract import StoresPatterns

__all__ = ["ModernHopfield"]


class ModernHopfield(nn.Module, StoresPatterns):
    """Modern Hopfield network, Ramsauer et al. 2020, "Hopfield Networks is All You Need" (arXiv:2008.02217).

    The update (eq. 3) ξ ← X softmax(β Xᵀξ) is `attend(ξ, X, X, β·score)` with the stored patterns
    X as keys and values; the paper's score is `Dot`. It repeats up to `update_steps` times, and a
    probe stops once ‖Δξ‖ < `eps`. The energy (eq. 2, with the score in place of Xᵀξ) is
    E = -β⁻¹ lse(β score(ξ, X)) + ½ ξᵀξ + β⁻¹ log K + ½ M², M the largest pattern norm.
    Exponentially many patterns fit in N units; one update usually retrieves.
    """

    families: ClassVar[tuple[str, ...]] = ("patterns",)
    patterns: Tensor  # buffers
    stored: Tensor

    def __init__(self, *, size: int, num_patterns: int, score: Callable[..., nn.Module], beta: float = 8.0,
                 update_steps: int = 1, eps: float = 1e-4) -> None:
        super().__init__()
        if size < 1 or num_patterns < 1:
            raise ValueError(f"ModernHopfield: size and num_patterns must be >= 1, got {size} and {num_patterns}")
        if update_steps < 1:
            raise ValueError(f"ModernHopfield: update_steps must be >= 1, got {update_steps}")
        if beta <= 0:
            raise ValueError(f"ModernHopfield: beta must be > 0, got {beta}")
        self.size, self.update_steps, self.eps = size, update_steps, eps
        self.score = Tempered(score(query_dim=size, key_dim=size), beta)
        self.register_buffer("patterns", torch.zeros(num_patterns, size))  # X, (K, N)
        self.register_buffer("stored", torch.tensor(False))

    @torch.no_grad()
    def store(self, patterns: Tensor) -> None:
        """Keep `patterns (K, N)` as the memory (keys and values of every update)."""
        if patterns.shape != self.patterns.shape:
            raise ValueError(f"ModernHopfield: patterns of shape {tuple(patterns.shape)}, "
                             f"expected (num_patterns, size) = {tuple(self.patterns.shape)}")
        self.patterns.copy_(patterns)
        self.stored.fill_(True)

    def similarities(self, states: Tensor) -> Tensor:
        """β·score(ξ, X) of `states (B, N)` against the stored patterns, in float32 (`Tempered`): (B, K)."""
        return self.score(states, self.patterns)  # (B, K) a score reads 2-D queries and keys as one batch

    def energy(self, states: Tensor, similarities: Tensor | None = None) -> Tensor:
        """E(ξ) of `states (B, N)`, from their `similarities (B, K)` when given: (B,)."""
        scores = self.similarities(states) if similarities is None else similarities
        lse = torch.logsumexp(scores.float(), dim=-1)  # (B,)
        beta, num_patterns = self.score.beta, self.patterns.shape[0]
        largest = self.patterns.norm(dim=-1).max()
        half_norm = 0.5 * (states.float() * states.float()).sum(-1)
        return -lse / beta + half_norm + math.log(num_patterns) / beta + 0.5 * largest**2

    def forward(self, batch: dict[str, Tensor]) -> Retrieval:
        """Retrieve from `batch["probes"] (B, N)`; a net that has stored nothing stores `batch["patterns"]` first."""
        if not self.stored:
            self.store(batch["patterns"])
        return self.retrieve(batch["probes"], energies=not self.training)  # training needs no energies

    def retrieve(self, probes: Tensor, energies: bool = True) -> Retrieval:
        """Update every probe up to `update_steps` times; weights over the K patterns per step in `attention`,
        and with `energies` the energy of every state.

        Each state's similarities are computed once: they give its energy and the next update's weights.
        """
        states = probes.to(self.patterns.dtype)  # (B, N)
        scores = first = self.similarities(states)  # (B, K) the first update's logits
        energy, attention = ([self.energy(states, scores)] if energies else []), []
        steps: Tensor | None = None  # (B,) the updates that moved each probe
        for step in range(self.update_steps):
            weights = softmax(scores)  # (B, K) eq. 3: ξ ← X softmax(β Xᵀξ)
            new = (weights @ self.patterns).to(states.dtype)  # (B, N) the states stay float32 under mixed precision
            moving = torch.linalg.vector_norm(new - states, dim=-1) >= self.eps  # (B,)
            steps = moving.long() if steps is None else steps + moving
            states = new
            attention.append(weights)
            last = step + 1 == self.update_steps or not moving.any()  # no next update
            if energies or not last:  # a next update, or this state's energy
                scores = self.similarities(states)
            if energies:
                energy.append(self.energy(states, scores))
            if last:
                break
        assert steps is not None  # update_steps >= 1: the loop ran
        stacked = torch.stack(energy, dim=-1) if energies else None
        return Retrieval(pred=states, energy=stacked, steps=steps, attention=attention, scores=first)
