"""Gradient clipping per weight matrix by its spectral norm, the rule of the MemN2N reference code.

The reference Matlab code (facebookarchive/MemNN, `MemN2N-babi-matlab/nn/Weight.m`) clips each weight on its
own: `if norm(grad) > max_grad_norm, grad = grad * max_grad_norm / norm(grad)`, where Matlab's `norm` of a
matrix is its largest singular value. A weight there can be several parameters here (MemN2N's embedding and
its time table are one lookup table in the reference code), so a model may group them: `weight_matrices()`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmem.models.contract import WeightMatrices


def weight_matrices(net: nn.Module) -> list[list[nn.Parameter]]:
    """The net's weights as groups of parameters that form one matrix (row blocks of one width): the groups
    of its own `weight_matrices()` (`WeightMatrices`), then every other parameter alone."""
    groups = list(net.weight_matrices()) if isinstance(net, WeightMatrices) else []
    grouped = {id(p) for group in groups for p in group}
    return groups + [[p] for p in net.parameters() if id(p) not in grouped]


def spectral_norm(rows: Tensor) -> Tensor:
    """The largest singular value of `rows (N, M)`, from the smaller of its two Gram matrices: a 0-d tensor."""
    gram = rows.T @ rows if rows.shape[0] >= rows.shape[1] else rows @ rows.T  # (m, m), m = min(N, M)
    return torch.linalg.eigvalsh(gram)[-1].clamp_min(0).sqrt()


@torch.no_grad()
def clip_per_weight(groups: list[list[nn.Parameter]], max_norm: float) -> None:
    """Scale each group's gradient so that its spectral norm (a vector's: its length) is at most `max_norm`."""
    if not max_norm > 0:  # a negative bound would scale every gradient by a negative number: gradient ascent
        raise ValueError(f"gradient_clip_val must be > 0 for per-weight clipping, got {max_norm}")
    for group in groups:
        grads = [p.grad for p in group if p.grad is not None]
        if not grads:
            continue
        rows = torch.cat([g.reshape(-1, g.shape[-1]) if g.dim() > 1 else g.reshape(1, -1) for g in grads])
        norm = spectral_norm(rows.float())
        scale = torch.where(norm > max_norm, max_norm / norm, torch.ones_like(norm))
        for g in grads:
            g.mul_(scale.to(g.dtype))
