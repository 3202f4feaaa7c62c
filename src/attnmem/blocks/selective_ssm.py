"""Mamba's selective state-space layer S6 (Gu & Dao 2023, §3.2, Algorithm 2) and its LTI (S4D-like) variant.

Only the SSM layer itself, the mixer: not the Mamba block (§3.4) with its input expansion, short
convolution and SiLU gate. Each of the D channels of `x (B, T, D)` runs its own diagonal SSM with N states:

    Δ_t = τ_Δ(Parameter + s_Δ(x_t))         (Algorithm 2, line 3; τ_Δ = softplus)
    B_t = s_B(x_t),  C_t = s_C(x_t)          (lines 1-2: linear projections to N)
    Ā_t = exp(Δ_t A)                          (zero-order hold, eq. 4)
    B̄_t = Δ_t B_t                             (the simplification of §3.5.2 / Algorithm 2)
    h_t = Ā_t h_{t-1} + B̄_t x_t,  y_t = C_t h_t + D x_t   (eq. 2a, 2b, with the skip D)

A = -exp(A_log) is a learned diagonal, S4D-real initialised (A_n = -(n + 1)); Δ's bias is initialised so
that softplus(bias) is log-uniform in [dt_min, dt_max] (the paper's code). With `selective=False`, Δ, B and
C are parameters, not functions of the input: the time-invariant (S4D-like) baseline of Mamba's Table 1. Being
time-invariant, it is also a convolution (§2, eq. 3a-3b), the form `forward` computes it in:

    K̄ = (C B̄, C Ā B̄, ..., C Ā^k B̄, ...),   y = x ∗ K̄
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.base_conv import causal_fft_conv
from attnmem.blocks.selective_scan import selective_scan

__all__ = ["SelectiveSSM", "chunked_scan", "selective_scan"]


def _check(name: str, value: int, low: int = 1) -> None:
    """ValueError naming the option when an integer option is below its range."""
    if value < low:
        raise ValueError(f"SelectiveSSM: {name} must be >= {low}, got {value}")


def chunked_scan(
    delta: Tensor, a: Tensor, bx: Tensor, c: Tensor, chunk_size: int, state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The diagonal recurrence h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t, read by C_t, computed chunk by chunk.

    Within a chunk the products of Ā are exp of differences of the cumulative sum of log Ā = Δ A (the
    pairs s <= t only, so every exponent is <= 0: no overflow); across chunks the state is carried.

    Args:
        delta: the step sizes Δ.
        a: the diagonal A (negative).
        bx: B̄_t x_t = Δ_t B_t x_t, the input to the state.
        c: the read-out C_t (broadcastable to the state's shape).
        chunk_size: steps per chunk.
        state: the state before step 0 (zero when None).

    Shapes:
        - delta: (B, T, D)
        - a: (D, N)
        - bx: (B, T, D, N)
        - c: broadcastable to (B, T, D, N)
        - state: (B, D, N)
        - y: (B, T, D); last state: (B, D, N)

    Returns:
        `(y, state)`: y_t = Σ_n C_t h_t for every step, and the state after the last step.
    """
    b, t, d, n = bx.shape
    h = bx.new_zeros(b, d, n) if state is None else state
    c = c.expand(b, t, d, n)
    outputs = []
    for start in range(0, t, chunk_size):
        end = min(start + chunk_size, t)
        log_a = delta[:, start:end, :, None] * a  # (B, L, D, N): log Ā_t
        cum = log_a.cumsum(1)  # (B, L, D, N): S_t = Σ_{s<=t} log Ā_s
        seg = cum[:, :, None] - cum[:, None]  # (B, Lt, Ls, D, N): S_t - S_s = log Π_{s<r<=t} Ā_r
        keep = torch.ones(end - start, end - start, dtype=torch.bool, device=bx.device).tril()[:, :, None, None]
        decay = seg.masked_fill(~keep, float("-inf")).exp()  # (B, Lt, Ls, D, N), zero where s > t
        states = torch.einsum("btsdn,bsdn->btdn", decay, bx[:, start:end]) + cum.exp() * h[:, None]  # (B, L, D, N)
        outputs.append((states * c[:, start:end]).sum(-1))  # (B, L, D)
        h = states[:, -1]  # (B, D, N)
    return torch.cat(outputs, 1), h


class SelectiveSSM(nn.Module):
    """The selective SSM S6 of Mamba (Gu & Dao 2023, §3.2, Algorithm 2), or its LTI variant; a causal mixer.

    state_size = d_model · d_state (one N-state diagonal SSM per channel; the layer has no input expansion,
    so d_inner = d_model).

    Args:
        d_model: the width D of the input and output (the channels).
        d_state: N, the states per channel.
        selective: True: Δ, B, C are functions of the input (S6); False: parameters (LTI, S4D-like).
        dt_rank: the rank R of s_Δ = Linear_{R→D}(Linear_{D→R}(x)) (the paper's code; the paper's
            Broadcast_D(Linear_1(x)) is the case R = 1 with equal weights); None: ceil(D / 16), the code's.
        chunk_size: None: `forward` runs S6 by `selective_scan` (one loop, hand-derived backward: the fastest on a
            CPU, ~12× the chunked scan at T 64, D 64, N 16) and the LTI variant as the convolution y = x ∗ K̄
            (eq. 3a-3b, by FFT); an integer: either by the chunked scan with chunks of this many steps (parallel
            within a chunk, for accelerators; its memory grows as B·L²·D·N).
        dt_min: the smallest initial Δ.
        dt_max: the largest initial Δ.
    """

    def __init__(
        self,
        d_model: int,
        *,
        d_state: int = 16,
        selective: bool = True,
        dt_rank: int | None = None,
        chunk_size: int | None = None,
        dt_min: float = 0.001,
        dt_max: float = 0.1,
    ) -> None:
        super().__init__()
        rank = math.ceil(d_model / 16) if dt_rank is None else dt_rank
        sizes = {"d_model": d_model, "d_state": d_state, "dt_rank": rank, "chunk_size": chunk_size or 1}
        for name, value in sizes.items():
            _check(name, value)
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"SelectiveSSM: need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        self.d_model, self.d_state, self.selective, self.chunk_size = d_model, d_state, selective, chunk_size
        a = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_model, 1)  # (D, N): S4D-real, A_n = -(n+1)
        self.A_log = nn.Parameter(a.log())
        self.D = nn.Parameter(torch.ones(d_model))
        dt = torch.exp(torch.rand(d_model) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))  # (D,)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(bias) = dt: line 3's Parameter
        if selective:
            self.x_proj = nn.Linear(d_model, rank + 2 * d_state, bias=False)  # s_Δ's first half, s_B, s_C
            self.dt_proj = nn.Linear(rank, d_model, bias=False)  # s_Δ's second half: R → D
            self.rank = rank
        else:
            self.B = nn.Parameter(torch.ones(d_model, d_state))  # (D, N)
            self.C = nn.Parameter(torch.randn(d_model, d_state) / math.sqrt(d_state))  # (D, N)

    @property
    def state_size(self) -> int:
        """d_model · d_state numbers per sequence."""
        return self.d_model * self.d_state

    def _parameters_of(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Δ (B, T, D), B and C (B, T, 1, N) selective, (1, 1, D, N) LTI, for the input `x (B, T, D)`."""
        if not self.selective:
            delta = F.softplus(self.dt_bias).expand(*x.shape)  # (B, T, D)
            return delta, self.B[None, None], self.C[None, None]
        dt_low, b, c = self.x_proj(x).split([self.rank, self.d_state, self.d_state], -1)  # (B, T, R), (B, T, N) x 2
        delta = F.softplus(self.dt_bias + self.dt_proj(dt_low))  # (B, T, D): τ_Δ(Parameter + s_Δ(x))
        return delta, b[:, :, None], c[:, :, None]

    def kernel(self, length: int) -> Tensor:
        """The LTI variant's convolution kernel K̄_k = Σ_n C_n Ā_n^k B̄_n, k < `length` (eq. 3a), per channel.

        Args:
            length: the number of taps (the sequence's length).

        Shapes:
            - kernel: (D, length)

        Returns:
            K̄, with Ā = exp(Δ A) and B̄ = Δ B for the parameter Δ = τ_Δ(dt_bias).
        """
        if self.selective:
            raise ValueError("SelectiveSSM: only the LTI variant (selective=False) is a convolution; S6 has no kernel")
        delta = F.softplus(self.dt_bias)[:, None]  # (D, 1)
        steps = torch.arange(length, dtype=delta.dtype, device=delta.device)  # (K,)
        powers = torch.exp(delta[..., None] * -self.A_log.exp()[..., None] * steps)  # (D, N, K): Ā^k
        return torch.einsum("dn,dnk->dk", self.C * delta * self.B, powers)  # (D, K)

    def forward(self, x: Tensor) -> Tensor:
        """The layer over the whole sequence at once (S6 by `selective_scan`, LTI as a convolution; with
        `chunk_size`, the chunked scan).

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, with y_t a function of x_{<=t} only.
        """
        if self.chunk_size is None and not self.selective:
            return causal_fft_conv(x, self.kernel(x.shape[1])) + self.D * x  # (B, T, D): eq. 3b, y = x ∗ K̄ + D x
        delta, b, c = self._parameters_of(x)
        a = -self.A_log.exp()  # (D, N)
        if self.chunk_size is None:
            return selective_scan(delta, a, x, b, c) + self.D * x  # (B, T, D)
        bx = (delta * x)[..., None] * b  # (B, T, D, N): B̄_t x_t
        y, _ = chunked_scan(delta, a, bx, c, self.chunk_size)
        return y + self.D * x  # (B, T, D)

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map, step by step from the state h (B, D, N): the reference form.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - y: (B, T, D)

        Returns:
            y, as `forward`.
        """
        delta, b, c = self._parameters_of(x)
        a = -self.A_log.exp()  # (D, N)
        h = x.new_zeros(x.shape[0], self.d_model, self.d_state)  # (B, D, N)
        steps = []
        for t in range(x.shape[1]):
            bt, ct = b[:, min(t, b.shape[1] - 1)], c[:, min(t, c.shape[1] - 1)]  # (B or 1, 1 or D, N)
            h = torch.exp(delta[:, t, :, None] * a) * h + (delta[:, t] * x[:, t])[..., None] * bt  # eq. 2a
            steps.append((h * ct).sum(-1) + self.D * x[:, t])  # (B, D): eq. 2b + D x_t
        return torch.stack(steps, 1)  # (B, T, D)
