"""Zoology's BaseConv (Arora et al. 2024, "Zoology", §4): a gated long convolution, a causal mixer.

    y = (u W + b_1) ⊙ (h ∗ u + b_2)

u (B, T, D) the input; W, b_1 a linear projection; h a long learned filter, one per channel (a depthwise
causal convolution: (h ∗ u)_t = Σ_{k=0}^{K-1} h_k u_{t-k}), computed by FFT; b_2 a per-channel bias. This is
the paper's equation with the explicit long filter (Zoology's code also has short and implicit filters).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

__all__ = ["BaseConv", "causal_fft_conv"]


def causal_fft_conv(u: Tensor, h: Tensor) -> Tensor:
    """The depthwise causal convolution (h ∗ u)_t = Σ_k h_k u_{t-k} by FFT (zero-padded: no wrap-around).

    Args:
        u: the sequence.
        h: one filter per channel (taps beyond the sequence's length are never reached).

    Shapes:
        - u: (B, T, D)
        - h: (D, K)
        - y: (B, T, D)

    Returns:
        The convolution at every step, a function of u_{<=t} only.
    """
    t = u.shape[1]
    h = h[:, :t]  # (D, min(K, T)): longer taps reach before step 0
    n = 2 * t  # >= T + K - 1: the circular convolution equals the linear one on [0, T)
    spectrum = torch.fft.rfft(u.transpose(1, 2), n=n) * torch.fft.rfft(h, n=n)  # (B, D, n // 2 + 1)
    return cast(Tensor, torch.fft.irfft(spectrum, n=n)[..., :t].transpose(1, 2))  # (B, T, D)


class BaseConv(nn.Module):
    """Zoology's BaseConv (Arora et al. 2024, §4): y = (u W + b_1) ⊙ (h ∗ u + b_2), h a long causal filter.

    state_size = l_max · d_model: a recurrent form keeps the last l_max inputs of every channel.

    Args:
        d_model: the width D of the input and output.
        l_max: K, the filter's length (the longest context a step sees; a longer sequence is fine, its
            steps see the last K inputs).
    """

    def __init__(self, d_model: int, *, l_max: int = 256) -> None:
        super().__init__()
        for name, value in {"d_model": d_model, "l_max": l_max}.items():
            if value < 1:
                raise ValueError(f"BaseConv: {name} must be >= 1, got {value}")
        self.d_model, self.l_max = d_model, l_max
        self.projection = nn.Linear(d_model, d_model)  # W, b_1
        self.filter = nn.Parameter(torch.randn(d_model, l_max) / l_max**0.5)  # h: (D, K)
        self.bias = nn.Parameter(torch.zeros(d_model))  # b_2

    @property
    def state_size(self) -> int:
        """l_max · d_model numbers per sequence."""
        return self.l_max * self.d_model

    def forward(self, x: Tensor) -> Tensor:
        """The layer over the whole sequence, the convolution by FFT.

        Args:
            x: the input sequence u.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        return cast(Tensor, self.projection(x)) * (causal_fft_conv(x, self.filter) + self.bias)  # (B, T, D)

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map step by step: the last l_max inputs kept, the convolution a per-step sum.

        Args:
            x: the input sequence u.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, as `forward`.
        """
        b, _, d = x.shape
        window = x.new_zeros(b, self.l_max, d)  # (B, K, D): u_{t-k} at row k
        steps = []
        for t in range(x.shape[1]):
            window = torch.cat([x[:, t, None], window[:, :-1]], 1)  # (B, K, D)
            conv = torch.einsum("bkd,dk->bd", window, self.filter)  # (B, D): Σ_k h_k u_{t-k}
            steps.append(self.projection(x[:, t]) * (conv + self.bias))  # (B, D)
        return torch.stack(steps, 1)  # (B, T, D)
