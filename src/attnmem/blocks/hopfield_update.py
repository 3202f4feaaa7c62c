"""The association of a `Hopfield` layer: ξ = softmax(β score(R, Y)) through `attend`, updated in the key space.

`update` runs eq. 3 of Ramsauer et al. 2020 per head: ξ ← softmax(β score(ξ Y, Y)) until `steps_max` updates
or until ξ moves by at most `eps` (hflayers' rule: the head's largest ‖Δξ‖ over the batch); `association_keep`
turns hflayers' masks (True = may not associate) into `attend`'s (True = may attend).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmem.attention import attend

__all__ = ["association_keep", "update"]


def association_keep(query_shape: torch.Size, num_stored: int, padding: Tensor | None, association: Tensor | None,
                     *, zero_association: bool = False) -> Tensor | None:
    """`attend`'s mask (True = may attend) of hflayers' masks, broadcast to (B, H, L, S); None when both are None.

    Args:
        query_shape: (B, H, L, d) of the projected state patterns.
        num_stored: S, the stored patterns.
        padding: bool (B, S), True = padding (`stored_pattern_padding_mask`).
        association: bool (L, S) or (B·H, L, S), True = may not associate (`association_mask`).
        zero_association: a zero pattern follows the S stored ones, which every state may associate with.
    """
    batch, heads, length, _ = query_shape
    keep = None
    if association is not None:
        _check_bool(association, "association_mask", "True = may not associate")
        if tuple(association.shape) == (length, num_stored):
            keep = ~association.view(1, 1, length, num_stored)
        elif tuple(association.shape) == (batch * heads, length, num_stored):
            keep = ~association.view(batch, heads, length, num_stored)
        else:
            raise ValueError(f"Hopfield: association_mask of shape {tuple(association.shape)}, expected "
                             f"(states, stored) = {(length, num_stored)} or (batch·heads, states, stored) = "
                             f"{(batch * heads, length, num_stored)}")
    if padding is not None:
        _check_bool(padding, "stored_pattern_padding_mask", "True = padding")
        if tuple(padding.shape) != (batch, num_stored):
            raise ValueError(f"Hopfield: stored_pattern_padding_mask of shape {tuple(padding.shape)}, expected "
                             f"(batch, stored) = {(batch, num_stored)}: True marks a padding pattern")
        readable = ~padding.view(batch, 1, 1, num_stored)
        keep = readable if keep is None else keep & readable
    if keep is not None and zero_association:
        keep = torch.cat([keep, keep.new_ones(*keep.shape[:-1], 1)], dim=-1)  # the zero pattern is always readable
    return keep


def _check_bool(mask: Tensor, name: str, meaning: str) -> None:
    if mask.dtype != torch.bool:
        raise TypeError(f"Hopfield: {name} must be a bool tensor ({meaning}), got {mask.dtype}")


def update(query: Tensor, keys: Tensor, values: Tensor, score: nn.Module, keep: Tensor | None, *,
           steps_max: int | None, eps: float, dropout: nn.Dropout, need_weights: bool,
           fused: nn.Module | None = None) -> tuple[Tensor, Tensor | None]:
    """Retrieve with `steps_max` updates of ξ at most: `(read (B, H, L, pd), ξ (B, H, L, S) or None)`.

    One retrieval without dropout reads the values in the same `attend` call (with `fused`, a `ScaledDot` equal
    to `score`, in `F.scaled_dot_product_attention` when neither ξ nor a mask is there: on a CPU, SDPA's masked
    softmax costs more than it saves); otherwise the states are updated
    with the keys as values (ξ Y, the next state) and ξ reads the values once it has settled.
    """
    dropping = dropout.p > 0 and dropout.training
    if steps_max == 0 and not dropping:
        one = fused if fused is not None and not need_weights and keep is None else score
        return attend(query, keys, values, one, attn_mask=keep, need_weights=need_weights)
    state, xi = attend(query, keys, keys, score, attn_mask=keep)  # ξ Y (B, H, L, hd), ξ (B, H, L, S)
    assert xi is not None  # attend returns the weights unless need_weights=False
    active = _still_moving(None, xi, 0, steps_max, eps)
    step = 1
    while bool(active.any()):
        next_state, next_xi = attend(state, keys, keys, score, attn_mask=keep)
        assert next_xi is not None  # as above
        heads = active.view(1, -1, 1, 1)  # a settled head keeps its ξ (hflayers updates the active heads only)
        previous, xi = xi, torch.where(heads, next_xi, xi)
        state = torch.where(heads, next_state, state)
        active = _still_moving(previous, xi, step, steps_max, eps)
        step += 1
    return dropout(xi).to(values.dtype) @ values, xi  # (B, H, L, pd)


@torch.no_grad()
def _still_moving(previous: Tensor | None, xi: Tensor, step: int, steps_max: int | None, eps: float) -> Tensor:
    """(H,) the heads to update again: below `steps_max`, and ξ moved by more than `eps` somewhere in the batch."""
    heads = xi.shape[1]
    active = torch.full((heads,), steps_max is None or step < steps_max, device=xi.device)
    if previous is not None:
        moved = torch.linalg.vector_norm(previous - xi, dim=(2, 3)).amax(dim=0)  # (H,)
        active &= moved > eps
    return active
