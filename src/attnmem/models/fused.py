"""What the fused time loops (`ntm_sequence`, `dnc_loop`) share: the LSTM controller's backward, and the grouped
algebra of `vmap` over E models' stacked weights (one call runs the E models at once, their rows E groups of B, each
group with its own weights)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

aten = torch.ops.aten


def affine(add: Tensor | None, x: Tensor, weight: Tensor, groups: int) -> Tensor:
    """add + x @ weight; with groups, the rows of `x (E·B, K)` are E groups, each with its own `weight (E, K, O)`."""
    if not groups:
        return torch.mm(x, weight) if add is None else torch.addmm(add, x, weight)
    x = x.view(groups, -1, x.shape[-1])  # a bias (E, O) is viewed as (E, 1, O)
    out = torch.bmm(x, weight) if add is None else torch.baddbmm(add.view(groups, -1, add.shape[-1]), x, weight)
    return out.flatten(0, 1)


def weight_grad(grad: Tensor, x: Tensor, groups: int) -> Tensor:
    """Σ over rows and steps of gradᵀ x: `grad (B, T, O)`, `x (B, T, I)` -> (O, I), or (E, O, I) per group."""
    r = max(groups, 1)
    out = torch.bmm(grad.reshape(r, -1, grad.shape[-1]).mT, x.reshape(r, -1, x.shape[-1]))
    return out if groups else out[0]


def stacked(info: Any, in_dims: tuple, tensors: list[Tensor], groups: int, loop: str) -> list[Tensor]:
    """A loop's tensor inputs under `vmap` (`info`, `in_dims`: torch's `Function.vmap` arguments) with the models'
    dimension first, (E, ...), an unbatched input expanded to every model; `groups` > 0 (already grouped) refused."""
    if groups:
        raise NotImplementedError(f"the {loop}'s fused loop runs under one vmap over stacked weights, not nested ones")
    r = info.batch_size
    return [x.expand(r, *x.shape) if d is None else x.movedim(d, 0) for x, d in zip(tensors, in_dims)]


def lstm_backward(d_h: Tensor, d_c: Tensor, s: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """Gradients of the LSTM controller's gate pre-activation z and of c_{t-1}, from those of h_t and c_t (`s`: the
    step's stash: `act`, the gates i, f, g, o after their nonlinearities; `cand`, g; `tc`, tanh c_t; `c_prev`)."""
    act, cand, tc = s["act"], s["cand"], s["tc"]
    i, f, _, o = act.chunk(4, 1)
    d_c = d_c + aten.tanh_backward(d_h * o, tc)
    d_z = torch.cat([aten.sigmoid_backward(d_c * cand, i), aten.sigmoid_backward(d_c * s["c_prev"], f),
                     aten.tanh_backward(d_c * i, cand), aten.sigmoid_backward(d_h * tc, o)], 1)
    return d_z, d_c * f
