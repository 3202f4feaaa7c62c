"""The input side of a `Hopfield` layer: LayerNorm then a linear map per input, computed as little as possible.

Inputs that are one tensor (self-association: stored = state = projection; pooling: stored = projection)
are normalised once and projected by one GEMM, each LayerNorm's gain and bias folded into its projection:
(n ⊙ g + b) Wᵀ + c = n (W diag g)ᵀ + (W b + c). A learned set expanded over the batch (stride 0: a lookup
table, pooling weights) is normalised and projected once and expanded after.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["project"]

Part = tuple[nn.LayerNorm | None, nn.Linear | None]


def project(inputs: list[Tensor], parts: list[Part]) -> list[Tensor]:
    """`linear(norm(x))` of each input with its (norm, linear) part, a missing one the identity; (B, T, ·) each."""
    out: list[Tensor | None] = [None] * len(inputs)
    for i, x in enumerate(inputs):
        if out[i] is not None:
            continue
        group = [j for j in range(i, len(inputs)) if out[j] is None and inputs[j] is x and _fusable(parts[i], parts[j])]
        for j, y in zip(group, _shared_rows(x, [parts[j] for j in group])):
            out[j] = y
    return out  # type: ignore[return-value]


def _fusable(a: Part, b: Part) -> bool:
    if a is b:
        return True
    (norm_a, linear_a), (norm_b, linear_b) = a, b
    if linear_a is None or linear_b is None or (norm_a is None) != (norm_b is None):
        return False
    if norm_a is None or norm_b is None:
        return True  # both None: one is only where the other is (above)
    return norm_a.eps == norm_b.eps


def _shared_rows(x: Tensor, parts: list[Part]) -> list[Tensor]:
    """Row-wise maps of `x`; an `x` expanded over the batch (stride 0) is mapped once and expanded back."""
    if x.dim() == 3 and x.shape[0] > 1 and x.stride(0) == 0:
        return [y.expand(x.shape[0], *y.shape[1:]) for y in _mapped(x[:1], parts)]
    return _mapped(x, parts)


def _mapped(x: Tensor, parts: list[Part]) -> list[Tensor]:
    if len(parts) == 1:
        norm, linear = parts[0]
        x = x if norm is None else norm(x)
        return [x if linear is None else linear(x)]
    norm = parts[0][0]
    normed = x if norm is None else F.layer_norm(x, norm.normalized_shape, eps=norm.eps)
    weights, biases = zip(*(_folded(n, linear) for n, linear in parts))
    bias = None
    if any(b is not None for b in biases):
        bias = torch.cat([b if b is not None else w.new_zeros(w.shape[0]) for w, b in zip(weights, biases)])
    joint = F.linear(normed, torch.cat(weights), bias)  # (B, T, Σ widths) one GEMM
    return list(joint.split([w.shape[0] for w in weights], dim=-1))


def _folded(norm: nn.LayerNorm | None, linear: nn.Linear | None) -> tuple[Tensor, Tensor | None]:
    """W diag g and W b + c: the linear map of the LayerNorm's affine output from its plain output."""
    assert linear is not None  # several parts are fused only when each has its linear map (`_fusable`)
    weight: Tensor = linear.weight
    bias: Tensor | None = linear.bias
    if norm is None or norm.weight is None:
        return weight, bias
    shift = weight @ norm.bias if norm.bias is not None else None
    bias = shift if bias is None else (bias if shift is None else bias + shift)
    return weight * norm.weight, bias
