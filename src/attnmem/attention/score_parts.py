"""What the scores of `scores.py` share: their check of the widths, the dot product qᵀk."""

from __future__ import annotations

import torch
from torch import Tensor


def check_dims(name: str, query_dim: int, key_dim: int, *, equal: bool) -> None:
    """Refuse widths below 1, and different widths where the score `name` needs them `equal`."""
    if query_dim < 1 or key_dim < 1:
        raise ValueError(f"{name}: query_dim and key_dim must be >= 1, got {query_dim} and {key_dim}")
    if equal and query_dim != key_dim:
        raise ValueError(
            f"{name} needs query_dim == key_dim (got {query_dim} and {key_dim}); for different widths use the "
            "Bilinear or Additive score (in a run: attention=bilinear or attention=additive)"
        )


def dot(query: Tensor, keys: Tensor) -> Tensor:
    """qᵀk of `query (..., Tq, D)` and `keys (..., Tk, D)`: (..., Tq, Tk).

    With one query (a memory read, a decoder step) it is computed as k q, so the keys' gradient comes out
    contiguous: the backward of q kᵀ gives it transposed, which an embedding's backward then copies.
    Batches of matrices go to `bmm` directly, without `matmul`'s reshapes and their backward.
    """
    if query.dim() == keys.dim() == 3 and query.shape[0] == keys.shape[0]:  # bmm: none of matmul's reshapes
        if query.shape[1] == 1:
            return torch.bmm(keys, query.transpose(1, 2)).transpose(1, 2)
        return torch.bmm(query, keys.transpose(1, 2))
    if query.shape[-2] == 1:
        return (keys @ query.transpose(-1, -2)).transpose(-1, -2)
    return query @ keys.transpose(-1, -2)
