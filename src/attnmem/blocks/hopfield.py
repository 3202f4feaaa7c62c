"""Hopfield pooling and lookup (Ramsauer et al. 2020, §3) on the general `Hopfield` layer, as in `hflayers`.

`HopfieldPooling` (learned state patterns pool a set) and `HopfieldLayer` (inputs look up learned stored
patterns) take `hflayers`' arguments; both compute the association with `attend`, so `score=` swaps the
similarity. State dicts of their attnmem 0.2 forms (`query`, `key_proj`, `value_proj`; `patterns`, `values`)
load through a pre-hook.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnmem.blocks.hopfield_layer import Hopfield
from attnmem.blocks.tempered import Tempered

__all__ = ["Hopfield", "HopfieldLayer", "HopfieldPooling", "Tempered"]


def _renamed_keys(state_dict: dict[str, Any], prefix: str, renames: dict[str, str]) -> None:
    for old, new in renames.items():
        if prefix + old in state_dict and prefix + new not in state_dict:
            state_dict[prefix + new] = state_dict.pop(prefix + old)


def _batched(input: Tensor, owner: str, batch_first: bool) -> Tensor:
    if not isinstance(input, Tensor) or input.dim() != 3:
        shape = tuple(input.shape) if isinstance(input, Tensor) else type(input).__name__
        layout = "batch, length" if batch_first else "length, batch"
        raise ValueError(f"{owner}: input of shape {shape}, expected 3-D ({layout}, width); "
                         "add a batch dimension to an unbatched set (x.unsqueeze(0))")
    return input


class HopfieldPooling(nn.Module):
    """Hopfield pooling, Ramsauer et al. 2020 (§3, "HopfieldPooling"): `quantity` learned state patterns pool a set.

    The stored patterns and the projection are the input set; the state patterns are `pooling_weights`,
    (quantity, input_size) (hidden_size with `state_pattern_as_static=True`), plus an optional per-example
    `state` added to them (to condition the pooling on a question, say).

    Args:
        input_size: width of the set's elements (and of the state patterns).
        quantity: the learned state patterns, each pooling the set once.
        trainable: whether the state patterns learn.
        **hopfield: the arguments of `Hopfield` (hidden_size, num_heads, scaling, update_steps_max, …).
    """

    def __init__(self, input_size: int, *, quantity: int = 1, trainable: bool = True, **hopfield: Any) -> None:
        super().__init__()
        if quantity < 1:
            raise ValueError(f"HopfieldPooling: quantity must be >= 1, got {quantity}")
        self.hopfield = Hopfield(input_size, **hopfield)
        self.quantity = quantity
        width = self.hopfield.hidden_size if self.hopfield.static[1] else input_size
        self.pooling_weights = nn.Parameter(torch.empty(quantity, width), requires_grad=trainable)  # (Q, D)
        nn.init.normal_(self.pooling_weights, mean=0.0, std=0.02)
        # torch leaves this hook's registration unannotated; untyped_calls_exclude misses it called on a subclass
        self.register_load_state_dict_pre_hook(self._old_keys)  # type: ignore[no-untyped-call]

    @staticmethod
    def _old_keys(module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """attnmem 0.2's HopfieldPooling kept `query`, `key_proj`, `value_proj` on itself."""
        _renamed_keys(state_dict, prefix, {"query": "pooling_weights",
                                           "key_proj.weight": "hopfield.key_proj.weight",
                                           "value_proj.weight": "hopfield.value_proj.weight"})

    def forward(self, input: Tensor | tuple[Tensor, Tensor], stored_pattern_padding_mask: Tensor | None = None,
                association_mask: Tensor | None = None, *, state: Tensor | None = None,
                return_association: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Pool the set with the state patterns: the pooled set, and the association ξ with `return_association`.

        Args:
            input: the set, as stored patterns and pattern projection, or the tuple `(stored, projection)`.
            stored_pattern_padding_mask: True on an element of the set that is padding, never pooled.
            association_mask: True where a state pattern may not associate with an element (hflayers' meaning).
            state: added to the learned state patterns (to condition the pooling on a question, say).
            return_association: also return ξ.

        Shapes:
            - input: (B, S, input_size), or the tuple (stored (B, S, ·), projection (B, S, ·))
            - stored_pattern_padding_mask: (B, S), bool
            - association_mask: (quantity, S) or (B · num_heads, quantity, S), bool
            - state: (B, quantity, width of a state pattern)
            - pooled: (B, quantity · output_size); ξ: (B, num_heads, quantity, S)

        Returns:
            `pooled`, or `(pooled, ξ)` with `return_association`.
        """
        stored, projection = input if isinstance(input, (tuple, list)) else (input, input)
        stored = _batched(stored, "HopfieldPooling", self.hopfield.batch_first)
        batch = stored.shape[0 if self.hopfield.batch_first else 1]
        states = self.pooling_weights.expand(batch, -1, -1)  # (B, Q, D)
        if state is not None:
            states = states + state
        if not self.hopfield.batch_first:
            states = states.transpose(0, 1)
        out = self.hopfield((stored, states, projection), stored_pattern_padding_mask, association_mask,
                            return_association=return_association)
        pooled: Tensor
        xi: Tensor | None
        pooled, xi = out if return_association else (out, None)
        pooled = pooled if self.hopfield.batch_first else pooled.transpose(0, 1)
        pooled = pooled.flatten(start_dim=1)  # (B, Q · output_size)
        if not return_association:
            return pooled
        assert xi is not None  # the core returns (output, ξ) with return_association
        return pooled, xi


class HopfieldLayer(nn.Module):
    """Hopfield lookup, Ramsauer et al. 2020 (§3, "HopfieldLayer"): inputs retrieve from learned stored patterns.

    The state patterns are the input; the `quantity` stored patterns are `lookup_weights` and the projection
    is them too, or `target_weights` of its own with `lookup_weights_as_separated=True`: a learned
    key-value table.

    Args:
        input_size: width of the input (the state patterns).
        quantity: the learned stored patterns.
        trainable: whether the stored patterns learn.
        lookup_weights_as_separated: learn the projection (targets) apart from the stored patterns.
        lookup_targets_as_trainable: whether those targets learn.
        **hopfield: the arguments of `Hopfield`.
    """

    def __init__(self, input_size: int, *, quantity: int = 1, trainable: bool = True,
                 lookup_weights_as_separated: bool = False, lookup_targets_as_trainable: bool = True,
                 **hopfield: Any) -> None:
        super().__init__()
        if quantity < 1:
            raise ValueError(f"HopfieldLayer: quantity must be >= 1, got {quantity}")
        self.hopfield = Hopfield(input_size, **hopfield)
        self.quantity = quantity
        core = self.hopfield
        width = core.hidden_size if core.static[0] else core.stored_pattern_size
        self.lookup_weights = nn.Parameter(torch.empty(quantity, width), requires_grad=trainable)  # (K, D)
        nn.init.normal_(self.lookup_weights, mean=0.0, std=0.02)
        self.target_weights: nn.Parameter | None = None
        if lookup_weights_as_separated:
            target = width if "pattern_projection_size" not in hopfield else core.pattern_projection_size
            self.target_weights = nn.Parameter(torch.empty(quantity, target), requires_grad=lookup_targets_as_trainable)
            nn.init.normal_(self.target_weights, mean=0.0, std=0.02)
        # torch leaves this hook's registration unannotated; untyped_calls_exclude misses it called on a subclass
        self.register_load_state_dict_pre_hook(self._old_keys)  # type: ignore[no-untyped-call]

    @staticmethod
    def _old_keys(module: nn.Module, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """attnmem 0.2's HopfieldLayer kept `query_proj`, `patterns`, `values` on itself."""
        _renamed_keys(state_dict, prefix, {"query_proj.weight": "hopfield.query_proj.weight",
                                           "patterns": "lookup_weights", "values": "target_weights"})

    def forward(self, input: Tensor, stored_pattern_padding_mask: Tensor | None = None,
                association_mask: Tensor | None = None, *,
                return_association: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Look up the learned stored patterns: the read-out, and the association ξ with `return_association`.

        Args:
            input: the state patterns.
            stored_pattern_padding_mask: True on a learned stored pattern to leave out.
            association_mask: True where a state pattern may not associate with a stored one (hflayers' meaning).
            return_association: also return ξ.

        Shapes:
            - input: (B, L, input_size); (L, B, input_size) without `batch_first`
            - stored_pattern_padding_mask: (B, quantity), bool
            - association_mask: (L, quantity) or (B · num_heads, L, quantity), bool
            - output: (B, L, output_size); ξ: (B, num_heads, L, quantity)

        Returns:
            `output`, or `(output, ξ)` with `return_association`.
        """
        input = _batched(input, "HopfieldLayer", self.hopfield.batch_first)
        batch = input.shape[0 if self.hopfield.batch_first else 1]
        stored = self.lookup_weights.expand(batch, -1, -1)  # (B, K, D)
        targets = stored if self.target_weights is None else self.target_weights.expand(batch, -1, -1)
        if not self.hopfield.batch_first:
            stored, targets = stored.transpose(0, 1), targets.transpose(0, 1)
        out: Tensor | tuple[Tensor, Tensor] = self.hopfield((stored, input, targets), stored_pattern_padding_mask,
                                                            association_mask, return_association=return_association)
        return out
