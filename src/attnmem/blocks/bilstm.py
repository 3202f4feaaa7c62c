"""A bidirectional LSTM over right-padded sequences, used by the span models."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmem.core.float32 import recurrent

__all__ = ["BiLSTM", "reverse_within"]


def reverse_within(inputs: Tensor, lengths: Tensor) -> Tensor:
    """Each sequence of `inputs (B, T, D)` reversed within its own length; the padding stays where it is."""
    steps = torch.arange(inputs.shape[1], device=inputs.device)  # (T,)
    index = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # (B, T)
    return inputs.gather(1, index.unsqueeze(-1).expand_as(inputs))


class BiLSTM(nn.Module):
    """Forward and backward LSTMs, outputs concatenated (B, T, 2H), zero on padding.

    The backward direction reads each sequence from its own last token: `nn.LSTM(bidirectional=True)`
    on a right-padded batch would start in the padding. Packed sequences would do the same, but
    `float32.recurrent` (float32 under CPU autocast) takes plain tensors.
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.forward_lstm = nn.LSTM(input_size, hidden_size, batch_first=True)
        self.backward_lstm = nn.LSTM(input_size, hidden_size, batch_first=True)

    def forward(self, inputs: Tensor, lengths: Tensor) -> Tensor:
        """Read `inputs (B, T, D)` whose sequence b has `lengths[b]` real steps; return (B, T, 2H)."""
        forward, _ = recurrent(self.forward_lstm, inputs)  # (B, T, H)
        backward, _ = recurrent(self.backward_lstm, reverse_within(inputs, lengths))  # (B, T, H), reversed
        states = torch.cat([forward, reverse_within(backward, lengths)], dim=-1)  # (B, T, 2H)
        mask = torch.arange(inputs.shape[1], device=inputs.device) < lengths[:, None]  # (B, T)
        return states * mask.unsqueeze(-1)
