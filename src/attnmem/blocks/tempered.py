"""`Tempered`: a score times an inverse temperature β, the argument of the Hopfield softmax (Ramsauer et al. 2020)."""

from __future__ import annotations

from typing import cast

from torch import Tensor, nn

from attnmem.core.float32 import in_float32

__all__ = ["Tempered"]


class Tempered(nn.Module):
    """A score times the inverse temperature β: β · score(q, k), the argument of the Hopfield softmax.

    A score linear in the query (`linear_in_query`) is called on β·q instead: the same value, one
    multiplication over (B, Tq, Dq) rather than over the (B, Tq, Tk) scores, forward and backward.

    Args:
        score: a built score module, e.g. `Dot(16, 16)`.
        beta: β > 0, a float, or a tensor broadcast against the scores (one β per head: shape (H, 1, 1)
            for scores (B, H, Tq, Tk)); a tensor is kept as a buffer, so it follows the module's device.
    """

    beta: float | Tensor  # a buffer when a tensor

    def __init__(self, score: nn.Module, beta: float | Tensor) -> None:
        super().__init__()
        if isinstance(beta, Tensor):
            if bool((beta <= 0).any()):
                raise ValueError(f"Tempered: every beta must be > 0, got {beta.flatten().tolist()}")
            self.register_buffer("beta", beta.detach().clone(), persistent=False)
        else:
            if beta <= 0:
                raise ValueError(f"beta must be > 0, got {beta}")
            self.beta = beta
        self.score = score
        self.scales_query: bool = getattr(score, "linear_in_query", False)

    @in_float32  # a large β would amplify 16-bit rounding of the scores
    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        if self.scales_query:
            return cast(Tensor, self.score(self.beta * query, keys))  # (B, Tq, Tk) score(βq, k) = β·score(q, k)
        return cast(Tensor, self.beta * self.score(query, keys))  # (B, Tq, Tk)
