"""MemN2N's read of its memory in one hop (`attnmem.models.memn2n`): the weights over the slots, with linear start
and the empty slots as one "nothing" entry of the softmax, and the vector read."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmem.attention import attend, softmax

__all__ = ["address"]


def address(score: nn.Module, u: Tensor, m: Tensor, c: Tensor, empty: Tensor, empty_log: Tensor | None, linear: bool,
            nil: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """Read `o (B, 1, d)` from memories `m`, `c (B, S, d)` for `u (B, 1, d)` with `score`; weights (B, 1, S).

    `empty (B, 1, S)` is True on an empty slot, `empty_log (B, 1, 1)` the log of their count in the whole memory
    ("attend"), `linear` linear start's flag; `nil` an empty slot's input and output memories (B, 1, d) each,
    all nil words (`nil_gradient`; zero in value), else they are zero vectors.
    """
    if linear:  # LS: `attend` always softmaxes, so the linear weights are computed here
        weights = score(u, m).masked_fill(empty, 0.0)  # (B, 1, S)
        return torch.bmm(weights, c), weights
    if empty_log is None:
        o, weights = attend(u, m, c, score, key_padding_mask=empty[:, 0])
        assert weights is not None  # attend returns the weights unless need_weights=False
        return o, weights
    # the memory's empty slots (up to memory_size) hold zero vectors that still take part in the
    # softmax, as in the reference code: together one "nothing" entry weighted by their count
    nothing = empty_log  # (B, 1, 1); a score linear in the key gives the zero vectors 0
    if nil is not None or not getattr(score, "linear_in_key", False):
        nothing = score(u, torch.zeros_like(m[:, :1]) if nil is None else nil[0]) + empty_log
    scores = torch.cat([score(u, m).masked_fill(empty, -math.inf), nothing], dim=-1)  # (B, 1, S + 1)
    weights = softmax(scores)  # (B, 1, S + 1); empty slots read zeros
    o = torch.bmm(weights[..., :-1], c)  # (B, 1, d)
    return (o if nil is None else o + weights[..., -1:] * nil[1]), weights[..., :-1]
