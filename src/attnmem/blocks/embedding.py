"""Word embeddings: pretrained vectors when the data gives them, else a trained table; and `lookup`, their rows
with a faster gradient on a CPU."""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.autograd import Function

__all__ = ["embedding", "lookup"]


def embedding(vocab_size: int, embed_dim: int, embeddings: Tensor | None, freeze: bool) -> nn.Embedding:
    """Word embeddings: pretrained ones when given (their width wins over `embed_dim`), else random."""
    if embeddings is not None:
        return cast(nn.Embedding, nn.Embedding.from_pretrained(embeddings.float(), freeze=freeze, padding_idx=0))
    return nn.Embedding(vocab_size, embed_dim, padding_idx=0)


def lookup(weight: Tensor, ids: Tensor, padding_idx: int | None = None) -> Tensor:
    """`F.embedding(ids, weight, padding_idx)`: rows of `weight (V, d)` for `ids (...)`, (..., d); the same values
    and gradient, the gradient summed by one `index_add` on a CPU (Embedding's CPU backward adds row by row:
    4-5x slower for MemN2N's tables)."""
    return cast(Tensor, _Lookup.apply(weight, ids, padding_idx))


class _Lookup(Function):
    generate_vmap_rule = True  # under `vmap` (stacked weights): both directions are ops with batching rules

    @staticmethod
    def forward(weight: Tensor, ids: Tensor, padding_idx: int | None) -> Tensor:
        return F.embedding(ids, weight, padding_idx)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor, int | None], output: Tensor) -> None:
        weight, ids, ctx.padding_idx = inputs
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (ids,) = ctx.saved_tensors
        if grad.device.type != "cpu":  # the GPU kernel sorts, which is deterministic; index_add's atomics are not
            pad = -1 if ctx.padding_idx is None else ctx.padding_idx
            return torch.ops.aten.embedding_dense_backward(grad, ids, ctx.rows, pad, False), None, None
        flat = grad.reshape(-1, grad.shape[-1])  # (N, d)
        summed = flat.new_zeros(ctx.rows, flat.shape[-1]).index_add(0, ids.reshape(-1), flat)  # (V, d)
        if ctx.padding_idx is not None:  # the pad word's row gets no gradient, as in nn.Embedding
            summed = summed.index_fill(0, ids.new_tensor([ctx.padding_idx]), 0)
        return summed, None, None
