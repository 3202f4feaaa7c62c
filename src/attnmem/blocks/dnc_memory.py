"""The DNC's memory (Graves et al. 2016, Methods): content lookup, dynamic allocation, temporal links, reads.

Pure functions of the Methods' equations, and `DNCMemory`, which turns an interface vector ξ_t into one
memory step. Both the sequence model (`models/dnc.py`) and the bAbI reader (`models/dnc_qa.py`) use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.core.autograd import Function
from attnmem.core.float32 import in_float32

__all__ = [
    "DNCMemory",
    "MemoryState",
    "allocation",
    "directional_weights",
    "link_backward",
    "link_forward",
    "link_step",
    "link_update",
    "oneplus",
    "precedence_update",
    "read_weights",
    "retention",
    "usage_update",
    "write_memory",
]

EPS = 1e-6  # keeps log 0 finite in the link sharpening


class MemoryState(NamedTuple):
    """What the memory carries from step t - 1 to t (Methods, "Memory addressing")."""

    memory: Tensor  # M (B, N, W)
    usage: Tensor  # u (B, N)
    link: Tensor  # L (B, N, N)
    precedence: Tensor  # p (B, N)
    read_weights: Tensor  # w^r (B, R, N)
    write_weights: Tensor  # w^w (B, N)
    reads: Tensor  # r (B, R, W)


def oneplus(x: Tensor) -> Tensor:
    """oneplus(x) = 1 + log(1 + e^x), the strengths' range [1, ∞)."""
    return 1 + F.softplus(x)


def retention(free_gates: Tensor, read_weights: Tensor) -> Tensor:
    """ψ_t = Π_i (1 - f^i_t w^{r,i}_{t-1}): `free_gates (B, R)`, `read_weights (B, R, N)` -> (B, N)."""
    return (1 - free_gates.unsqueeze(-1) * read_weights).prod(1)


def usage_update(usage: Tensor, write_weights: Tensor, psi: Tensor) -> Tensor:
    """u_t = (u_{t-1} + w^w_{t-1} - u_{t-1} ∘ w^w_{t-1}) ∘ ψ_t, all (B, N)."""
    return (usage + write_weights - usage * write_weights) * psi


def allocation(usage: Tensor) -> Tensor:
    """a_t[φ_j] = (1 - u_t[φ_j]) Π_{i<j} u_t[φ_i], φ the locations by ascending usage (B, N) -> (B, N).

    Ties are broken by the lowest index first (a stable sort), so equal usages allocate in order.
    """
    sorted_usage, phi = torch.sort(usage, dim=-1, stable=True)  # (B, N)
    before = torch.cumprod(torch.cat([torch.ones_like(sorted_usage[:, :1]), sorted_usage[:, :-1]], -1), -1)
    return torch.zeros_like(usage).scatter(-1, phi, (1 - sorted_usage) * before)


def write_memory(memory: Tensor, write_weights: Tensor, erase: Tensor, write: Tensor) -> Tensor:
    """M_t = M_{t-1} ∘ (E - w^w e^T) + w^w v^T: `memory (B, N, W)`, `write_weights (B, N)`, `erase`/`write (B, W)`."""
    w = write_weights.unsqueeze(-1)  # (B, N, 1)
    return memory * (1 - w * erase.unsqueeze(1)) + w * write.unsqueeze(1)


def link_update(link: Tensor, write_weights: Tensor, precedence: Tensor) -> Tensor:
    """L_t[i, j] = (1 - w^w[i] - w^w[j]) L_{t-1}[i, j] + w^w[i] p_{t-1}[j], L_t[i, i] = 0: (B, N, N)."""
    w_i, w_j = write_weights.unsqueeze(-1), write_weights.unsqueeze(-2)  # (B, N, 1), (B, 1, N)
    link = torch.baddbmm((1 - w_i - w_j) * link, w_i, precedence.unsqueeze(-2))  # + w^w p^T in one fused op
    # L_{t-1} has a zero diagonal, so only w^w[i] p[i] lands on it: zeroed in place (no N × N mask product)
    link.diagonal(dim1=-2, dim2=-1).zero_()
    return link


def precedence_update(precedence: Tensor, write_weights: Tensor) -> Tensor:
    """p_t = (1 - Σ_i w^w_t[i]) p_{t-1} + w^w_t, (B, N)."""
    return (1 - write_weights.sum(-1, keepdim=True)) * precedence + write_weights


def directional_weights(link: Tensor, read_weights: Tensor) -> tuple[Tensor, Tensor]:
    """Forward f^i_t = L_t w^{r,i}_{t-1} and backward b^i_t = L_t^T w^{r,i}_{t-1}, each (B, R, N)."""
    return read_weights @ link.transpose(1, 2), read_weights @ link


def link_forward(link: Tensor, write_weights: Tensor, precedence: Tensor, read_weights: Tensor,
                 out: Tensor | None = None, one: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor]:
    """L_t (into `out` if given), f_t and b_t (`link_update`, `directional_weights`) without autograd's
    temporaries (no gradient); `one`: 1 (a 0-dim tensor spares torch's copy of a Python scalar)."""
    # (1 - w_i - w_j) L + w_i p_j = lerp(L, p_j, w_i) - L w_j: two passes over (B, N, N), not three
    w_i, w_j = write_weights.unsqueeze(-1), write_weights.unsqueeze(-2)  # (B, N, 1), (B, 1, N)
    new = torch.lerp(link, precedence.unsqueeze(-2), w_i) if out is None else \
        torch.lerp(link, precedence.unsqueeze(-2), w_i, out=out)
    new.addcmul_(link, w_j, value=-1).diagonal(dim1=-2, dim2=-1).zero_()
    # on CPU a matrix times columns is faster than rows times its transpose: f = (L_t w^r^T)^T
    return new, torch.bmm(new, read_weights.mT).mT, torch.bmm(read_weights, new)


def link_backward(grad_link: Tensor | None, grad_forward: Tensor, grad_backward: Tensor, link: Tensor, w: Tensor,
                  p: Tensor, rw: Tensor, new: Tensor,
                  work: Tensor | None = None, one: float | Tensor = 1.0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gradients of L_{t-1}, w^w_t, p_{t-1}, w^r_{t-1} from those of `link_forward`'s L_t (None: zero), f_t, b_t.

    With `work`, a spare (B, N, N) tensor, `grad_link` is overwritten and L_{t-1}'s gradient written into `work`:
    no fresh N × N tensor (a time loop's ping-pong of two buffers; fresh ones cost page faults on CPU)."""
    # f = rw L_t^T, b = rw L_t: d rw = g_f L_t + g_b L_t^T, dL_t = G + g_f^T rw + rw^T g_b
    grad_rw = torch.bmm(grad_forward, new).add_(torch.bmm(new, grad_backward.mT).mT)
    d = torch.zeros_like(new) if grad_link is None else grad_link if work is not None else grad_link.clone()
    if rw.shape[1] == 1:  # one head: two outer products (~2× faster on CPU than a batched product of width 1)
        d.addcmul_(grad_forward.mT, rw).addcmul_(rw.mT, grad_backward)
    else:
        d.baddbmm_(grad_forward.mT, rw).baddbmm_(rw.mT, grad_backward)
    d.diagonal(dim1=-2, dim2=-1).zero_()  # L_t[i, i] = 0 whatever the inputs
    # L_t = (1 - w_i - w_j) L_{t-1} + w_i p_j off the diagonal
    s = torch.mul(d, link) if work is None else torch.mul(d, link, out=work)  # (B, N, N)
    # p as a column with the strides of a transposed row: MKL's batched product takes a path ~8× faster on CPU
    grad_w = torch.bmm(d, p.unsqueeze(-2).mT).squeeze(-1).sub_(s.sum(-1)).sub_(s.sum(-2))
    grad_p = torch.bmm(w.unsqueeze(1), d).squeeze(1)
    i, j = (one - w).unsqueeze(-1), w.unsqueeze(-2)
    grad_prev = (torch.sub(i, j) if work is None else torch.sub(i, j, out=work)).mul_(d)
    return grad_prev, grad_w, grad_p, grad_rw


class _LinkStep(Function):
    """`link_update` then `directional_weights` as one step with a hand-written backward.

    Autograd keeps several (B, N, N) temporaries per step and walks a dozen N × N operations back, one a
    slow batched matrix × column; this step writes in place and keeps only L_{t-1} and L_t (kept anyway).
    """

    generate_vmap_rule = True  # torch.func.vmap batches it (its in-place adds through the slower fallback)

    @staticmethod
    def forward(link: Tensor, write_weights: Tensor, precedence: Tensor,
                read_weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return link_forward(link, write_weights, precedence, read_weights)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, ...], output: tuple[Tensor, ...]) -> None:
        ctx.save_for_backward(*inputs, output[0])

    @staticmethod
    def backward(ctx: Any, grad_link: Tensor, grad_forward: Tensor,
                 grad_backward: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return link_backward(grad_link, grad_forward, grad_backward, *ctx.saved_tensors)


def link_step(link: Tensor, write_weights: Tensor, precedence: Tensor,
              read_weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """L_t, f_t and b_t (`link_update`, `directional_weights`) from L_{t-1}, w^w_t, p_{t-1} and w^r_{t-1}."""
    return cast("tuple[Tensor, Tensor, Tensor]", _LinkStep.apply(link, write_weights, precedence, read_weights))


def read_weights(backward: Tensor, content: Tensor, forward: Tensor, modes: Tensor) -> Tensor:
    """w^{r,i}_t = π^i[1] b^i + π^i[2] c^{r,i} + π^i[3] f^i: weightings (B, R, N), `modes (B, R, 3)`."""
    return modes[..., :1] * backward + modes[..., 1:2] * content + modes[..., 2:] * forward


def sharpen(weights: Tensor, strength: Tensor) -> Tensor:
    """S(d, s)_i = d_i^s / Σ_j d_j^s (Csordás & Schmidhuber 2019, §3.3) as softmax(s log d); `strength (B, R, 1)`."""
    return torch.softmax(strength * torch.log(weights + EPS), dim=-1)


class DNCMemory(nn.Module):
    """One memory step of the DNC from the interface vector ξ_t (Graves et al. 2016, Methods).

    ξ_t holds R read keys and strengths β^r = oneplus, a write key and strength, erase e = σ and write
    v vectors, R free gates f = σ, the allocation and write gates g^a, g^w = σ and R read modes π =
    softmax over (backward, content, forward). Content lookup C(M, k, β) = softmax(β D(k, M)) takes
    D from the `score` (with `Cosine`, its similarity; β comes from ξ_t). Options of Csordás &
    Schmidhuber 2019 (ICLR), off by default: `masking` (a key mask s = σ per head: D(k ∘ s, M ∘ s)),
    `deallocation` (freed locations are erased: M_{t-1} ∘ ψ_t before the write), `link_sharpness`
    (forward and backward weightings sharpened by strengths oneplus).
    """

    def __init__(self, *, score: Callable[..., nn.Module], memory_locations: int = 128, memory_width: int = 20,
                 read_heads: int = 1, masking: bool = False, deallocation: bool = False,
                 link_sharpness: bool = False) -> None:
        super().__init__()
        check_sizes("DNC", {"memory_locations": memory_locations, "memory_width": memory_width,
                            "read_heads": read_heads})
        n, w, r = memory_locations, memory_width, read_heads
        self.memory_locations, self.memory_width, self.read_heads = n, w, r
        self.masking, self.deallocation, self.link_sharpness = masking, deallocation, link_sharpness
        # read keys, β^r, write key, β^w, e, v, f, g^a, g^w, π; then the masks and link strengths if on
        self.sizes = [r * w, r, w, 1, w, w, r, 1, 1, 3 * r] + [w, r * w] * masking + [2 * r] * link_sharpness
        self.interface_size = sum(self.sizes)
        content = score(query_dim=w, key_dim=w)
        # Cosine's own β would be a second temperature, unused: keep only its similarity, not the module
        self.similarity = cast(Callable[[Tensor, Tensor], Tensor],
                               content.similarity if hasattr(content, "similarity") else content)

    def initial_state(self, batch_size: int, like: Tensor) -> MemoryState:
        """An empty memory: zero contents, usage, links, precedence, weightings and reads."""
        b, n, w, r = batch_size, self.memory_locations, self.memory_width, self.read_heads
        zeros = like.new_zeros
        return MemoryState(memory=zeros(b, n, w), usage=zeros(b, n), link=zeros(b, n, n), precedence=zeros(b, n),
                           read_weights=zeros(b, r, n), write_weights=zeros(b, n), reads=zeros(b, r, w))

    def content(self, memory: Tensor, keys: Tensor, strengths: Tensor, mask: Tensor | None) -> Tensor:
        """C(M, k, β) per head: `keys (B, H, W)`, `strengths (B, H)`, `mask (B, H, W)` or None -> (B, H, N)."""
        if mask is None:
            similarity = self.similarity(keys, memory)  # (B, H, N)
        else:
            b, h, w = keys.shape
            masked = (memory.unsqueeze(1) * mask.unsqueeze(2)).reshape(b * h, -1, w)  # (B·H, N, W)
            similarity = self.similarity((keys * mask).reshape(b * h, 1, w), masked).view(b, h, -1)
        return torch.softmax(strengths.unsqueeze(-1) * similarity, dim=-1)

    @in_float32  # strengths and products over N locations recur every step: 16-bit rounding would compound
    def forward(self, interface: Tensor, state: MemoryState) -> MemoryState:
        """The memory after one step: write (allocation or content), then links, then reads (Methods)."""
        b, r, w = interface.shape[0], self.read_heads, self.memory_width
        parts = list(interface.split(self.sizes, dim=-1))
        read_keys, read_beta, write_key, write_beta, erase, vector, free, alloc_gate, write_gate, modes = parts[:10]
        write_mask, read_mask = (torch.sigmoid(parts[10]).view(b, 1, w), torch.sigmoid(parts[11]).view(b, r, w)) \
            if self.masking else (None, None)
        psi = retention(torch.sigmoid(free), state.read_weights)  # (B, N)
        usage = usage_update(state.usage, state.write_weights, psi)
        write_content = self.content(state.memory, write_key.view(b, 1, w), oneplus(write_beta), write_mask)
        alloc_gate, write_gate = torch.sigmoid(alloc_gate), torch.sigmoid(write_gate)  # (B, 1)
        write_w = write_gate * (alloc_gate * allocation(usage) + (1 - alloc_gate) * write_content.squeeze(1))
        memory = state.memory * psi.unsqueeze(-1) if self.deallocation else state.memory
        memory = write_memory(memory, write_w, torch.sigmoid(erase), vector)  # (B, N, W)
        link, forward, backward = link_step(state.link, write_w, state.precedence, state.read_weights)  # f, b (B, R, N)
        if self.link_sharpness:
            s_forward, s_backward = oneplus(parts[-1]).view(b, 2 * r, 1).chunk(2, dim=1)
            forward, backward = sharpen(forward, s_forward), sharpen(backward, s_backward)
        content = self.content(memory, read_keys.view(b, r, w), oneplus(read_beta), read_mask)
        weights = read_weights(backward, content, forward, torch.softmax(modes.view(b, r, 3), dim=-1))
        precedence = precedence_update(state.precedence, write_w)
        return MemoryState(memory=memory, usage=usage, link=link, precedence=precedence, read_weights=weights,
                           write_weights=write_w, reads=weights @ memory)
