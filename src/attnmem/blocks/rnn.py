"""Recurrent building blocks: a stacked RNN/LSTM/GRU, its options, the encoder over padded token ids, states."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmem.blocks.checks import check_sizes
from attnmem.core.float32 import recurrent

__all__ = ["CELLS", "Encoder", "RNNOptions", "check_rnn_options", "compact", "layer_state", "stacked", "step_state"]

CELLS: dict[str, Callable[..., nn.RNNBase]] = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNNOptions(TypedDict):
    """The options an `Encoder` and `check_rnn_options` share, passed on as keywords by the recurrent models."""

    cell: str
    embed_dim: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    dropout: float


def check_rnn_options(
    owner: str,
    *,
    cell: str,
    hidden_size: int,
    num_layers: int,
    dropout: float,
    embed_dim: int | None = None,
    bidirectional: bool = False,
) -> None:
    """ValueError naming the first option of a recurrent encoder/decoder that does not fit."""
    if cell not in CELLS:
        raise ValueError(f"{owner}: cell must be one of {tuple(CELLS)}, got {cell!r}")
    sizes = {"hidden_size": hidden_size, "num_layers": num_layers}
    check_sizes(owner, sizes | ({} if embed_dim is None else {"embed_dim": embed_dim}))
    if not 0 <= dropout < 1:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {dropout}")
    if bidirectional and hidden_size % 2:
        raise ValueError(
            f"{owner}: bidirectional splits hidden_size between two directions: it must be even, got {hidden_size}"
        )


def stacked(
    cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float, bidirectional: bool = False
) -> nn.RNNBase:
    """A batch-first stack of `num_layers` `cell` layers; `dropout` between layers (none with one layer)."""
    return CELLS[cell](
        input_size,
        hidden_size,
        num_layers,
        batch_first=True,
        bidirectional=bidirectional,
        dropout=dropout if num_layers > 1 else 0.0,
    )


def step_state(final: Tensor | tuple[Tensor, ...]) -> dict[str, Tensor]:
    """A recurrent layer's final state `(L, B, H)` (a tuple for LSTM) as a decoding state, batch first."""
    parts = final if isinstance(final, tuple) else (final,)
    return {name: part.transpose(0, 1) for name, part in zip(("h", "c"), parts)}  # (B, L, H) each


def layer_state(state: dict[str, Tensor]) -> Tensor | tuple[Tensor, ...]:
    """The recurrent layer's state `(L, B, H)` from a decoding state (the inverse of `step_state`)."""
    parts = tuple(state[name].transpose(0, 1).contiguous() for name in ("h", "c") if name in state)
    return parts if len(parts) == 2 else parts[0]


def compact(ids: Tensor, pad_id: int) -> Tensor:
    """Move every row's non-pad ids to the front, keeping their order: `(B, L)` -> `(B, L')` cut to the longest."""
    order = (ids == pad_id).long().argsort(dim=1, stable=True)
    ids = ids.gather(1, order)
    return ids[:, : max(1, int((ids != pad_id).sum(1).max()))]


class Encoder(nn.Module):
    """Embeds right-padded `src (B, Ls)` and reads it with a stacked, optionally bidirectional RNN/LSTM/GRU.

    Each direction has `hidden_size // 2` units when bidirectional, so states and the final state are
    `hidden_size` wide either way (the final forward and backward states are concatenated per layer,
    as OpenNMT's bidirectional encoder does) and can start a decoder of `hidden_size` directly.
    Sequences are packed, so padding changes neither direction's states.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        pad_id: int,
        cell: str,
        embed_dim: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        self.pad_id, self.directions = pad_id, 2 if bidirectional else 1
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.rnn = stacked(cell, embed_dim, hidden_size // self.directions, num_layers, dropout, bidirectional)

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor | tuple[Tensor, ...], Tensor]:
        """`(states (B, Ls, H), final state (L, B, H) (a tuple for LSTM), mask (B, Ls) True on tokens)`."""
        mask = src != self.pad_id
        packed = pack_padded_sequence(self.embed(src.long()), mask.sum(1).cpu(), batch_first=True, enforce_sorted=False)
        out, final = recurrent(self.rnn, packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, Ls, H)
        if isinstance(final, tuple):
            return states, tuple(self._join(f) for f in final), mask
        return states, self._join(final), mask

    def _join(self, final: Tensor) -> Tensor:
        layers_dirs, batch, width = final.shape  # (L * dirs, B, H / dirs)
        final = final.view(layers_dirs // self.directions, self.directions, batch, width)
        return final.permute(0, 2, 1, 3).reshape(-1, batch, width * self.directions)  # (L, B, H)
