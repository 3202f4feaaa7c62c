"""`Hopfield`: the general modern Hopfield layer of Ramsauer et al. 2020, with the arguments of `hflayers.Hopfield`.

State patterns R (the queries) retrieve from stored patterns Y (the keys) and read the pattern projection
(the values): ξ = softmax(β score(R W_Q, Y W_K)), output = (ξ · P W_V) W_O, after ξ is updated in the key space
up to `update_steps_max` times (eq. 3). Scoring goes through `attend`; the association update is in
`hopfield_update.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from attnmem.attention.scores import Dot, ScaledDot, score_factory
from attnmem.blocks.hopfield_projection import project
from attnmem.blocks.hopfield_update import association_keep, update
from attnmem.blocks.tempered import Tempered

__all__ = ["Hopfield"]

Patterns = Tensor | tuple[Tensor, Tensor, Tensor]


def _norm(on: bool, affine: bool, eps: float, width: int, name: str) -> nn.LayerNorm | None:
    if affine and not on:
        raise ValueError(f"Hopfield: normalize_{name}_affine=True needs normalize_{name}=True")
    return nn.LayerNorm(width, eps=eps, elementwise_affine=affine) if on else None


def _linear(static: bool, width: int, out: int, bias: bool) -> nn.Linear | None:
    return None if static else nn.Linear(width, out, bias=bias)


class Hopfield(nn.Module):
    """Modern Hopfield layer, Ramsauer et al. 2020 ("Hopfield Networks is All You Need", §3, eq. 3 and 10).

    A drop-in for `hflayers.Hopfield` (ml-jku/hopfield-layers) with its argument names and meanings; the
    scores are attnmem's (`score=`, β·qᵀk by default). `docs/hopfield.md` maps every argument.

    Args:
        input_size: width of the state patterns (and of the stored patterns and the projection by default).
        hidden_size: width of one head's association space; default `input_size // num_heads`.
        output_size: width of the output projection; default `input_size`.
        pattern_size: width of one head's projected patterns (the values); default `hidden_size`.
        num_heads: parallel association heads.
        scaling: β; a float, or one per head (a sequence or tensor of `num_heads`); default 1/√hidden_size.
        update_steps_max: updates of ξ after the first retrieval (0: one retrieval; None: until converged).
        update_steps_eps: a head stops once ‖ξ_t − ξ_{t−1}‖ (its largest over the batch) is ≤ this.
        normalize_stored_pattern: LayerNorm of the stored patterns.
        normalize_stored_pattern_affine: that LayerNorm with a learned gain and bias.
        normalize_stored_pattern_eps: that LayerNorm's eps.
        normalize_state_pattern: LayerNorm of the state patterns.
        normalize_state_pattern_affine: that LayerNorm with a learned gain and bias.
        normalize_state_pattern_eps: that LayerNorm's eps.
        normalize_pattern_projection: LayerNorm of the pattern projection.
        normalize_pattern_projection_affine: that LayerNorm with a learned gain and bias.
        normalize_pattern_projection_eps: that LayerNorm's eps.
        normalize_hopfield_space: LayerNorm of the projected queries and keys of each head.
        normalize_hopfield_space_affine: that LayerNorm with a learned gain and bias.
        normalize_hopfield_space_eps: that LayerNorm's eps.
        stored_pattern_as_static: use the stored patterns as they are (width `hidden_size`), without a learned
            projection.
        state_pattern_as_static: the same for the state patterns.
        pattern_projection_as_static: the same for the pattern projection (width `pattern_size`).
        pattern_projection_as_connected: project the pattern projection with the stored patterns' W_K first.
        stored_pattern_size: width of the stored patterns; default `input_size`.
        pattern_projection_size: width of the pattern projection; default `input_size`.
        batch_first: inputs and outputs are (B, T, D); else (T, B, D).
        association_activation: a torch function name (e.g. "tanh") applied to the output.
        dropout: dropout on ξ before it reads the projection.
        input_bias: biases on the input and output projections.
        add_zero_association: append a zero stored pattern and a zero projection (attendable "nothing").
        disable_out_projection: return the heads' read-outs concatenated, (…, num_heads · pattern_size).
        score: the similarity: a name ("dot", "cosine", …), a score class or a factory `score(query_dim=, key_dim=)`.
        concat_bias_pattern: refused: `hflayers` creates its bias patterns but never uses them.

    Shapes:
        - scaling: (H,) when a tensor, one β per head
    """

    def __init__(self, input_size: int | None = None, *, hidden_size: int | None = None,
                 output_size: int | None = None, pattern_size: int | None = None, num_heads: int = 1,
                 scaling: float | Tensor | list[float] | None = None, update_steps_max: int | None = 0,
                 update_steps_eps: float = 1e-4, normalize_stored_pattern: bool = True,
                 normalize_stored_pattern_affine: bool = True, normalize_stored_pattern_eps: float = 1e-5,
                 normalize_state_pattern: bool = True, normalize_state_pattern_affine: bool = True,
                 normalize_state_pattern_eps: float = 1e-5, normalize_pattern_projection: bool = True,
                 normalize_pattern_projection_affine: bool = True, normalize_pattern_projection_eps: float = 1e-5,
                 normalize_hopfield_space: bool = False, normalize_hopfield_space_affine: bool = False,
                 normalize_hopfield_space_eps: float = 1e-5, stored_pattern_as_static: bool = False,
                 state_pattern_as_static: bool = False, pattern_projection_as_static: bool = False,
                 pattern_projection_as_connected: bool = False, stored_pattern_size: int | None = None,
                 pattern_projection_size: int | None = None, batch_first: bool = True,
                 association_activation: str | None = None, dropout: float = 0.0, input_bias: bool = True,
                 add_zero_association: bool = False, disable_out_projection: bool = False,
                 score: str | Callable[..., nn.Module] = "dot", concat_bias_pattern: bool = False) -> None:
        super().__init__()
        input_size = self._check_options(input_size, num_heads, hidden_size, update_steps_max, update_steps_eps,
                                         dropout, concat_bias_pattern, pattern_projection_as_connected,
                                         stored_pattern_as_static, pattern_projection_as_static)
        self.num_heads, self.batch_first = num_heads, batch_first
        self.hidden_size = hidden_size or input_size // num_heads
        self.pattern_size = pattern_size or self.hidden_size
        self.input_size, self.output_size = input_size, output_size or input_size
        self.stored_pattern_size = stored_pattern_size or input_size
        self.pattern_projection_size = pattern_projection_size or input_size
        self.update_steps_max, self.update_steps_eps = update_steps_max, update_steps_eps
        self.add_zero_association, self.connected = add_zero_association, pattern_projection_as_connected
        self.static = (stored_pattern_as_static, state_pattern_as_static, pattern_projection_as_static)
        widths = self._input_widths()
        self.norm_stored_pattern = _norm(normalize_stored_pattern, normalize_stored_pattern_affine,
                                         normalize_stored_pattern_eps, widths[0], "stored_pattern")
        self.norm_state_pattern = _norm(normalize_state_pattern, normalize_state_pattern_affine,
                                        normalize_state_pattern_eps, widths[1], "state_pattern")
        self.norm_pattern_projection = _norm(normalize_pattern_projection, normalize_pattern_projection_affine,
                                             normalize_pattern_projection_eps, widths[2], "pattern_projection")
        self.norm_hopfield_space = _norm(normalize_hopfield_space, normalize_hopfield_space_affine,
                                         normalize_hopfield_space_eps, self.hidden_size, "hopfield_space")
        self._build_projections(input_bias, disable_out_projection)
        self.association_activation = self._activation(association_activation)
        self.dropout = nn.Dropout(dropout)
        self.score = Tempered(score_factory(score, owner="Hopfield")(query_dim=self.hidden_size,
                                                                     key_dim=self.hidden_size),
                              self._scaling(scaling))
        # β·qᵀk with the default β = 1/√hidden_size is ScaledDot, which `attend` hands to SDPA
        beta = self.score.beta
        default = isinstance(beta, float) and beta == 1.0 / math.sqrt(self.hidden_size)
        default = default and type(self.score.score) is Dot
        self._fused_score = ScaledDot(self.hidden_size, self.hidden_size) if default else None
        self.reset_parameters()

    @staticmethod
    def _check_options(input_size: int | None, num_heads: int, hidden_size: int | None,
                       steps: int | None, eps: float, dropout: float, concat_bias: bool, connected: bool,
                       stored_static: bool, projection_static: bool) -> int:
        """`input_size`, once it and the other options are checked: one line for each bad value or pair."""
        if input_size is None or input_size < 1:
            raise ValueError(f"Hopfield: input_size must be an int >= 1, got {input_size}")
        if num_heads < 1 or (hidden_size is None and input_size % num_heads):
            raise ValueError(f"Hopfield: num_heads={num_heads} must be >= 1 and divide input_size={input_size} "
                             "(or give hidden_size, the width of one head)")
        if hidden_size is not None and hidden_size < 1:
            raise ValueError(f"Hopfield: hidden_size must be >= 1, got {hidden_size}")
        if (steps is not None and steps < 0) or eps < 0 or not 0.0 <= dropout < 1.0:
            raise ValueError(f"Hopfield: update_steps_max must be >= 0 or None (got {steps}), update_steps_eps "
                             f">= 0 (got {eps}), dropout in [0, 1) (got {dropout})")
        if concat_bias:
            raise ValueError("Hopfield: concat_bias_pattern is not supported (hflayers creates its bias patterns "
                             "but never uses them); use add_zero_association=True for an attendable null pattern")
        if connected and stored_static:
            raise ValueError("Hopfield: pattern_projection_as_connected needs the stored patterns' projection "
                             "(stored_pattern_as_static=False)")
        if connected and projection_static:
            raise ValueError("Hopfield: pattern_projection_as_connected projects the pattern projection, which "
                             "pattern_projection_as_static=True leaves unprojected: set one of them to False")
        return input_size

    def _input_widths(self) -> tuple[int, int, int]:
        """The widths of stored, state and projection as given: a static one is already in its head space."""
        stored = self.hidden_size if self.static[0] else self.stored_pattern_size
        state = self.hidden_size if self.static[1] else self.input_size
        projection = self.pattern_size if self.static[2] else self.pattern_projection_size
        return stored, state, projection

    def _build_projections(self, bias: bool, no_out: bool) -> None:
        heads, hidden, pattern = self.num_heads, self.num_heads * self.hidden_size, self.num_heads * self.pattern_size
        self.query_proj = _linear(self.static[1], self.input_size, hidden, bias)  # W_Q
        self.key_proj = _linear(self.static[0], self.stored_pattern_size, hidden, bias)  # W_K
        value_in = hidden if self.connected else self.pattern_projection_size
        self.value_proj = _linear(self.static[2], value_in, pattern, bias)  # W_V
        read_width = pattern if self.value_proj is not None else self.pattern_size * heads
        self.out_proj = None if no_out else nn.Linear(read_width, self.output_size, bias=bias)  # W_O
        if no_out:
            self.output_size = read_width

    def _scaling(self, scaling: float | Tensor | list[float] | None) -> float | Tensor:
        if scaling is None:
            return 1.0 / math.sqrt(self.hidden_size)
        if isinstance(scaling, (int, float)):
            return float(scaling)
        per_head = torch.as_tensor(scaling, dtype=torch.float32).flatten()
        if per_head.numel() != self.num_heads:
            raise ValueError(f"Hopfield: scaling has {per_head.numel()} entries, expected one per head "
                             f"(num_heads={self.num_heads}) or a float")
        return per_head.view(self.num_heads, 1, 1)  # broadcast over (B, H, L, ·)

    @staticmethod
    def _activation(name: str | None) -> Callable[[Tensor], Tensor] | None:
        if name is None:
            return None
        fn = getattr(torch, name, None)
        if not callable(fn):
            raise ValueError(f"Hopfield: association_activation={name!r} is not a torch function (e.g. 'tanh')")
        return cast(Callable[[Tensor], Tensor], fn)

    def reset_parameters(self) -> None:
        """hflayers' initialisation: projections N(0, 0.02²), biases 0, LayerNorms at identity."""
        for proj in (self.query_proj, self.key_proj, self.value_proj, self.out_proj):
            if proj is not None:
                nn.init.normal_(proj.weight, mean=0.0, std=0.02)
                if proj.bias is not None:
                    nn.init.zeros_(proj.bias)
        for norm in (self.norm_stored_pattern, self.norm_state_pattern, self.norm_pattern_projection,
                     self.norm_hopfield_space):
            if norm is not None:
                norm.reset_parameters()

    @property
    def scaling(self) -> float | Tensor:
        """β: a float, or one per head (H,)."""
        beta = self.score.beta
        return beta.flatten().clone() if isinstance(beta, Tensor) else beta

    def forward(self, input: Patterns, stored_pattern_padding_mask: Tensor | None = None,
                association_mask: Tensor | None = None, *,
                return_association: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Retrieve from the stored patterns: the output, and the association ξ with `return_association`.

        Args:
            input: one tensor as stored patterns, state patterns and pattern projection, or the tuple
                `(stored, state, projection)`.
            stored_pattern_padding_mask: True on a stored pattern that is padding, never retrieved.
            association_mask: True where a state pattern may not associate with a stored one (hflayers' meaning).
            return_association: also return ξ.

        Shapes:
            - input: (B, T, input_size), or the tuple (stored (B, S, stored_pattern_size), state (B, L, input_size),
              projection (B, S, pattern_projection_size)); (T, B, ·) each without `batch_first`
            - stored_pattern_padding_mask: (B, S), bool
            - association_mask: (L, S) or (B · num_heads, L, S), bool
            - output: (B, L, output_size); ξ: (B, num_heads, L, S)

        Returns:
            `output`, or `(output, ξ)` with `return_association`.
        """
        stored, state, projection = self._unpack(input)
        query, keys, values = self._project(stored, state, projection)  # (B,H,L,hd) (B,H,S,hd) (B,H,S,pd)
        keep = association_keep(query.shape, keys.shape[-2], stored_pattern_padding_mask, association_mask,
                                zero_association=self.add_zero_association)
        if self.add_zero_association:
            keys, values = _zero_pad(keys), _zero_pad(values)
        read, xi = update(query, keys, values, self.score, keep, steps_max=self.update_steps_max,
                          eps=self.update_steps_eps, dropout=self.dropout, need_weights=return_association,
                          fused=self._fused_score)
        batch, _, length, _ = read.shape
        output = read.transpose(1, 2).reshape(batch, length, -1)  # (B, L, H·pd) heads side by side
        if self.out_proj is not None:
            output = self.out_proj(output)
        if self.association_activation is not None:
            output = self.association_activation(output)
        output = output if self.batch_first else output.transpose(0, 1)
        if not return_association:
            return output
        assert xi is not None  # update returns ξ with need_weights=return_association
        return output, xi

    def _unpack(self, input: Patterns) -> tuple[Tensor, Tensor, Tensor]:
        if isinstance(input, Tensor):
            stored = state = projection = input
        elif isinstance(input, (tuple, list)) and len(input) == 3:
            stored, state, projection = input
        else:
            raise TypeError("Hopfield: input must be one tensor (stored = state = projection) or a tuple "
                            "(stored, state, projection)")
        for name, x in (("stored", stored), ("state", state), ("projection", projection)):
            if not isinstance(x, Tensor) or x.dim() != 3:
                shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"Hopfield: {name} patterns of shape {shape}, expected 3-D "
                                 f"({'batch, length' if self.batch_first else 'length, batch'}, width); "
                                 "add a batch dimension to unbatched patterns (x.unsqueeze(0))")
        if not self.batch_first:
            stored, state, projection = stored.transpose(0, 1), state.transpose(0, 1), projection.transpose(0, 1)
        return stored, state, projection

    def _project(self, stored: Tensor, state: Tensor, projection: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        value_part = (self.norm_pattern_projection, None if self.connected else self.value_proj)
        keys, query, values = project([stored, state, projection], [
            (self.norm_stored_pattern, self.key_proj), (self.norm_state_pattern, self.query_proj), value_part])
        if self.connected:
            # _check_options refuses connected with static stored patterns or a static pattern projection
            assert self.key_proj is not None and self.value_proj is not None
            values = self.value_proj(self.key_proj(values))  # (B, S, H·pd) W_V reads W_K's projection
        keys = _heads(keys, self.num_heads, self.static[0])  # (B, H, S, hd)
        query = _heads(query, self.num_heads, self.static[1])  # (B, H, L, hd)
        shared = self.static[2] and not self.connected  # W_K's projection is already per head
        values = _heads(values, self.num_heads, shared)  # (B, H, S, pd)
        if self.norm_hopfield_space is not None:
            query, keys = self.norm_hopfield_space(query), self.norm_hopfield_space(keys)
        return query, keys, values


def _heads(x: Tensor, heads: int, static: bool) -> Tensor:
    """(B, T, H·d) → (B, H, T, d); a static input (B, T, d) is shared by every head: (B, 1, T, d) expanded."""
    batch, length, width = x.shape
    if static:
        return x.unsqueeze(1).expand(batch, heads, length, width)
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def _zero_pad(x: Tensor) -> Tensor:
    """Append one zero pattern: (B, H, S, d) → (B, H, S + 1, d)."""
    return torch.cat([x, x.new_zeros(*x.shape[:-2], 1, x.shape[-1])], dim=-2)
