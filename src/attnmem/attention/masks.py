"""The masks `attend` takes, with PyTorch's names and meanings, checked and combined into one.

`attn_mask` is bool, True where a query may attend (as `F.scaled_dot_product_attention`), broadcast to
(B, Tq, Tk); `key_padding_mask` is bool (B, Tk), True where a key is padding and may not be read (as
`nn.MultiheadAttention`). The combination is one bool mask, True = may attend.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["allowed"]


def _shape(t: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in t) + ")"


def allowed(
    scores_shape: torch.Size, attn_mask: Tensor | None, key_padding_mask: Tensor | None, *, owner: str = "attend"
) -> Tensor | None:
    """One bool mask, True = may attend, broadcastable to `scores_shape` (..., Tq, Tk); None when both are None.

    Args:
        scores_shape: the shape of the scores, (B, Tq, Tk) or (Tq, Tk) unbatched.
        attn_mask: bool, True = may attend; broadcastable to `scores_shape`.
        key_padding_mask: bool (B, Tk) ((Tk,) unbatched), True = padding, never attended.
        owner: the layer named in an error.
    """
    for name, mask in (("attn_mask", attn_mask), ("key_padding_mask", key_padding_mask)):
        if mask is not None and mask.dtype != torch.bool:
            meaning = "True = may attend" if name == "attn_mask" else "True = padding"
            raise TypeError(f"{owner}: {name} must be a bool tensor ({meaning}), got {mask.dtype}; "
                            "for an additive float mask, add it to the scores of your own score module")
    keep = None
    if attn_mask is not None:
        try:
            torch.broadcast_shapes(attn_mask.shape, scores_shape)
        except RuntimeError:
            raise ValueError(f"{owner}: attn_mask of shape {_shape(attn_mask.shape)} does not broadcast to the "
                             f"scores' shape {_shape(scores_shape)} (batch, queries, keys)") from None
        if attn_mask.dim() > len(scores_shape):
            raise ValueError(f"{owner}: attn_mask has {attn_mask.dim()} dimensions, the scores "
                             f"{_shape(scores_shape)} only {len(scores_shape)}")
        keep = attn_mask
    if key_padding_mask is not None:
        expected = (*scores_shape[:-2], scores_shape[-1])  # (B, Tk)
        if tuple(key_padding_mask.shape) != expected:
            raise ValueError(f"{owner}: key_padding_mask of shape {_shape(key_padding_mask.shape)}, expected "
                             f"{_shape(expected)} (batch, keys): True marks a padding key")
        readable = ~key_padding_mask.unsqueeze(-2)  # (B, 1, Tk)
        keep = readable if keep is None else keep & readable
    return keep
