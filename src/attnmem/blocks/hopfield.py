"""Hopfield layers of Ramsauer et al. 2020 for other models: the tempered score, pooling, a learned lookup.

`HopfieldPooling` (a learned query pools a set) and `HopfieldLayer` (learned stored patterns) compute
the update with `attend`, so the `attention` group swaps the similarity.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.core.float32 import in_float32

__all__ = ["HopfieldLayer", "HopfieldPooling", "Tempered"]


class Tempered(nn.Module):
    """A score times the inverse temperature β: β · score(q, k), the argument of the Hopfield softmax.

    A score linear in the query (`linear_in_query`) is called on β·q instead: the same value, one
    multiplication over (B, Tq, Dq) rather than over the (B, Tq, Tk) scores, forward and backward.
    """

    def __init__(self, score: nn.Module, beta: float) -> None:
        super().__init__()
        if beta <= 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        self.score, self.beta = score, beta
        self.scales_query: bool = getattr(score, "linear_in_query", False)

    @in_float32  # a large β would amplify 16-bit rounding of the scores
    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        if self.scales_query:
            return self.score(self.beta * query, keys)  # (B, Tq, Tk) score(βq, k) = β·score(q, k)
        return self.beta * self.score(query, keys)  # (B, Tq, Tk)


class HopfieldPooling(nn.Module):
    """Hopfield pooling, Ramsauer et al. 2020 (§3, "HopfieldPooling"): a learned state pattern pools a set.

    The stored patterns are the input set Y (B, T, D): keys Y W_K, values Y W_V; the state
    patterns are `num_queries` learned queries Q (plus, optionally, a per-example `query` added to
    them, to condition the pooling). The output is softmax(β score(ξ, Y W_K)) Y W_V after ξ is
    updated `update_steps - 1` times in the key space.
    """

    def __init__(
        self,
        *,
        input_dim: int,
        score: Callable[..., nn.Module],
        num_queries: int = 1,
        hidden_dim: int | None = None,
        output_dim: int | None = None,
        beta: float = 1.0,
        update_steps: int = 1,
    ) -> None:
        super().__init__()
        hidden_dim, output_dim = hidden_dim or input_dim, output_dim or input_dim
        if min(input_dim, num_queries, hidden_dim, output_dim, update_steps) < 1:
            raise ValueError(
                "HopfieldPooling: input_dim, num_queries, hidden_dim, output_dim and update_steps must be >= 1"
            )
        self.update_steps = update_steps
        self.query = nn.Parameter(torch.randn(num_queries, hidden_dim) / math.sqrt(hidden_dim))  # Q
        self.key_proj = nn.Linear(input_dim, hidden_dim, bias=False)  # W_K
        self.value_proj = nn.Linear(input_dim, output_dim, bias=False)  # W_V
        self.score = Tempered(score(query_dim=hidden_dim, key_dim=hidden_dim), beta)

    def forward(
        self, stored: Tensor, *, mask: Tensor | None = None, query: Tensor | None = None
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

    def __init__(
        self,
        *,
        input_dim: int,
        num_patterns: int,
        score: Callable[..., nn.Module],
        hidden_dim: int | None = None,
        output_dim: int | None = None,
        beta: float = 1.0,
    ) -> None:
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
