"""Heads of the attention-like mixers: a width-D projection split into H heads and their outputs merged back."""

from __future__ import annotations

from torch import Tensor

__all__ = ["merge_heads", "split_heads"]


def split_heads(y: Tensor, heads: int) -> Tensor:
    """`y (B, T, D)` as H heads of width D / H: (B, H, T, D / H)."""
    b, t, d = y.shape
    return y.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(y: Tensor) -> Tensor:
    """The heads `y (B, H, T, Dh)` side by side: (B, T, H · Dh)."""
    b, h, t, dh = y.shape
    return y.transpose(1, 2).reshape(b, t, h * dh)
