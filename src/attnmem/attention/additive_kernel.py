"""The chunked kernel of the additive score vᵀ tanh(q + k) (q = W q', k = U k' projected by `Additive`).

The one-line formula, `(v * torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))).sum(-1)`, would hold a
(B, Tq, Tk, H) tensor for forward and another for backward; this kernel holds one chunk of keys at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import Tensor

__all__ = ["ADDITIVE_CHUNK_ELEMENTS", "additive_scores"]

# elements of one (B, Tq, keys, H) chunk of tanh(Wq + Uk): 4 MB in float32 stays in a CPU's cache
ADDITIVE_CHUNK_ELEMENTS = 2**20


class _AdditiveScores(torch.autograd.Function):
    """vᵀ tanh(q + k) over key chunks, recomputing tanh in backward: the (B, Tq, Tk, H) tensor is never whole.

    Backward uses d tanh = 1 - tanh², so with P = g · tanh² both input gradients are sums of P:
    dq = v ⊙ (Σ_k g - Σ_k P), dk = v ⊙ (Σ_q g - Σ_q P), dv = Σ g · tanh.
    """

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        ctx.save_for_backward(q, k, v)
        scores = q.new_empty(*q.shape[:-1], k.shape[-2])  # (B, Tq, Tk)
        for j, t in _tanh_chunks(q, k):
            scores[:, :, j : j + t.shape[2]] = t @ v
        return scores

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        q, k, v = ctx.saved_tensors
        sum_q, sum_k = torch.zeros_like(q), torch.empty_like(k)  # Σ_k P (B, Tq, H), Σ_q P (B, Tk, H)
        dv = torch.zeros_like(v)
        for j, t in _tanh_chunks(q, k):
            g = grad[:, :, j : j + t.shape[2]]  # (B, Tq, c)
            dv += g.reshape(-1) @ t.reshape(-1, t.shape[-1])
            p = t.mul_(t).mul_(g.unsqueeze(-1))  # (B, Tq, c, H)
            sum_q += p.sum(2)
            sum_k[:, j : j + t.shape[2]] = p.sum(1)
        dq = v * (grad.sum(2).unsqueeze(-1) - sum_q) if ctx.needs_input_grad[0] else None
        dk = v * (grad.sum(1).unsqueeze(-1) - sum_k) if ctx.needs_input_grad[1] else None
        return dq, dk, dv


def _tanh_chunks(q: Tensor, k: Tensor) -> Iterator[tuple[int, Tensor]]:
    """Yield (first key, tanh(q + k) for a chunk of keys (B, Tq, c, H)), reusing one buffer."""
    b, tq, h = q.shape
    tk = k.shape[1]
    c = max(1, min(tk, ADDITIVE_CHUNK_ELEMENTS // max(1, b * tq * h)))
    buffer = q.new_empty(b, tq, c, h)
    for j in range(0, tk, c):
        t = buffer[:, :, : min(c, tk - j)]
        torch.add(q.unsqueeze(2), k[:, j : j + c].unsqueeze(1), out=t)
        yield j, t.tanh_()


def additive_scores(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """vᵀ tanh(q_i + k_j) of `q (B, Tq, H)`, `k (B, Tk, H)`, `v (H,)`: (B, Tq, Tk), chunked over keys."""
    # torch leaves Function.apply unannotated; untyped_calls_exclude = ["torch"] misses it called on a subclass
    return cast(Tensor, _AdditiveScores.apply(q, k, v))  # type: ignore[no-untyped-call]
