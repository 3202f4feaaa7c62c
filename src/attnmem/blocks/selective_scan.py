"""S6's selective scan (Gu & Dao 2023, Algorithm 2, eq. 2a-2b) for a CPU: the recurrence h_t = Ā_t h_{t-1} + B̄_t u_t
step by step, everything else a few operations per chunk of steps that stays in cache, and a hand-derived backward.
`SelectiveSSM` (`selective_ssm.py`) runs S6 through it."""

from __future__ import annotations

import math
from typing import Any, cast

import torch
from torch import Tensor
from torch.autograd import Function

__all__ = ["CHUNK_NUMBERS", "selective_scan"]


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
