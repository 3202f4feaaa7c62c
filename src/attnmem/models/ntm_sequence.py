"""The NTM's time loop with cosine content addressing as one autograd node: `models.ntm`'s step fused, and its
backward through time derived by hand (BPTT). Same maths as `NTM.step`, in about half the operations and without
autograd's graph of ~90 nodes per time step. Under `torch.func.vmap` over stacked weights (an ensemble of E NTMs,
as torch.func's model ensembling does it) one call runs every member's rows, each group of rows with its own
weights. `tests/models/test_ntm_sequence.py` checks both against autograd."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.core.autograd import Function
from attnmem.core.float32 import in_float32
from attnmem.models import fused
from attnmem.models.fused import affine, lstm_backward, weight_grad

__all__ = ["SHARPEN_EPS", "Sizes", "ntm_sequence"]

SHARPEN_EPS = 1e-16  # keeps log 0 finite in the sharpening (eq. 9); `models.ntm.sharpen`'s too
aten = torch.ops.aten
CONTROLLER = {True: ("prev_in", "act", "cand", "c_prev", "tc"), False: ("prev_in",)}  # LSTM, feed-forward
MEMORY = ("key", "beta", "gamma_in", "memory", "qn", "kn", "denom", "similarity", "strength", "content", "gate",
          "gated", "shift", "shifted", "log_shifted", "gamma", "erase", "add", "factors", "keep")


class Sizes(NamedTuple):
    """What the fused loop needs to know of the NTM besides its tensors."""

    read_heads: int
    write_heads: int
    shift_range: int
    lstm: bool  # LSTM controller, else feed-forward
    eps: float  # the cosine's floor on norms
    groups: int = 0  # E > 0: the weights are E models' (E, ...), the rows of all else E groups of B (`vmap`)


class _Constants(NamedTuple):
    one: Tensor
    zero: Tensor
    sharpen_eps: Tensor
    floor: Tensor  # the cosine's eps

    @classmethod
    def like(cls, x: Tensor, sizes: Sizes) -> _Constants:
        """0-dim tensors: arithmetic with them skips the copy torch makes of a Python scalar."""
        return cls(*(x.new_tensor(v) for v in (1.0, 0.0, SHARPEN_EPS, sizes.eps)))


def _windows(weights: Tensor, k: int) -> Tensor:
    """Circular windows (B, H, 2k + 1, N) of `weights (B, H, N)`: window j holds w(i + j - k)."""
    n = weights.shape[-1]
    return torch.cat([weights[..., n - k :], weights, weights[..., :k]], -1).unfold(-1, n, 1)


def _softmax_backward(grad: Tensor, output: Tensor) -> Tensor:
    # y ∘ (g - Σ g ∘ y); aten's private `_softmax_backward_data` saved nothing measurable (docs/benchmarks.md)
    return output * (grad - (grad * output).sum(-1, keepdim=True))


def _controller(x_t: Tensor, h: Tensor, c: Tensor, reads: Tensor, w_rec_t: Tensor, sizes: Sizes) -> tuple:
    """h_t, c_t and the stash of the controller's step (`CONTROLLER`)."""
    prev_in = torch.cat([reads.flatten(1), h], 1) if sizes.lstm else reads.flatten(1)
    z = affine(x_t, prev_in, w_rec_t, sizes.groups)  # (B, G)
    if not sizes.lstm:
        return torch.tanh(z), c, (prev_in,)
    size = h.shape[-1]
    act, cand = torch.sigmoid(z), torch.tanh(z.narrow(1, 2 * size, size))  # i, f, (unused), o; g
    i, f, _, o = act.chunk(4, 1)
    c_new = torch.addcmul(f * c, i, cand)
    tc = torch.tanh(c_new)
    return o * tc, c_new, (prev_in, act, cand, c, tc)


def _write(memory: Tensor, write_w: Tensor, erase: Tensor, add: Tensor, one: Tensor) -> tuple[Tensor, ...]:
    """M_t = M_{t-1} ∘ Π_h (1 - w_h e_hᵀ) + Σ_h w_h a_hᵀ (eqs. 3-4), and the factors (B, W, N, M) and their product."""
    if write_w.shape[1] == 1:  # the sum and product over heads are the one head's terms
        write_t = write_w.mT  # (B, N, 1)
        factors = keep = one - torch.bmm(write_t, erase)
        return (memory * keep).baddbmm_(write_t, add), factors, keep
    factors = one - write_w.unsqueeze(-1) * erase.unsqueeze(-2)
    keep = factors.prod(1)
    return torch.baddbmm(memory * keep, write_w.mT, add), factors, keep


def _memory(out: Tensor, memory: Tensor, previous: Tensor, sizes: Sizes, k: _Constants) -> tuple:
    """Weightings (eqs. 5-9), reads (eq. 2) and the written memory (eqs. 3-4) of one step, and its stash (`MEMORY`)."""
    b, m, heads = out.shape[0], memory.shape[-1], sizes.read_heads + sizes.write_heads
    shifts = 2 * sizes.shift_range + 1
    params, erase_add = out.split([heads * (m + 3 + shifts), sizes.write_heads * 2 * m], 1)
    key, beta, gate, shift, gamma_in = params.view(b, heads, -1).split([m, 1, 1, shifts, 1], -1)
    qn, kn = key.norm(dim=-1, keepdim=True), memory.norm(dim=-1).unsqueeze(1)  # (B, H, 1), (B, 1, N)
    denom = qn.clamp_min(sizes.eps) * kn.clamp_min(sizes.eps)
    similarity = torch.bmm(key, memory.mT).div_(denom)  # K[k, M_i]: (B, H, N)
    strength = F.softplus(beta)
    content = torch.softmax(strength * similarity, -1)
    gate = torch.sigmoid(gate)
    gated = torch.lerp(previous, content, gate)
    shift = torch.softmax(shift, -1)
    shifted = (_windows(gated, sizes.shift_range) * shift.flip(-1).unsqueeze(-1)).sum(-2).add_(k.sharpen_eps)
    log_shifted, gamma = shifted.log(), F.softplus(gamma_in).add_(k.one)
    weights = torch.softmax(gamma * log_shifted, -1)  # (B, H, N)
    read_w, write_w = weights.split([sizes.read_heads, sizes.write_heads], 1)
    erase, add = erase_add.view(b, sizes.write_heads, 2 * m).chunk(2, -1)
    erase, add = torch.sigmoid(erase), torch.tanh(add)
    new_memory, factors, keep = _write(memory, write_w, erase, add, k.one)
    stash = (key, beta, gamma_in, memory, qn, kn, denom, similarity, strength, content, gate, gated, shift, shifted,
             log_shifted, gamma, erase, add, factors, keep)
    return weights, torch.bmm(read_w, memory), new_memory, stash


def _forward(x_gates: Tensor, h: Tensor, c: Tensor, reads: Tensor, weights: Tensor, memory: Tensor, w_rec: Tensor,
             w_heads: Tensor, b_heads: Tensor, sizes: Sizes, stash: bool = True) -> tuple[Tensor, ...]:
    """hs (B, T, C), reads (B, T, R, M), weightings (B, T, H, N), the last c and memory, then each step's stash."""
    hs, all_reads, all_weights, kept = [], [], [], []
    w_rec_t, w_heads_t, constants = w_rec.mT, w_heads.mT, _Constants.like(x_gates, sizes)
    for x_t in x_gates.unbind(1):
        h, c, controller = _controller(x_t, h, c, reads, w_rec_t, sizes)
        out = affine(b_heads, h, w_heads_t, sizes.groups)
        weights, reads, memory, step = _memory(out, memory, weights, sizes, constants)
        hs.append(h)
        all_reads.append(reads)
        all_weights.append(weights)
        if stash:  # kept per step, not stacked: stacking would copy each (B, N, M) memory once more
            kept.extend(controller + step)
    return torch.stack(hs, 1), torch.stack(all_reads, 1), torch.stack(all_weights, 1), c, memory, *kept


def _write_backward(s: dict[str, Tensor], write_w: Tensor, d_memory: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of the write weightings, erase and add vectors from that of M_t (eqs. 3-4)."""
    d_keep = d_memory * s["memory"]  # (B, N, M)
    if write_w.shape[1] == 1:
        d_write_w = torch.baddbmm(torch.bmm(s["add"], d_memory.mT), s["erase"], d_keep.mT, alpha=-1)  # (B, 1, N)
        return d_write_w, torch.bmm(write_w, d_keep).neg_(), torch.bmm(write_w, d_memory)
    f = s["factors"]  # keep = Π_h f_h: each factor's gradient is d_keep times the others
    d_f = d_keep.unsqueeze(1) * torch.stack([torch.cat([f[:, :h], f[:, h + 1 :]], 1).prod(1)
                                             for h in range(f.shape[1])], 1)  # (B, W, N, M)
    d_write_w = torch.bmm(s["add"], d_memory.mT) - (d_f @ s["erase"].unsqueeze(-1)).squeeze(-1)
    return d_write_w, -(write_w.unsqueeze(-2) @ d_f).squeeze(-2), torch.bmm(write_w, d_memory)


def _cosine_backward(s: dict[str, Tensor], d_similarity: Tensor, k: _Constants) -> tuple[Tensor, Tensor, Tensor]:
    """From that of K[k, M_i] = k·M_i / (|k| |M_i|): the keys' gradient, and `by_norm`, `d_dots` of M_{t-1}'s,
    d_dotsᵀ k - by_norm ∘ M."""
    d_dots, t = d_similarity / s["denom"], d_similarity * s["similarity"]
    qn, kn, key, memory = s["qn"], s["kn"], s["key"], s["memory"]
    by_qn = torch.where(qn >= k.floor, t.sum(-1, keepdim=True) / (qn * qn), k.zero)  # minus d|k| / |k|: (B, H, 1)
    by_kn = torch.where(kn >= k.floor, t.sum(1, keepdim=True) / (kn * kn), k.zero)  # (B, 1, N)
    return torch.baddbmm(key * by_qn, d_dots, memory, beta=-1), by_kn.mT, d_dots


def _memory_backward(s: dict[str, Tensor], weights: Tensor, previous: Tensor, d_weights: Tensor, d_reads: Tensor,
                     d_memory: Tensor, sizes: Sizes, k: _Constants) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of a step's head outputs, previous weightings and previous memory from those of its results."""
    read_w, write_w = weights.split([sizes.read_heads, sizes.write_heads], 1)
    d_write_w, d_erase, d_add = _write_backward(s, write_w, d_memory)
    d_read_w = torch.bmm(d_reads, s["memory"].mT)  # r = w M
    d_z = _softmax_backward(torch.cat([d_read_w, d_write_w], 1).add_(d_weights), weights)  # sharpen (eq. 9)
    d_gamma = (d_z * s["log_shifted"]).sum(-1, keepdim=True)
    windows = _windows(d_z.mul_(s["gamma"]).div_(s["shifted"]), sizes.shift_range)  # window j: dw̃(i + o_j)
    d_gated = (windows * s["shift"].unsqueeze(-1)).sum(-2)  # shift (eq. 8): (B, H, N)
    d_shift = _softmax_backward((windows * s["gated"].unsqueeze(-2)).sum(-1), s["shift"])
    gate = s["gate"]  # w^g = lerp(w_{t-1}, w^c, g) (eq. 7)
    d_content = gate * d_gated
    d_gate = aten.sigmoid_backward((d_gated * (s["content"] - previous)).sum(-1, keepdim=True), gate)
    d_zc = _softmax_backward(d_content, s["content"])  # content (eq. 5)
    d_strength = (d_zc * s["similarity"]).sum(-1, keepdim=True)
    d_key, by_norm, d_dots = _cosine_backward(s, d_zc.mul_(s["strength"]), k)
    d_mem = (d_memory * s["keep"]).addcmul_(s["memory"], by_norm, value=-1)  # what M_t, r and K take from M
    d_mem.baddbmm_(torch.cat([read_w, d_dots], 1).mT, torch.cat([d_reads, s["key"]], 1))
    d_params = torch.cat([d_key, aten.softplus_backward(d_strength, s["beta"], 1, 20), d_gate, d_shift,
                          aten.softplus_backward(d_gamma, s["gamma_in"], 1, 20)], -1)
    d_erase_add = torch.cat([aten.sigmoid_backward(d_erase, s["erase"]), aten.tanh_backward(d_add, s["add"])], -1)
    return torch.cat([d_params.flatten(1), d_erase_add.flatten(1)], 1), d_gated.sub_(d_content), d_mem


def _controller_backward(d_h: Tensor, d_c: Tensor, s: dict[str, Tensor], h: Tensor, lstm: bool) -> tuple:
    """Gradients of the gate pre-activation z and of c_{t-1}, from those of h_t and c_t (a tanh RNN's: of h's)."""
    return lstm_backward(d_h, d_c, s) if lstm else (aten.tanh_backward(d_h, h), d_c)


class NTMLoop(Function):
    """The NTM over a sequence (`_forward`) with its backward through time."""

    @staticmethod
    def forward(*args: Any) -> tuple[Tensor, ...]:
        inputs = {id(a) for a in args}  # inputs returned (c, M_0 in the stash) must be views to be saved
        return tuple(t.view_as(t) if id(t) in inputs else t for t in _forward(*args))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        ctx.sizes = inputs[-1]
        ctx.mark_non_differentiable(*output[5:])
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs[4], inputs[6], inputs[7], *output)

    @staticmethod
    def vmap(info: Any, in_dims: tuple, *args: Any) -> tuple[tuple[Tensor, ...], tuple[int, ...]]:
        """`vmap` over stacked weights (E models): one call on all their rows, each group with its weights."""
        *tensors, sizes = args
        r, stacked = info.batch_size, fused.stacked(info, in_dims, tensors, sizes.groups, "NTM")
        rows = [x.flatten(0, 1) for x in stacked[:6]]  # x_gates, h, c, reads, weights, memory: (E·B, ...)
        out = NTMLoop.apply(*rows, *stacked[6:], sizes._replace(groups=r))[:5]  # the stash stays with this call
        return tuple(o.unflatten(0, (r, -1)) for o in out), (0,) * len(out)

    @staticmethod
    def backward(ctx: Any, d_hs: Tensor | None, d_reads: Tensor | None, d_weights: Tensor | None,
                 d_c: Tensor | None, d_memory: Tensor | None, *_: Any) -> tuple[Tensor | None, ...]:
        weights0, w_rec, w_heads, hs, reads, weights, c, memory, *stash = ctx.saved_tensors
        sizes, names, rm = ctx.sizes, CONTROLLER[ctx.sizes.lstm] + MEMORY, reads[0, 0].numel()
        steps = [dict(zip(names, stash[i : i + len(names)], strict=True)) for i in range(0, len(stash), len(names))]
        d_h, d_r, d_w = torch.zeros_like(hs[:, 0]), torch.zeros_like(reads[:, 0]), torch.zeros_like(weights[:, 0])
        d_c = torch.zeros_like(c) if d_c is None else d_c
        d_mem = torch.zeros_like(memory) if d_memory is None else d_memory
        outs = [None if d is None else d.unbind(1) for d in (d_hs, d_reads, d_weights)]
        hs_t, weights_t, constants = hs.unbind(1), (weights0, *weights.unbind(1)), _Constants.like(hs, sizes)
        step_d_outs: list[Tensor] = []
        step_d_zs: list[Tensor] = []
        for t in reversed(range(len(steps))):
            d_r = d_r if outs[1] is None else d_r + outs[1][t]
            d_w = d_w if outs[2] is None else d_w + outs[2][t]
            d_out, d_w, d_mem = _memory_backward(steps[t], weights_t[t + 1], weights_t[t], d_w, d_r, d_mem, sizes,
                                                 constants)
            d_h = affine(d_h if outs[0] is None else d_h + outs[0][t], d_out, w_heads, sizes.groups)
            d_z, d_c = _controller_backward(d_h, d_c, steps[t], hs_t[t], sizes.lstm)
            d_prev_in = affine(None, d_z, w_rec, sizes.groups)  # (B, R·M [+ C])
            d_r = d_prev_in[:, :rm].view(d_r.shape)
            d_h = d_prev_in[:, rm:] if sizes.lstm else torch.zeros_like(d_h)
            step_d_outs.append(d_out)
            step_d_zs.append(d_z)
        d_outs, d_zs = torch.stack(step_d_outs[::-1], 1), torch.stack(step_d_zs[::-1], 1)  # (B, T, ·)
        d_w_rec = weight_grad(d_zs, torch.stack([step["prev_in"] for step in steps], 1), sizes.groups)
        d_w_heads = weight_grad(d_outs, hs, sizes.groups)
        d_b_heads = d_outs.view(max(sizes.groups, 1), -1, d_outs.shape[-1]).sum(1)
        d_b_heads = d_b_heads if sizes.groups else d_b_heads[0]
        return d_zs, d_h if sizes.lstm else None, d_c, d_r, d_w, d_mem, d_w_rec, d_w_heads, d_b_heads, None


@in_float32  # as `NTM.address`: β and γ amplify 16-bit rounding, and the state recurs every step
def ntm_sequence(x_gates: Tensor, h: Tensor, c: Tensor, reads: Tensor, weights: Tensor, memory: Tensor,
                 w_rec: Tensor, w_heads: Tensor, b_heads: Tensor, sizes: Sizes) -> tuple[Tensor, ...]:
    """hs (B, T, C), reads (B, T, R, M), weightings (B, T, H, N), the last cell state and memory of the NTM run over
    `x_gates (B, T, G)` from the state (h, c, reads, weights, memory); differentiable through all of them."""
    args = (x_gates, h, c, reads, weights, memory, w_rec, w_heads, b_heads, sizes)
    if torch.is_grad_enabled():  # (under vmap, batched tensors do not tell whether they require grad)
        return NTMLoop.apply(*args)[:5]
    return _forward(*args, stash=False)
