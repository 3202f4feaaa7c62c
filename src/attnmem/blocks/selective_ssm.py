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
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd import Function

from attnmem.blocks.base_conv import causal_fft_conv

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


def _time_first(x: Tensor, per_state: bool) -> Tensor:
    """x (*lead, T, D) (or (*lead, T, ·, N) where `per_state`) as (T, *lead, ...), laid out so: what is computed
    from it is too, and each step of it is one block of memory."""
    return x.movedim(-3 if per_state else -2, 0).contiguous()


def _read(x: Tensor, v: Tensor) -> Tensor:
    """Σ_n x_{..dn} v_{..n}: the states read by C (or dL/dh by B) at every step, (T, *lead, D).

    A per-step v shared by the channels (S6's B_t, C_t) is one batched matrix × column per step and sequence, the
    column given the strides of a transposed row, for which MKL's path is several times faster (docs/benchmarks.md).
    """
    *lead, d, n = x.shape
    if v.shape == (*lead, 1, n):
        k = math.prod(lead)
        return torch.bmm(x.reshape(k, d, n), v.reshape(k, 1, n).mT).view(*lead, d)
    return (x * v).sum(-1)


def _weigh(x: Tensor, w: Tensor, like: Tensor) -> Tensor:
    """Σ_d w_{..d} x_{..dn}, summed to `like`'s shape: the gradient of B (or C) from dL/dh (or the states)."""
    *lead, d, n = x.shape
    if like.shape == (*lead, 1, n):
        k = math.prod(lead)
        return torch.bmm(w.reshape(k, 1, d), x.reshape(k, d, n)).view(like.shape)
    return (x * w[..., None]).sum_to_size(like.shape)


# numbers in one chunk of steps of a (T, *lead, D, N) tensor: 2 MiB in float32, which stays in cache. On this
# project's 1-thread CPU at B 64, T 128, D 64, N 16, forward + backward took 58 ms with it, 64 and 72 ms at a half
# and a quarter of it, 60 ms at twice it, and 79 ms in one chunk of all steps (whose passes go to memory)
CHUNK_NUMBERS = 1 << 19


def _spans(steps: int, per_step: int) -> list[tuple[int, int]]:
    """The chunks [s, e) of `steps` steps of `per_step` numbers each that `CHUNK_NUMBERS` holds (at least one step)."""
    size = max(1, CHUNK_NUMBERS // per_step)
    return [(s, min(s + size, steps)) for s in range(0, steps, size)]


def _steps(x: Tensor, s: int, e: int) -> Tensor:
    """Steps [s, e) of a time-first tensor, or the whole of a time-invariant one (one step: the LTI B, C)."""
    return x[s:e] if x.shape[0] > 1 else x


class _SelectiveScan(Function):
    """The recurrence of `selective_scan`, time first: h_t = Ā_t h_{t-1} + B̄_t u_t written in place over B̄_t u_t, a
    step at a time, and its backward derived by hand (the reverse recurrence, in place the same way).

    Only the recurrence goes step by step; the rest is a few operations per chunk of steps (`CHUNK_NUMBERS`: what
    stays in cache): Ā_t and B̄_t u_t before the chunk's steps, the read-out C_t h_t after them, and in the backward
    the gradients of Δ, A, u, B, C from dL/dh_t. Autograd through the step-by-step loop records ~10 operations a step,
    and an earlier fused loop that did all the work per step ~25 a step; at B 64, T 64-128, D 32-64, N 16 this one
    takes less time than that one on a 1-thread CPU (docs/benchmarks.md). Leading batch dimensions beyond (B,) are
    what `vmap` (the replicas) adds: a, b and c broadcast against them.
    """

    @staticmethod
    def forward(delta: Tensor, a: Tensor, u: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """y (*lead, T, D); the states h and the decays Ā, (T, *lead, D, N), kept for the backward."""
        d_t, u_t, b_t, c_t = (_time_first(x, x is b or x is c) for x in (delta, u, b, c))
        a_b = a[:, None] if a.dim() == 3 else a  # (D, N), or (R, 1, D, N) under vmap: against (T, R, B, D, N)
        du = d_t * u_t  # (T, *lead, D): Δ_t u_t
        shape = (*du.shape, a.shape[-1])
        states, decay, y = du.new_empty(shape), du.new_empty(shape), du.new_empty(du.shape)
        for s, e in _spans(du.shape[0], math.prod(shape[1:])):
            torch.mul(d_t[s:e, ..., None], a_b, out=decay[s:e]).exp_()  # Ā_t = exp(Δ_t A), eq. 4
            torch.mul(du[s:e, ..., None], _steps(b_t, s, e), out=states[s:e])  # B̄_t u_t, becoming h_t
            for t in range(max(s, 1), e):
                states[t].addcmul_(decay[t], states[t - 1])  # eq. 2a: h_t = Ā_t h_{t-1} + B̄_t u_t
            y[s:e] = _read(states[s:e], _steps(c_t, s, e))  # eq. 2b: y_t = C_t h_t
        return y.movedim(0, -2), states, decay

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, ...], output: tuple[Tensor, Tensor, Tensor]) -> None:
        """Keep the inputs, the states and the decays; no zeros are made for the latter two's gradients."""
        ctx.save_for_backward(*inputs, output[1], output[2])
        ctx.mark_non_differentiable(output[1], output[2])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx: Any, gy: Tensor | None, *_: Tensor) -> tuple[Tensor | None, ...]:
        """The gradients of Δ, A, u, B, C by the reverse recurrence gh_{t-1} = ∂L/∂h_{t-1} + Ā_t ∘ gh_t, chunk by
        chunk from the last."""
        delta, a, u, b, c, states, decay = ctx.saved_tensors
        if gy is None:  # only the states or the decays were used, which carry no gradient
            return None, None, None, None, None
        d_t, u_t, b_t, c_t, gy_t = (_time_first(x, x is b or x is c) for x in (delta, u, b, c, gy))
        du, steps = d_t * u_t, states.shape[0]  # (T, *lead, D)
        spans = _spans(steps, math.prod(states.shape[1:]))
        gh_chunk = states.new_empty((spans[0][1], *states.shape[1:]))  # dL/dh_t of one chunk's steps
        glog_chunk = torch.empty_like(gh_chunk)  # dL/d(Δ_t A) of one chunk's steps
        gdu, glog_a = torch.empty_like(du), torch.zeros_like(du)  # dL/d(Δ_t u_t); Σ_n dL/d(Δ_t A) A
        ga, gb, gc = torch.zeros_like(a), torch.zeros_like(b_t), torch.zeros_like(c_t)
        later = None  # dL/dh at the first step of the chunk after this one
        for s, e in reversed(spans):
            gh = torch.mul(gy_t[s:e, ..., None], _steps(c_t, s, e), out=gh_chunk[: e - s])  # ∂y_t/∂h_t
            if later is not None:
                gh[-1].addcmul_(decay[e], later)
            for t in reversed(range(e - s - 1)):
                gh[t].addcmul_(decay[s + t + 1], gh[t + 1])  # the reverse recurrence
            later = gh[0].clone()
            gdu[s:e] = _read(gh, _steps(b_t, s, e))
            _steps(gb, s, e).add_(_weigh(gh, du[s:e], _steps(b_t, s, e)))
            _steps(gc, s, e).add_(_weigh(states[s:e], gy_t[s:e], _steps(c_t, s, e)))
            first = max(s, 1)  # dL/d(Δ_t A) = dL/dh_t ∘ h_{t-1} ∘ Ā_t, t >= 1 (h_0 = 0: none at step 0)
            glog = torch.mul(gh[first - s :], states[first - 1 : e - 1], out=glog_chunk[: e - first])
            ga_part, glog_a[first:e] = _by_a(glog.mul_(decay[first:e]), d_t[first:e], a)
            ga += ga_part
        gdelta = gdu * u_t + glog_a
        return gdelta.movedim(0, -2), ga, (gdu * d_t).movedim(0, -2), gb.movedim(0, -3), gc.movedim(0, -3)

    @staticmethod
    def vmap(info: Any, in_dims: tuple[int | None, ...], *args: Tensor) -> tuple[tuple[Tensor, ...], tuple[int, ...]]:
        """Replicas (a vmapped dimension) as one more leading dimension of every input."""
        moved = [x.movedim(i, 0) if i is not None else x.expand(info.batch_size, *x.shape)
                 for x, i in zip(args, in_dims, strict=True)]
        out = _SelectiveScan.apply(*moved)  # type: ignore[no-untyped-call]  # torch: apply unannotated
        return out, (0, 1, 1)


def _by_a(glog: Tensor, delta: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
    """dL/dA = Σ_{t,b} glog Δ_t, (D, N) (or per replica), and Σ_n glog A, (T - 1, *lead, D): the two uses of log Ā."""
    if a.dim() == 2:  # one A: per channel d, a product over the steps and sequences (or over n)
        *lead, d, n = glog.shape
        per_channel = glog.reshape(-1, d, n).transpose(0, 1)  # (D, K, N)
        ga = torch.bmm(delta.reshape(-1, d).T[:, None], per_channel)[:, 0]  # (D, N)
        return ga, torch.bmm(per_channel, a[:, None].mT).view(d, *lead).movedim(0, -1)
    a_b = a[:, None]  # (R, 1, D, N)
    return (glog * delta[..., None]).sum_to_size(a_b.shape).view(a.shape), (glog * a_b).sum(-1)


def selective_scan(delta: Tensor, a: Tensor, u: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """The recurrence h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t, y_t = C_t h_t, as one loop with a hand-derived backward.

    Args:
        delta: the step sizes Δ.
        a: the diagonal A (negative).
        u: the input u.
        b: B_t (selective: per step, shared by the channels) or B (LTI: one per channel).
        c: C_t or C, as b.

    Shapes:
        - delta, u, y: (B, T, D)
        - a: (D, N)
        - b, c: (B, T, 1, N) selective, (1, 1, D, N) LTI

    Returns:
        y, y_t = Σ_n C_t h_t (without the skip D u_t).
    """
    out = _SelectiveScan.apply(delta, a, u, b, c)  # type: ignore[no-untyped-call]  # torch: apply unannotated
    return cast("tuple[Tensor, Tensor, Tensor]", out)[0]


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
