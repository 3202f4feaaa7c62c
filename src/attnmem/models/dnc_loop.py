"""The DNC's time loop with cosine content lookup as one autograd node: `blocks.dnc.DNCCore`'s steps fused, and their
backward through time derived by hand (`models.dnc_loop_backward`). The same maths as `DNCCore.step` and
`DNCMemory` from an empty memory, without autograd's graph of ~200 nodes per time step. Under `torch.func.vmap` over
stacked weights (E DNCs, as `replicas` runs them) one call runs every member's rows, each group of rows with its own
weights, as the NTM's fused loop does. `tests/models/test_dnc_loop.py` checks it against `DNCCore` and autograd."""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from attnmem.blocks.dnc_memory import link_forward
from attnmem.core.autograd import Function
from attnmem.core.float32 import in_float32
from attnmem.models import fused
from attnmem.models.dnc_loop_backward import Constants, memory_backward, prepare
from attnmem.models.fused import affine, lstm_backward, weight_grad

__all__ = ["DNCLoop", "Layout", "dnc_loop"]


class Layout(NamedTuple):
    """What the fused loop needs to know of the DNC besides its tensors."""

    sizes: tuple[int, ...]  # the interface vector's parts (`DNCMemory.sizes`)
    read_heads: int
    memory_locations: int
    memory_width: int
    masking: bool
    deallocation: bool
    link_sharpness: bool
    clip: float  # the interface vector's bound
    eps: float  # the cosine's floor on norms
    groups: int = 0  # E > 0: the weights are E models' (E, ...), the rows of all else E groups of B (`vmap`)


def content(memory: Tensor, keys: Tensor, strengths: Tensor, mask: Tensor | None, eps: float) -> tuple:
    """softmax(β cos(k ∘ s, M ∘ s)) per head (`keys (B, H, W)`, `strengths (B, H)`) and the stash of its backward."""
    b, h, w = keys.shape
    if mask is not None:
        keys = (keys * mask).reshape(b * h, 1, w)
        memory = (memory.unsqueeze(1) * mask.unsqueeze(2)).reshape(b * h, -1, w)  # (B·H, N, W)
    qn = torch.linalg.vector_norm(keys, dim=-1, keepdim=True)  # (·, H, 1); not `Tensor.norm`: its Python wrapper
    kn = torch.linalg.vector_norm(memory, dim=-1).unsqueeze(1)  # (·, 1, N)
    denom = qn.clamp_min(eps) * kn.clamp_min(eps)
    similarity = (torch.bmm(keys, memory.mT) / denom).view(b, h, -1)
    weights = torch.softmax(strengths.unsqueeze(-1) * similarity, -1)
    return weights, (keys, memory, qn, kn, denom, similarity, weights, strengths)


def allocation(usage: Tensor, one: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
    """`blocks.dnc_memory.allocation` and what its backward needs: the order φ, the sorted usage, the products."""
    sorted_usage, phi = torch.sort(usage, dim=-1, stable=True)
    shifted = F.pad(sorted_usage[:, :-1], (1, 0), value=1.0)
    before = torch.cumprod(shifted, -1)
    # φ is a permutation: the scatter writes every entry
    return torch.empty_like(usage).scatter_(-1, phi, (one - sorted_usage) * before), (phi, sorted_usage, before)


# the interface vector's parts (`DNCMemory.sizes`' order) and their activations: 0 none, 1 σ, 2 oneplus = 1 + softplus
PARTS = {"read_keys": 0, "read_beta": 2, "write_key": 0, "write_beta": 2, "erase": 1, "vector": 0, "free": 1,
         "alloc_gate": 1, "write_gate": 1, "modes": 0, "write_mask": 1, "read_mask": 1, "link_strengths": 2}


def _names(lay: Layout) -> list[str]:
    return [*list(PARTS)[:10], *["write_mask", "read_mask"] * lay.masking, *["link_strengths"] * lay.link_sharpness]


def _step_parts(buffer: Tensor, lay: Layout) -> list[dict[str, Tensor]]:
    """Each step's parts by name of the interface vectors `buffer (T, B, I)`: views made once for the sequence
    (a split per step costs ~1 µs a part on CPU)."""
    columns = [part.unbind(0) for part in buffer.split(lay.sizes, -1)]
    return [dict(zip(_names(lay), step, strict=True)) for step in zip(*columns, strict=True)]


def activation_grads(pre: Tensor, lay: Layout) -> Tensor:
    """dξ'/dξ of each entry of the interface vectors `pre (..., I)` before the clip, ξ' = activation(clip(ξ)):
    σ' for σ, σ for oneplus, 1 for none, 0 where clipped. (The backward's one product for all activations.)"""
    kinds = torch.tensor([PARTS[name] for name, size in zip(_names(lay), lay.sizes, strict=True)
                          for _ in range(size)], device=pre.device)
    sig = torch.sigmoid(pre.clamp(-lay.clip, lay.clip))
    grads = torch.where(kinds == 1, sig * (1 - sig), torch.where(kinds == 2, sig, 1.0))
    return grads.masked_fill_((pre < -lay.clip) | (pre > lay.clip), 0)


def memory_step(xi: tuple[dict[str, Tensor], ...], state: tuple[Tensor, ...], lay: Layout, link_out: Tensor | None,
                k: Constants) -> tuple[tuple[Tensor, ...], dict[str, Any]]:
    """One step of `DNCMemory` from the interface vector's parts (ξ, σ(ξ), oneplus(ξ), each by name): the new
    (M, u, L, p, w^r, w^w) and the step's stash; L_t is written into `link_out` if given."""
    memory, usage, link, precedence, read_w, write_w = state
    b, r, w = memory.shape[0], lay.read_heads, lay.memory_width
    x, sig, plus = xi
    masks = (sig["write_mask"].view(b, 1, w), sig["read_mask"].view(b, r, w)) if lay.masking else (None, None)
    free = sig["free"]  # (B, R)
    factors = k.one - free.unsqueeze(-1) * read_w  # (B, R, N)
    psi = factors[:, 0] if r == 1 else factors.prod(1)
    kept = torch.addcmul(usage + write_w, usage, write_w, value=-1)
    new_usage = kept * psi
    write_content, write_stash = content(memory, x["write_key"].view(b, 1, w), plus["write_beta"], masks[0],
                                         lay.eps)
    alloc, alloc_stash = allocation(new_usage, k.one)
    gates = (sig["alloc_gate"], sig["write_gate"])  # (B, 1) each
    mix = torch.lerp(write_content.squeeze(1), alloc, gates[0])
    new_write = gates[1] * mix
    erased = memory * psi.unsqueeze(-1) if lay.deallocation else memory
    erase = sig["erase"]
    keep = torch.addcmul(k.one, new_write.unsqueeze(-1), erase.unsqueeze(1), value=-1)  # (B, N, W)
    new_memory = (erased * keep).addcmul_(new_write.unsqueeze(-1), x["vector"].unsqueeze(1))
    new_link, forward, backward = link_forward(link, new_write, precedence, read_w, link_out, k.one)
    directions: tuple[Tensor, ...] = (forward, backward)
    if lay.link_sharpness:
        strengths = plus["link_strengths"].view(b, 2 * r, 1)
        logs = torch.log(torch.cat(directions, 1) + k.log_floor)  # (B, 2R, N)
        directions = torch.softmax(strengths * logs, -1).chunk(2, 1)
    read_content, read_stash = content(new_memory, x["read_keys"].view(b, r, w), plus["read_beta"], masks[1],
                                       lay.eps)
    modes = torch.softmax(x["modes"].view(b, r, 3), -1)
    choices = torch.stack([directions[1], read_content, directions[0]], 2)  # (B, R, 3, N): backward, content, forward
    new_read = torch.bmm(modes.view(b * r, 1, 3), choices.view(b * r, 3, -1)).view(b, r, -1)
    unwritten = k.one - new_write.sum(-1, keepdim=True)
    new_precedence = torch.addcmul(new_write, unwritten, precedence)
    stash = dict(x=x, masks=masks, free=free, factors=factors, psi=psi, kept=kept, state=state, write=write_stash,
                 alloc=alloc_stash, allocation=alloc, write_content=write_content, gates=gates, mix=mix,
                 new_write=new_write, erased=erased, erase=erase, keep=keep, new_memory=new_memory, new_link=new_link,
                 directions=directions, read=read_stash, modes=modes, choices=choices, new_read=new_read,
                 unwritten=unwritten)
    if lay.link_sharpness:
        stash.update(strengths=strengths, logs=logs, raw=(forward, backward))
    return (new_memory, new_usage, new_link, new_precedence, new_read, new_write), stash


def _controller(x_t: Tensor, h: Tensor, c: Tensor, reads: Tensor, w_rec_t: Tensor, groups: int) -> tuple:
    """h_t, c_t of the LSTM controller on χ_t = [x_t; r_{t-1}] and its stash."""
    prev_in = torch.cat([reads.flatten(1), h], 1)
    z = affine(x_t, prev_in, w_rec_t, groups)  # (B, 4C)
    size = h.shape[-1]
    act, cand = torch.sigmoid(z), torch.tanh(z.narrow(1, 2 * size, size))  # i, f, (unused), o; g
    i, f, _, o = act.chunk(4, 1)
    c_new = torch.addcmul(f * c, i, cand)
    tc = torch.tanh(c_new)
    return o * tc, c_new, {"prev_in": prev_in, "act": act, "cand": cand, "c_prev": c, "tc": tc}


_SPARE: list[Tensor] = []  # a sequence's link matrices (T, B, N, N) kept for the next call: see `_links`
_LEASES = itertools.count()


def _links(steps: int, like: Tensor, n: int) -> Tensor:
    """A (T, B, N, N) buffer for the L_t of a sequence: the spare one a backward gave back, else a new one.

    A fresh tensor costs a page fault per 4 KiB on its first touch, on CPU about as much as the step's arithmetic on
    L_t (docs/benchmarks.md, issue 53); a call takes the spare, its backward gives it back (a graph never
    backwarded keeps its own). Each take is a new `lease`: a backward whose buffer was taken since fails."""
    shape = (steps, like.shape[0], n, n)
    spare = _SPARE[-1] if _SPARE else None
    links = _SPARE.pop() if spare is not None and spare.shape == shape and spare.dtype == like.dtype \
        and spare.device == like.device else like.new_empty(shape)
    links.lease = next(_LEASES)  # type: ignore[attr-defined]
    return links


def _take_back(links: Tensor, lease: int) -> None:
    """Before a backward: its L_t buffer, if an earlier backward of the same graph gave it back, must be unused."""
    if links.lease != lease:  # type: ignore[attr-defined]  # taken by another call: its L_t are gone
        raise RuntimeError("DNC: a second backward through the fused loop after another DNC call; backward before "
                           "the next call, or set DNC.fused = None")
    _SPARE[:] = [spare for spare in _SPARE if spare is not links]


def _run(x_gates: Tensor, w_rec: Tensor, w_if: Tensor, b_if: Tensor, lay: Layout,
         stash: bool = True) -> tuple[Tensor, Tensor, Tensor, list]:
    """hs (B, T, C), reads (B, T, R, W), weightings (B, T, R + 1, N) from an empty memory, and with `stash` each
    step's stash and last the buffer of the L_t (without, under `vmap` too: nothing kept)."""
    b, n, w, r = x_gates.shape[0], lay.memory_locations, lay.memory_width, lay.read_heads
    zeros, size = x_gates.new_zeros, x_gates.shape[-1] // 4
    h = c = zeros(b, size)
    state: tuple[Tensor, ...] = (zeros(b, n, w), zeros(b, n), zeros(b, n, n), zeros(b, n), zeros(b, r, n), zeros(b, n))
    reads = zeros(b, r, w)
    hs, all_reads, all_weights, stashes = [], [], [], []
    steps = x_gates.shape[1]
    w_rec_t, w_if_t, links = w_rec.mT, w_if.mT, _links(steps, x_gates, n) if stash else None
    k = Constants.like(x_gates, lay.eps)
    acts = x_gates.new_empty(3, steps, b, w_if.shape[-2])  # ξ clipped, σ(ξ), oneplus(ξ) of every step
    parts = zip(*(_step_parts(a, lay) for a in acts), strict=True)
    rows = zip(*(a.unbind(0) for a in acts), strict=True)
    for x_t, link_out, xi, (clipped, sig, plus) in zip(x_gates.unbind(1), [None] * steps if links is None else
                                                         links.unbind(0), parts, rows, strict=True):
        h, c, controller = _controller(x_t, h, c, reads, w_rec_t, lay.groups)
        pre = affine(b_if, h, w_if_t, lay.groups)
        torch.clamp(pre, -lay.clip, lay.clip, out=clipped)
        torch.sigmoid(clipped, out=sig)
        torch.logaddexp(clipped, k.zero, out=plus).add_(k.one)  # 1 + softplus = 1 + log(1 + e^ξ)
        state, step = memory_step(xi, state, lay, link_out, k)
        reads = torch.bmm(state[4], state[0])  # r = w^r M: (B, R, W)
        hs.append(h)
        all_reads.append(reads)
        all_weights.append(torch.cat([state[4], state[5].unsqueeze(1)], 1))
        if links is not None:
            stashes.append(controller | step | {"pre": pre})
    return torch.stack(hs, 1), torch.stack(all_reads, 1), torch.stack(all_weights, 1), [*stashes, links]


class _Box:
    """Carries the forward's per-step stash to `setup_context` (a Function's forward has no `ctx`)."""

    stash: list | None = None


class DNCLoop(Function):
    """The DNC over a sequence from an empty memory (`_run`) with its backward through time."""

    @staticmethod
    def forward(x_gates: Tensor, w_rec: Tensor, w_if: Tensor, b_if: Tensor, lay: Layout,
                box: _Box) -> tuple[Tensor, Tensor, Tensor]:
        hs, reads, weights, box.stash = _run(x_gates, w_rec, w_if, b_if, lay)
        return hs, reads, weights

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
        ctx.lay, ctx.stash, inputs[-1].stash = inputs[4], inputs[-1].stash, None
        ctx.lease = ctx.stash[-1].lease
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs[1], inputs[2], output[0])

    @staticmethod
    def vmap(info: Any, in_dims: tuple, *args: Any) -> tuple[tuple[Tensor, ...], tuple[int, ...]]:
        """`vmap` over stacked weights (E models): one call on all their rows, each group with its weights."""
        *tensors, lay, _ = args
        r, stacked = info.batch_size, fused.stacked(info, in_dims, tensors, lay.groups, "DNC")
        out = DNCLoop.apply(stacked[0].flatten(0, 1), *stacked[1:], lay._replace(groups=r), _Box())
        return tuple(o.unflatten(0, (r, -1)) for o in out), (0, 0, 0)

    @staticmethod
    def backward(ctx: Any, d_hs: Tensor | None, d_reads: Tensor | None,
                 d_weights: Tensor | None) -> tuple[Tensor | None, ...]:
        w_rec, w_if, hs = ctx.saved_tensors
        lay, (*stash, links), groups = ctx.lay, ctx.stash, ctx.lay.groups
        _take_back(links, ctx.lease)
        r, rw = lay.read_heads, lay.read_heads * lay.memory_width
        grads = tuple(torch.zeros_like(t) for t in stash[-1]["state"])  # the last state's: M, u, L, p, w^r, w^w
        work = torch.empty_like(grads[2])  # L's gradients ping-pong between two (B, N, N) buffers
        d_h, d_c = torch.zeros_like(hs[:, 0]), torch.zeros_like(hs[:, 0])
        d_r = hs.new_zeros(hs.shape[0], r, lay.memory_width)
        d_pres, d_zs = [], []
        k = Constants.like(hs, lay.eps)
        grads_xi = activation_grads(torch.stack([s["pre"] for s in stash], 1), lay).unbind(1)  # T of (B, I)
        prepare(stash, k)
        nones = [None] * len(stash)
        for t, d_r_t, d_h_t in zip(reversed(range(len(stash))), *(nones if g is None else reversed(g.unbind(1))
                                                                  for g in (d_reads, d_hs)), strict=True):
            s = stash[t]
            d_r = d_r if d_r_t is None else d_r + d_r_t
            d_h = d_h if d_h_t is None else d_h + d_h_t
            if d_weights is not None:
                grads = (*grads[:4], grads[4] + d_weights[:, t, :r], grads[5] + d_weights[:, t, r])
            spare = grads[2]
            d_xi, grads = memory_backward(s, grads, d_r, lay, work, k)
            work = spare
            d_pre = d_xi.mul_(grads_xi[t])
            d_z, d_c = lstm_backward(affine(d_h, d_pre, w_if, groups), d_c, s)
            d_prev_in = affine(None, d_z, w_rec, groups)  # (B, R·W + C)
            d_r, d_h = d_prev_in[:, :rw].view_as(d_r), d_prev_in[:, rw:]
            d_pres.append(d_pre)
            d_zs.append(d_z)
        _SPARE[:] = [links]  # the buffer serves the next call (or this graph's next backward, if none took it)
        d_pre_all, d_z_all = torch.stack(d_pres[::-1], 1), torch.stack(d_zs[::-1], 1)
        d_w_rec = weight_grad(d_z_all, torch.stack([s["prev_in"] for s in stash], 1), groups)
        d_w_if = weight_grad(d_pre_all, hs, groups)
        d_b_if = d_pre_all.reshape(max(groups, 1), -1, d_pre_all.shape[-1]).sum(1)
        return d_z_all, d_w_rec, d_w_if, d_b_if if groups else d_b_if[0], None, None


@in_float32  # as `DNCMemory`: strengths and products over N locations recur every step
def dnc_loop(x_gates: Tensor, w_rec: Tensor, w_if: Tensor, b_if: Tensor, lay: Layout) -> tuple[Tensor, Tensor, Tensor]:
    """hs (B, T, C), reads (B, T, R, W) and weightings (B, T, R + 1, N: the read heads', then the write head's) of
    the DNC run over `x_gates (B, T, 4C)` (the input's gate projection) from an empty memory; differentiable
    through `x_gates` and the weights `w_rec (4C, R·W + C)`, `w_if (I, C)`, `b_if (I,)`."""
    if torch.is_grad_enabled():  # (under vmap, batched tensors do not tell whether they require grad)
        return DNCLoop.apply(x_gates, w_rec, w_if, b_if, lay, _Box())
    return _run(x_gates, w_rec, w_if, b_if, lay, stash=False)[:3]
