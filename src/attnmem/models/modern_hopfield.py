"""Modern (continuous) Hopfield networks, Ramsauer et al. 2020: retrieval is attention over the stored patterns.

`ModernHopfield` retrieves ±1 patterns of the `patterns` family; `HopfieldPooling` (a learned query
pools a set) and `HopfieldLayer` (learned stored patterns) are trainable layers for other models.
All three compute the update with `attend`, so the `attention` group swaps the similarity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.float32 import in_float32
from attnmem.models.hopfield import Retrieval

__all__ = ["HopfieldLayer", "HopfieldPooling", "ModernHopfield", "Tempered"]


class Tempered(nn.Module):
    """A score times the inverse temperature β: β · score(q, k), the argument of the Hopfield softmax."""

    def __init__(self, score: nn.Module, beta: float) -> None:
        super().__init__()
        if beta <= 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        self.score, self.beta = score, beta

    @in_float32  # a large β would amplify 16-bit rounding of the scores
    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.beta * self.score(query, keys)  # (B, Tq, Tk)


class ModernHopfield(nn.Module):
    """Modern Hopfield network, Ramsauer et al. 2020, "Hopfield Networks is All You Need" (arXiv:2008.02217).

    The update (eq. 3) ξ ← X softmax(β Xᵀξ) is `attend(ξ, X, X, β·score)` with the stored patterns
    X as keys and values; the paper's score is `Dot`. It repeats up to `update_steps` times, and a
    probe stops once ‖Δξ‖ < `eps`. The energy (eq. 2, with the score in place of Xᵀξ) is
    E = -β⁻¹ lse(β score(ξ, X)) + ½ ξᵀξ + β⁻¹ log K + ½ M², M the largest pattern norm.
    Exponentially many patterns fit in N units; one update usually retrieves.
    """

    families: ClassVar[tuple[str, ...]] = ("patterns",)

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

    @in_float32  # the log-sum-exp and ½ξᵀξ are sums over many terms
    def energy(self, states: Tensor) -> Tensor:
        """E(ξ) of `states (B, N)`: (B,)."""
        memory = self.patterns.unsqueeze(0)  # (1, K, N)
        lse = torch.logsumexp(self.score(states.unsqueeze(0), memory).squeeze(0), dim=-1)  # (B,)
        beta, num_patterns = self.score.beta, self.patterns.shape[0]
        largest = self.patterns.norm(dim=-1).max()
        return -lse / beta + 0.5 * (states * states).sum(-1) + math.log(num_patterns) / beta + 0.5 * largest**2

    def forward(self, batch: dict[str, Tensor]) -> Retrieval:
        """Retrieve from `batch["probes"] (B, N)`; a net that has stored nothing stores `batch["patterns"]` first."""
        if not self.stored:
            self.store(batch["patterns"])
        return self.retrieve(batch["probes"])

    def retrieve(self, probes: Tensor) -> Retrieval:
        """Update every probe up to `update_steps` times; weights over the K patterns per step in `attention`."""
        memory = self.patterns.unsqueeze(0)  # (1, K, N): the probes are the queries of one batch
        states = probes.to(memory.dtype)  # (B, N)
        energies, attention = [self.energy(states)], []
        scores = self.score(states.unsqueeze(0), memory).squeeze(0)  # (B, K) the first update's logits
        steps = torch.zeros(states.shape[0], dtype=torch.long, device=states.device)
        for _ in range(self.update_steps):
            new, weights = attend(states.unsqueeze(0), memory, memory, self.score)  # (1, B, N), (1, B, K)
            new = new.squeeze(0).to(states.dtype)  # the states stay float32 under mixed precision
            moving = (new - states).norm(dim=-1) >= self.eps  # (B,)
            steps += moving
            states = new
            energies.append(self.energy(states))
            attention.append(weights.squeeze(0))
            if not moving.any():
                break
        return Retrieval(pred=states, energy=torch.stack(energies, dim=-1), steps=steps, attention=attention,
                         scores=scores)


class HopfieldPooling(nn.Module):
    """Hopfield pooling, Ramsauer et al. 2020 (§3, "HopfieldPooling"): a learned state pattern pools a set.

    The stored patterns are the input set Y (B, T, D): keys Y W_K, values Y W_V; the state
    patterns are `num_queries` learned queries Q (plus, optionally, a per-example `query` added to
    them, to condition the pooling). The output is softmax(β score(ξ, Y W_K)) Y W_V after ξ is
    updated `update_steps - 1` times in the key space.
    """

    def __init__(self, *, input_dim: int, score: Callable[..., nn.Module], num_queries: int = 1,
                 hidden_dim: int | None = None, output_dim: int | None = None, beta: float = 1.0,
                 update_steps: int = 1) -> None:
        super().__init__()
        hidden_dim, output_dim = hidden_dim or input_dim, output_dim or input_dim
        if min(input_dim, num_queries, hidden_dim, output_dim, update_steps) < 1:
            raise ValueError("HopfieldPooling: input_dim, num_queries, hidden_dim, output_dim and update_steps "
                             "must be >= 1")
        self.update_steps = update_steps
        self.query = nn.Parameter(torch.randn(num_queries, hidden_dim) / math.sqrt(hidden_dim))  # Q
        self.key_proj = nn.Linear(input_dim, hidden_dim, bias=False)  # W_K
        self.value_proj = nn.Linear(input_dim, output_dim, bias=False)  # W_V
        self.score = Tempered(score(query_dim=hidden_dim, key_dim=hidden_dim), beta)

    def forward(self, stored: Tensor, *, mask: Tensor | None = None, query: Tensor | None = None
                ) -> tuple[Tensor, Tensor]:
        """Pool `stored (B, T, D)`; `mask (B, T)` True where an element may be read.

        Returns `(pooled (B, Q, D_out), weights (B, Q, T))`.
        """
        keys, values = self.key_proj(stored), self.value_proj(stored)  # (B, T, H), (B, T, D_out)
        state = self.query.expand(stored.shape[0], -1, -1)  # (B, Q, H)
        if query is not None:
            state = state + query
        mask = mask.unsqueeze(1) if mask is not None else None  # (B, 1, T)
        for _ in range(self.update_steps - 1):
            state, _ = attend(state, keys, keys, self.score, mask=mask)
        pooled, weights = attend(state, keys, values, self.score, mask=mask)
        return pooled, weights


class HopfieldLayer(nn.Module):
    """Hopfield layer, Ramsauer et al. 2020 (§3, "HopfieldLayer"): inputs retrieve from learned stored patterns.

    The state patterns are the inputs R (B, T, D) projected by W_Q; the K stored patterns Y (the
    keys) and their read-outs (the values) are parameters, as in a learned lookup table:
    output = softmax(β score(R W_Q, Y)) V.
    """

    def __init__(self, *, input_dim: int, num_patterns: int, score: Callable[..., nn.Module],
                 hidden_dim: int | None = None, output_dim: int | None = None, beta: float = 1.0) -> None:
        super().__init__()
        hidden_dim, output_dim = hidden_dim or input_dim, output_dim or input_dim
        if min(input_dim, num_patterns, hidden_dim, output_dim) < 1:
            raise ValueError("HopfieldLayer: input_dim, num_patterns, hidden_dim and output_dim must be >= 1")
        self.query_proj = nn.Linear(input_dim, hidden_dim, bias=False)  # W_Q
        self.patterns = nn.Parameter(torch.randn(num_patterns, hidden_dim) / math.sqrt(hidden_dim))  # Y
        self.values = nn.Parameter(torch.randn(num_patterns, output_dim) / math.sqrt(output_dim))  # V
        self.score = Tempered(score(query_dim=hidden_dim, key_dim=hidden_dim), beta)

    def forward(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """Retrieve for `states (B, T, D)`: `(output (B, T, D_out), weights (B, T, K))`."""
        query = self.query_proj(states)  # (B, T, H)
        return attend(query, self.patterns.unsqueeze(0), self.values.unsqueeze(0), self.score)
