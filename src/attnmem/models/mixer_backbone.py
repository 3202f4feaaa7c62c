"""The backbone every model over a sequence mixer shares: the mixers by name, causal attention as one, the stack.

    inputs → (positions) → layers × [x + mixer(norm(x)), then, with `mlp`, x + MLP(norm(x))] → final norm → head

`MixerLM` (the recall family: token ids in, next-token logits out) and `MixerSequence` (the sequence family: bit
vectors in, bits out) differ only in their input layer and their head's width; the layer stack is this one.
It is a part of those two models, not a model of its own (no model yaml names it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, cast

from torch import Tensor, nn

from attnmem.attention import MultiHead
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.short_conv import ShortConv
from attnmem.blocks.transformer import Positions, causal_mask, feed_forward
from attnmem.models.contract import StateSized

__all__ = ["MIXERS", "POSITIONS", "CausalAttention", "MixerBackbone", "mixer_factory"]

# a mixer's name -> "module:Class" and the options it is built with; imported only when used, so a name
# whose module is not there yet fails when chosen, never on import
MIXERS: dict[str, tuple[str, dict[str, Any]]] = {
    "attention": ("attnmem.models.mixer_backbone:CausalAttention", {}),
    "selective_ssm": ("attnmem.blocks.selective_ssm:SelectiveSSM", {"selective": True}),
    "lti_ssm": ("attnmem.blocks.selective_ssm:SelectiveSSM", {"selective": False}),
    "base_conv": ("attnmem.blocks.base_conv:BaseConv", {}),
    "sliding_window": ("attnmem.blocks.sliding_window:SlidingWindow", {}),
    "linear_attention": ("attnmem.blocks.linear_attention:LinearAttention", {}),
    "delta_rule": ("attnmem.blocks.delta_rule:DeltaRule", {}),
    "hopfield": ("attnmem.blocks.hopfield_mixer:HopfieldMixer", {}),
    "lstm": ("attnmem.models.recurrent_mixers:LSTMMixer", {}),
    "ntm": ("attnmem.models.recurrent_mixers:NTMMixer", {}),
    "dnc": ("attnmem.models.recurrent_mixers:DNCMixer", {}),
}
# the model's own options a mixer is built with besides its mixer_options: attention's score, and the length (the
# data's seq_len, else max_len) at which the state_size of those that keep every key and value is counted
SHARED: dict[str, tuple[str, ...]] = {"attention": ("score", "max_len"), "hopfield": ("max_len",)}
POSITIONS = ("learned", "sinusoidal", "none")


class CausalAttention(nn.Module):
    """Causal multi-head softmax attention (Vaswani et al. 2017, §3.2.2) as a mixer: step t attends steps <= t.

    state_size = 2 · max_len · d_model: the keys and values of the longest sequence (the KV cache grows with T).

    Args:
        d_model: the width D of the input and output.
        heads: the number of heads; must divide d_model.
        score: each head's score (a name, a score class, or a factory `score(query_dim=..., key_dim=...)`).
        max_len: the longest sequence, for `state_size`.
    """

    def __init__(
        self, d_model: int, *, heads: int = 1, score: str | Callable[..., nn.Module] = "scaled_dot", max_len: int = 512
    ) -> None:
        super().__init__()
        self.attention = MultiHead(d_model, heads, score)
        self.state_size = 2 * max_len * d_model

    def forward(self, x: Tensor) -> Tensor:
        """Self-attention under the causal mask.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        y, _ = self.attention(x, x, x, attn_mask=causal_mask(x.shape[1], x.device), need_weights=False)
        return cast(Tensor, y)  # (B, T, D)


def mixer_factory(
    mixer: str | Callable[[int], nn.Module],
    options: Mapping[str, Any],
    score: str | Callable[..., nn.Module],
    max_len: int,
    owner: str = "MixerLM",
) -> Callable[[int], nn.Module]:
    """`mixer` as a factory of one layer from d_model: a name of `MIXERS` (with `options`) or a factory as it is;
    `owner` (the model's class) starts the error messages."""
    if not isinstance(mixer, str):
        return mixer
    if mixer not in MIXERS:
        raise ValueError(
            f"{owner}: mixer must be one of {sorted(MIXERS)} or a factory of d_model, got {mixer!r} "
            "(model.mixer in a run)"
        )
    path, fixed = MIXERS[mixer]
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    extra = {k: v for k, v in {"score": score, "max_len": max_len}.items() if k in SHARED.get(mixer, ())}
    kwargs = {**fixed, **extra, **dict(options)}

    def build(d_model: int) -> nn.Module:
        try:
            return cast(nn.Module, cls(d_model, **kwargs))
        except TypeError as err:  # an option the mixer does not take
            raise ValueError(
                f"{owner}: mixer {mixer!r} ({path}) does not take the options {dict(options)}: {err} "
                "(model.mixer_options in a run)"
            ) from None

    return build


def check_holds_a_pair(layer: nn.Module, mixer: object, d_model: int, owner: str) -> None:
    """ValueError when a mixer's recurrent state holds fewer numbers than one key and one value of width d_model."""
    if isinstance(layer, StateSized) and layer.state_size < 2 * d_model:
        name = mixer if isinstance(mixer, str) else type(layer).__name__
        raise ValueError(
            f"{owner}: mixer {name!r} holds a state of {layer.state_size} numbers, which cannot hold a single "
            f"key-value pair (a key and a value of width d_model={d_model}): its state_size must be >= {2 * d_model}; "
            "raise its state option in model.mixer_options (d_state of the SSMs, window, l_max, hidden_size, ...)"
        )


def check_options(owner: str, positions: str, short_conv: int, dropout: float) -> None:
    """ValueError, one line naming the option, for positions, short_conv or dropout out of range."""
    if positions not in POSITIONS:
        raise ValueError(f"{owner}: positions must be one of {POSITIONS}, got {positions!r} (model.positions in a run)")
    if short_conv < 0:
        raise ValueError(f"{owner}: short_conv must be >= 0 (0: none), got {short_conv} (model.short_conv in a run)")
    if not 0 <= dropout < 1:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {dropout} (model.dropout in a run)")


class MixerBackbone(nn.Module, StateSized):
    """An input layer, a stack of residual mixer layers and a linear head: what `MixerLM` and `MixerSequence` are.

    state_size = the sum of the mixers' `state_size` and what the short convolutions keep.

    Args:
        inputs: builds the input layer from d_model (a token table, a linear map of vectors); called before any
            other layer is built, so a model's parameters are drawn in the order input, positions, mixers, head.
        output_size: the head's width (the vocabulary, the output bits).
        mixer: a name of `MIXERS` or a factory building one layer from d_model.
        mixer_options: the mixer's keyword options (`d_state`, `l_max`, `heads`, `window`, ...).
        score: attention's score (the `attention` group in a run); other mixers ignore it.
        d_model: the width D.
        layers: the number of mixer layers.
        positions: `learned` (a trained table of max_len rows), `sinusoidal` (Vaswani et al.'s fixed one) or `none`
            (the mixer orders steps itself).
        max_len: the longest sequence (with positions a longer one is a ValueError).
        seq_len: the length at which the state of a mixer that keeps every key and value is counted; None: max_len.
        mlp: a feed-forward sub-block after every mixer.
        d_ff: the MLP's hidden width; None: 4 · d_model.
        dropout: dropout on the inputs and every sub-block's output.
        short_conv: k > 0: a causal depthwise convolution of k taps on each mixer's input; 0: none.
    """

    def __init__(
        self,
        inputs: Callable[[int], nn.Module],
        output_size: int,
        *,
        mixer: str | Callable[[int], nn.Module],
        mixer_options: Mapping[str, Any] | None,
        score: str | Callable[..., nn.Module],
        d_model: int,
        layers: int,
        positions: str,
        max_len: int,
        seq_len: int | None,
        mlp: bool,
        d_ff: int | None,
        dropout: float,
        short_conv: int,
    ) -> None:
        super().__init__()
        owner, d_ff = type(self).__name__, 4 * d_model if d_ff is None else d_ff
        check_sizes(owner, {"d_model": d_model, "layers": layers, "max_len": max_len, "d_ff": d_ff}, prefix="model.")
        check_options(owner, positions, short_conv, dropout)
        build = mixer_factory(mixer, mixer_options or {}, score, seq_len or max_len, owner)
        self.embed = inputs(d_model)
        self.positions = Positions(d_model, max_len, positions, dropout) if positions != "none" else None
        self.dropout = nn.Dropout(dropout)
        self.mixers = nn.ModuleList(build(d_model) for _ in range(layers))
        check_holds_a_pair(self.mixers[0], mixer, d_model, owner)
        self.mixer_norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.convs = nn.ModuleList(ShortConv(d_model, short_conv) for _ in range(layers)) if short_conv else None
        self.mlps = nn.ModuleList(feed_forward(d_model, d_ff, dropout) for _ in range(layers)) if mlp else None
        self.mlp_norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers)) if mlp else None
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, output_size)

    @property
    def state_size(self) -> int:
        """The numbers of recurrent state one sequence holds at inference: the sum over the layers."""
        convs = list(self.convs) if self.convs is not None else []  # each keeps its last k - 1 inputs
        return sum(m.state_size for m in [*convs, *self.mixers] if isinstance(m, StateSized))

    def mix(self, x: Tensor, where: Tensor | None = None) -> Tensor:
        """The stack and the head over the embedded inputs.

        Args:
            x: the input layer's output.
            where: the positions to compute the head at (True); None: every position.

        Shapes:
            - x: (B, T, D)
            - where: (B, T), K of them True
            - y: (B, T, output_size); with `where`, (K, output_size) in row-major order

        Returns:
            The head's output, step t a function of x_{<=t}.
        """
        x = self.positions(x) if self.positions is not None else self.dropout(x)
        for i, mixer in enumerate(self.mixers):
            h = self.mixer_norms[i](x)  # (B, T, D)
            if self.convs is not None:  # the short convolution
                h = self.convs[i](h)  # (B, T, D)
            x = x + self.dropout(mixer(h))  # (B, T, D)
            if self.mlps is not None and self.mlp_norms is not None:
                x = x + self.dropout(self.mlps[i](self.mlp_norms[i](x)))
        x = x if where is None else x[where]  # (B, T, D), or (K, D): the final norm and the head are per position
        return cast(Tensor, self.head(self.norm(x)))  # (B, T, output_size) or (K, output_size)
