"""The backward of one step of the DNC's fused loop (`models.dnc_loop.memory_step`), derived by hand: from the
gradients of the new memory state and reads, those of the interface vector and of the previous state."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.blocks.dnc_memory import EPS, link_backward

__all__ = ["Constants", "allocation_backward", "content_backward", "memory_backward", "prepare", "softmax_backward"]

aten = torch.ops.aten


class Constants(NamedTuple):
    """0-dim tensors: arithmetic with them skips the copy torch makes of a Python scalar (~2.5 µs an operation)."""

    one: Tensor
    zero: Tensor
    floor: Tensor  # the cosine's eps
    log_floor: Tensor  # `blocks.dnc_memory.EPS`, inside the sharpening's log

    @classmethod
    def like(cls, x: Tensor, eps: float) -> Constants:
        """The constants in the dtype and device of `x`."""
        return cls(*(x.new_tensor(v) for v in (1.0, 0.0, eps, EPS)))


def _column(x: Tensor) -> Tensor:
    """`x (B, K)` as columns (B, K, 1) with the strides of a transposed row: MKL's batched product of a matrix and
    such a column is several times faster on CPU than of a contiguous one (issue 53)."""
    return x.unsqueeze(-2).mT


def softmax_backward(grad: Tensor, output: Tensor) -> Tensor:
    """The gradient of softmax's input from that of its `output`: y ∘ (g - Σ g ∘ y)."""
    return output * (grad - (grad * output).sum(-1, keepdim=True))


def content_backward(d_weights: Tensor, stash: tuple, inverse: tuple[Tensor, Tensor], memory: Tensor, key: Tensor,
                     mask: Tensor | None, k: Constants) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """Gradients of the keys (B, H, W), strengths (B, H), mask (B, H, W) or None and memory (B, N, W) of
    `dnc_loop.content` from that of its weightings `d_weights (B, H, N)`; `inverse`: 1 / |k|², 1 / |m|² (0 below
    the cosine's floor, where the norm passes no gradient)."""
    keys, mem, _, _, denom, similarity, weights, strengths = stash
    b, h, n = weights.shape
    dz = softmax_backward(d_weights, weights)
    d_strengths = (dz * similarity).sum(-1)
    d_sim = (dz * strengths.unsqueeze(-1)).view(-1, keys.shape[1], n)  # (B, H, N) or (B·H, 1, N) with the mask
    d_dots, t = d_sim / denom, d_sim * similarity.view_as(d_sim)
    by_qn = t.sum(-1, keepdim=True).mul_(inverse[0])  # minus d|k| / |k|
    by_kn = t.sum(1, keepdim=True).mul_(inverse[1])
    d_keys = torch.baddbmm(keys * by_qn, d_dots, mem, beta=-1)
    if keys.shape[1] == 1:  # one head (or the mask's rows): an outer product, ~2× a batched product's speed on CPU
        d_mem = torch.addcmul(d_dots.mT * keys, mem, by_kn.mT, value=-1)
    else:
        d_mem = torch.baddbmm(mem * by_kn.mT, d_dots.mT, keys, beta=-1)
    if mask is None:
        return d_keys, d_strengths, None, d_mem
    d_keys, d_mem = d_keys.view(b, h, -1), d_mem.view(b, h, n, -1)
    d_mask = d_keys * key + (d_mem * memory.unsqueeze(1)).sum(2)
    return d_keys * mask, d_strengths, d_mask, (d_mem * mask.unsqueeze(2)).sum(1)


def allocation_backward(d_alloc: Tensor, phi: Tensor, fixed: tuple[Tensor, ...], k: Constants) -> Tensor:
    """The usage's gradient from the allocation weighting's: a[φ_j] = (1 - s_j) P_j, s the usage sorted ascending,
    P_j = Π_{i<j} s_i.

    d s_k = Σ_{j>k} g_j (1 - s_j) Π_{i<j, i≠k} s_i - g_k P_k. Zeros sort first: if s_0 = 0 every term of k ≥ 1
    holds it (0), and k = 0 drops its own factor (C_j = Π_{0<i<j} s_i); else Π_{i<j, i≠k} s_i = P_j / s_k. Exact,
    in a third of the operations of `torch.cumprod`'s backward, which cannot know the zeros come first. `fixed`:
    what depends on the forward alone (`prepare`): 1 - s, P, C_j (j ≥ 1), s_0 > 0, s_{1:}, P_{1:}."""
    unused, before, skip_first, positive, later_usage, later_before = fixed
    g = d_alloc.gather(-1, phi)
    q = g * unused
    tails = (q * before).flip(-1).cumsum(-1).flip(-1)  # Σ_{j≥k} q_j P_j
    rest = F.pad(tails[:, 2:], (0, 1)).div_(later_usage).sub_(g[:, 1:] * later_before)  # k ≥ 1
    first = (q[:, 1:] * skip_first).sum(-1, keepdim=True) - g[:, :1]
    d_sorted = torch.cat([first, torch.where(positive, rest, k.zero)], -1)
    return torch.empty_like(d_alloc).scatter_(-1, phi, d_sorted)  # φ is a permutation: every entry written


def _read_backward(s: dict[str, Any], d_read: Tensor, d_reads: Tensor, d_memory: Tensor, lay: Any,
                   k: Constants) -> tuple:
    """Through r = w^r M_t, the read modes, the read content lookup and the link sharpening; `d_memory`: M_t's
    gradient from the steps after."""
    new_memory, x = s["new_memory"], s["x"]
    d_read = torch.baddbmm(d_read, d_reads, new_memory.mT)  # (B, R, N)
    r = d_reads.shape[1]
    product = torch.addcmul if r == 1 else torch.baddbmm  # one head: an outer product
    d_memory = product(d_memory, s["new_read"].mT, d_reads)  # (B, N, W)
    b, n = d_read.shape[0], d_read.shape[2]
    d_modes = torch.bmm(s["choices"].view(b * r, 3, n), _column(d_read.reshape(b * r, n))).view(b, r, 3)
    d_modes = softmax_backward(d_modes, s["modes"])
    d_backward, d_content, d_forward = (s["modes"].unsqueeze(-1) * d_read.unsqueeze(-2)).unbind(2)
    d_key, d_beta, d_mask, d_mem = content_backward(d_content, s["read"], s["inverse"][1], new_memory,
                                                    x["read_keys"].view(b, r, -1), s["masks"][1], k)
    parts = {"read_keys": d_key.flatten(1), "read_beta": d_beta, "modes": d_modes.flatten(1)}
    if d_mask is not None:
        parts["read_mask"] = d_mask.flatten(1)
    d_directions = torch.cat([d_forward, d_backward], 1)  # (B, 2R, N)
    if lay.link_sharpness:
        dz = softmax_backward(d_directions, torch.cat(s["directions"], 1))
        parts["link_strengths"] = (dz * s["logs"]).sum(-1)
        d_directions = dz.mul_(s["strengths"]).div_(torch.cat(s["raw"], 1) + k.log_floor)
    return d_memory.add_(d_mem), *d_directions.chunk(2, 1), parts


def _write_backward(s: dict[str, Any], d_memory: Tensor, d_write: Tensor, lay: Any, k: Constants) -> tuple:
    """Through M_t = M' ∘ (E - w^w e^T) + w^w v^T, w^w = g^w (g^a a + (1 - g^a) c^w) and the write content lookup."""
    w, erase, x, gates = s["new_write"], s["erase"], s["x"], s["gates"]
    d_keep = d_memory * s["erased"]  # (B, N, W)
    d_write = d_write + torch.baddbmm(torch.bmm(d_memory, _column(x["vector"])), d_keep, _column(erase),
                                      alpha=-1).squeeze(-1)
    row = w.unsqueeze(1)  # (B, 1, N)
    d_erase, d_vector = torch.bmm(row, d_keep).squeeze(1).neg_(), torch.bmm(row, d_memory).squeeze(1)
    d_mix = d_write * gates[1]
    d_alloc = d_mix * gates[0]
    memory = s["state"][0]
    d_key, d_beta, d_mask, d_prev = content_backward((d_mix - d_alloc).unsqueeze(1), s["write"], s["inverse"][0],
                                                     memory, x["write_key"].unsqueeze(1), s["masks"][0], k)
    if lay.deallocation:  # M' = M ∘ ψ
        d_erased = d_memory * s["keep"]
        d_psi = (d_erased * memory).sum(-1)
        d_prev = d_prev.addcmul_(d_erased, s["psi"].unsqueeze(-1))
    else:
        d_psi, d_prev = None, d_prev.addcmul_(d_memory, s["keep"])
    parts = {"write_key": d_key.flatten(1), "write_beta": d_beta, "erase": d_erase, "vector": d_vector,
             "alloc_gate": (d_mix * s["alloc_minus_content"]).sum(-1, keepdim=True),
             "write_gate": (d_write * s["mix"]).sum(-1, keepdim=True)}
    if d_mask is not None:
        parts["write_mask"] = d_mask.flatten(1)
    return d_prev, d_psi, allocation_backward(d_alloc, s["alloc"][0], s["alloc_fixed"], k), parts


def _usage_backward(s: dict[str, Any], d_usage: Tensor, d_psi: Tensor | None, d_read: Tensor, k: Constants) -> tuple:
    """Through u_t = (u + w^w - u ∘ w^w) ∘ ψ, ψ = Π_i (1 - f^i w^{r,i}): the previous usage and write weightings,
    the free gates; adds to the previous read weightings' gradient `d_read`."""
    read_w = s["state"][4]
    psi, factors, free = s["psi"], s["factors"], s["free"]
    d_psi = d_usage * s["kept"] if d_psi is None else d_psi.addcmul_(d_usage, s["kept"])
    d_kept = d_usage * psi
    if factors.shape[1] == 1:
        d_factors = d_psi.unsqueeze(1)
    else:  # each factor's gradient: d_psi times the others
        d_factors = torch.stack([torch.cat([factors[:, :i], factors[:, i + 1 :]], 1).prod(1)
                                 for i in range(factors.shape[1])], 1) * d_psi.unsqueeze(1)
    d_free = -(d_factors * read_w).sum(-1)
    d_read = d_read.addcmul_(d_factors, free.unsqueeze(-1), value=-1)
    return d_kept * s["unwritten_before"], d_kept * s["unused_before"], d_read, d_free


def _over_steps(stash: list[dict[str, Any]], key: str, index: int | None = None) -> Tensor:
    """Every step's stash[key] (or stash[key][index]), stacked (T, ...)."""
    return torch.stack([s[key] if index is None else s[key][index] for s in stash])


def prepare(stash: list[dict[str, Any]], k: Constants) -> None:
    """What the backward's steps need of the forward alone, computed for all steps at once and added to each step's
    stash: a few operations per sequence instead of per step (at batch 1 each costs mostly its dispatch)."""
    inverse = []
    for lookup in ("write", "read"):
        for i in (2, 3):  # the keys' norms |k|, the memory's |m|: 1 / norm² above the cosine's floor, else 0
            norms = _over_steps(stash, lookup, i)
            inverse.append(torch.where(norms >= k.floor, norms.square().reciprocal(), k.zero).unbind(0))
    usage, before = _over_steps(stash, "alloc", 1), _over_steps(stash, "alloc", 2)  # sorted (T, B, N), P
    alloc = (k.one - usage, before, torch.cumprod(F.pad(usage[..., 1:-1], (1, 0), value=1.0), -1),
             usage[..., :1] > k.zero, usage[..., 1:], before[..., 1:])
    a_minus_c = _over_steps(stash, "allocation") - _over_steps(stash, "write_content").squeeze(2)
    state = [_over_steps(stash, "state", i) for i in (1, 5)]  # u_{t-1}, w^w_{t-1}
    per_step = zip(*inverse, *(a.unbind(0) for a in alloc), a_minus_c.unbind(0), (k.one - state[1]).unbind(0),
                   (k.one - state[0]).unbind(0), strict=True)
    for s, (wq, wk, rq, rk, *fixed, minus, unwritten, unused) in zip(stash, per_step, strict=True):
        s.update(inverse=((wq, wk), (rq, rk)), alloc_fixed=tuple(fixed), alloc_minus_content=minus,
                 unwritten_before=unwritten, unused_before=unused)


def memory_backward(s: dict[str, Any], grads: tuple[Tensor, ...], d_reads: Tensor, lay: Any, work: Tensor,
                    k: Constants) -> tuple:
    """The gradient of the interface vector after its activations and the previous state's (M, u, L, p, w^r, w^w)
    from the new state's gradients `grads` and the reads' `d_reads (B, R, W)`; L's gradient is written into `work`,
    and that of L_t in `grads` overwritten (the spare for the step before)."""
    d_memory, d_usage, d_link, d_prec, d_read, d_write = grads
    memory, _, link, precedence, read_w, _ = s["state"]
    new_write = s["new_write"]
    d_memory, d_forward, d_backward, parts = _read_backward(s, d_read, d_reads, d_memory, lay, k)
    d_prec_prev = s["unwritten"] * d_prec  # p_t = (1 - Σ w^w) p_{t-1} + w^w
    d_write = d_write + d_prec - (d_prec * precedence).sum(-1, keepdim=True)
    d_link, d_w, d_p, d_read_prev = link_backward(d_link, d_forward, d_backward, link, new_write, precedence, read_w,
                                                  s["new_link"], work, k.one)
    d_memory, d_psi, d_alloc_usage, write_parts = _write_backward(s, d_memory, d_write.add_(d_w), lay, k)
    d_usage_prev, d_write_prev, d_read_prev, d_free = _usage_backward(s, d_usage + d_alloc_usage, d_psi, d_read_prev, k)
    parts |= write_parts | {"free": d_free}
    d_xi = torch.cat([parts[name] for name in s["x"]], -1)
    return d_xi, (d_memory, d_usage_prev, d_link, d_prec_prev.add_(d_p), d_read_prev, d_write_prev)
