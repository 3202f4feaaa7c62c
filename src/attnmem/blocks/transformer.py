"""The Transformer's layers (Vaswani et al. 2017): positions, residual sub-layers, the encoder stack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import Tensor, nn

from attnmem.attention import MultiHead

__all__ = [
    "Encoder",
    "EncoderLayer",
    "Positions",
    "Residual",
    "causal_mask",
    "check_options",
    "encoder_stack",
    "feed_forward",
    "sinusoidal_table",
]

POSITIONS = ("sinusoidal", "learned")


def sinusoidal_table(max_len: int, dim: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (§3.5); (max_len, dim)."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    angles = pos / 10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (L, ceil(d/2))
    table = torch.zeros(max_len, dim, dtype=torch.float64)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()[:, : dim // 2]
    return table.float()


def check_options(
    name: str, *, d_model: int, heads: int, d_ff: int, layers: int, dropout: float, positions: str, max_len: int
) -> None:
    """ValueError naming the option when a Transformer's sizes or options do not fit."""
    sizes = {"d_model": d_model, "heads": heads, "d_ff": d_ff, "layers": layers, "max_len": max_len}
    for option, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name}: {option} must be >= 1, got {value} (model.{option} in a run)")
    if d_model % heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0 and h <= 16]
        raise ValueError(
            f"{name}: heads={heads} must divide d_model={d_model}; use heads in {divisors} or a d_model that is a "
            f"multiple of {heads} (model.heads, model.d_model in a run)"
        )
    if not 0 <= dropout < 1:
        raise ValueError(f"{name}: dropout must be in [0, 1), got {dropout} (model.dropout in a run)")
    if positions not in POSITIONS:
        raise ValueError(f"{name}: positions must be one of {POSITIONS}, got {positions!r} (model.positions in a run)")


class Positions(nn.Module):
    """Adds a position vector to each step of `x (B, T, D)`, then dropout (§3.5, §5.4).

    `sinusoidal` is the fixed table of §3.5; `learned` a trained one (Gehring et al. 2017). Either way
    `max_len` is the model's positional capacity: a longer sequence is a ValueError, never a silent wrap.
    """

    table: Tensor  # (max_len, D): a buffer (sinusoidal) or a parameter (learned)

    def __init__(self, dim: int, max_len: int, kind: str, dropout: float) -> None:
        super().__init__()
        self.max_len = max_len
        if kind == "sinusoidal":
            self.register_buffer("table", sinusoidal_table(max_len, dim), persistent=False)
        else:
            self.table = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """`x (B, T, D)` at positions start .. start + T - 1."""
        end = start + x.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"a sequence of {end} positions is longer than max_len={self.max_len}, the model's positional "
                "capacity: build it with a larger max_len (model.max_len in a run)"
            )
        return cast(Tensor, self.dropout(x + self.table[start:end]))  # (B, T, D)


class Residual(nn.Module):
    """A residual connection around a sub-layer: LayerNorm(x + Sublayer(x)) (post-LN, §3.1) or x + Sublayer(LN(x)).

    Dropout is applied to the sub-layer's output before the sum (§5.4, residual dropout).
    """

    def __init__(self, dim: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm, self.dropout, self.norm_first = nn.LayerNorm(dim), nn.Dropout(dropout), norm_first

    def inner(self, x: Tensor) -> Tensor:
        """The sub-layer's input."""
        return self.norm(x) if self.norm_first else x

    def outer(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """The layer's output, from its input and the sub-layer's output."""
        x = x + self.dropout(sublayer_out)
        return x if self.norm_first else self.norm(x)


def feed_forward(d_model: int, d_ff: int, dropout: float) -> nn.Sequential:
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3, eq. 2), with dropout on the hidden layer."""
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the feed-forward net, each in a residual connection (§3.1)."""

    def __init__(
        self, *, d_model: int, heads: int, d_ff: int, score: Callable[..., nn.Module], dropout: float, norm_first: bool
    ) -> None:
        super().__init__()
        self.self_attn = MultiHead(d_model, heads, score)
        self.feed_forward = feed_forward(d_model, d_ff, dropout)
        self.attn_residual, self.ff_residual = (Residual(d_model, dropout, norm_first) for _ in range(2))

    def forward(self, x: Tensor, *, mask: Tensor | None, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """`x (B, T, D)` -> (B, T, D) and the self-attention weights (B, H, T, T) when wanted."""
        h = self.attn_residual.inner(x)
        attended, weights = self.self_attn(h, h, h, attn_mask=mask, need_weights=need_weights)
        x = self.attn_residual.outer(x, attended)
        return self.ff_residual.outer(x, self.feed_forward(self.ff_residual.inner(x))), weights


class Encoder(nn.Module):
    """A stack of encoder layers; pre-LN stacks end in a LayerNorm (post-LN layers end normalised already)."""

    def __init__(self, *, layers: int, norm_first: bool, **layer_options: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(norm_first=norm_first, **layer_options) for _ in range(layers))
        self.norm = nn.LayerNorm(layer_options["d_model"]) if norm_first else nn.Identity()

    def forward(self, x: Tensor, *, mask: Tensor | None, need_weights: bool) -> tuple[Tensor, list[Tensor]]:
        """`x (B, T, D)` -> (B, T, D) and each layer's self-attention weights (B, H, T, T) when wanted."""
        all_weights = []
        for layer in self.layers:
            x, weights = layer(x, mask=mask, need_weights=need_weights)
            all_weights += [weights] if weights is not None else []
        return self.norm(x), all_weights


def causal_mask(steps: int, device: torch.device) -> Tensor:
    """True where step t may attend step s <= t: (1, T, T)."""
    return torch.ones(steps, steps, dtype=torch.bool, device=device).tril().unsqueeze(0)


def encoder_stack(
    owner: str,
    *,
    score: Callable[..., nn.Module],
    d_model: int,
    heads: int,
    layers: int,
    d_ff: int,
    dropout: float,
    positions: str,
    max_len: int,
    norm_first: bool,
) -> tuple[Positions, Encoder]:
    """The positions and the encoder stack of an encoder-only Transformer, its options checked first."""
    check_options(
        owner,
        d_model=d_model,
        heads=heads,
        d_ff=d_ff,
        layers=layers,
        dropout=dropout,
        positions=positions,
        max_len=max_len,
    )
    table = Positions(d_model, max_len, positions, dropout)  # before the layers: the same draws as always
    encoder = Encoder(
        layers=layers, norm_first=norm_first, d_model=d_model, heads=heads, d_ff=d_ff, score=score, dropout=dropout
    )
    return table, encoder
