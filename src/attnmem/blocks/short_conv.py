"""`ShortConv`: the causal depthwise convolution of a few taps that Mamba's block, H3, Based and DeltaNet put before
their sequence mixer (`MixerBackbone`'s `short_conv`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes

__all__ = ["ShortConv"]


class ShortConv(nn.Module):
    """A causal depthwise convolution: each channel mixes its own last k inputs, zeros before the first,

        y_t = b + Σ_{j<k} w_j ∘ x_{t-k+1+j}

    The parameters are those of `nn.Conv1d(D, D, k, groups=D)` (weight (D, 1, k), bias (D,)), drawn as it draws
    them; the forward is k shifted multiply-adds over (B, T, D), which on a CPU take less time than the convolution
    over (B, D, T) and the two transposes around it (docs/benchmarks.md). state_size = (k − 1) · D: the last k − 1
    inputs.

    Args:
        d_model: the channels D.
        kernel_size: the taps k.
    """

    def __init__(self, d_model: int, kernel_size: int) -> None:
        super().__init__()
        check_sizes("ShortConv", {"d_model": d_model, "kernel_size": kernel_size})
        self.weight = nn.Parameter(torch.empty(d_model, 1, kernel_size))  # (D, 1, k): w_j of channel d at [d, 0, j]
        self.bias = nn.Parameter(torch.empty(d_model))  # (D,)
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # nn.Conv1d's initialisation, in its order
        nn.init.uniform_(self.bias, -1 / math.sqrt(kernel_size), 1 / math.sqrt(kernel_size))

    @property
    def state_size(self) -> int:
        """(k − 1) · D numbers: the last k − 1 inputs."""
        return (self.weight.shape[-1] - 1) * self.weight.shape[0]

    def forward(self, x: Tensor) -> Tensor:
        """The convolution over the sequence.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{t-k+1..t} only.
        """
        k, t = self.weight.shape[-1], x.shape[1]
        padded = F.pad(x, (0, 0, k - 1, 0))  # (B, T + k - 1, D): k - 1 zeros before step 0
        taps = self.weight[:, 0].T  # (k, D)
        y = torch.addcmul(self.bias, padded[:, :t], taps[0])  # (B, T, D)
        for j in range(1, k):
            y = torch.addcmul(y, padded[:, j : j + t], taps[j])
        return y
