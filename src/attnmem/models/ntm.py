"""Neural Turing Machine (Graves et al. 2014), batched: one Python loop over time steps only."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import Cosine
from attnmem.attention.scores import score_factory
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.core.float32 import in_float32
from attnmem.models.contract import CarriesState, ReadHeads
from attnmem.models.ntm_sequence import SHARPEN_EPS, Sizes, ntm_sequence

__all__ = ["NTM", "NTMState", "content_weights", "interpolate", "read", "sharpen", "shift", "write"]

CONTROLLERS = ("lstm", "feedforward")
MEMORY_INITS = ("constant", "learned", "random")


class NTMState(NamedTuple):
    """What the NTM carries from step t - 1 to step t (§3): controller state, reads, weightings, memory.

    Attributes:
        hidden: h (B, C), the controller's output.
        cell: c (B, C), the LSTM controller's cell state (zeros, unused, with a feed-forward one).
        reads: r (B, R, M), the read vectors.
        weightings: w (B, R + W, N), the read heads' weightings, then the write heads'.
        memory: M (B, N, M), the memory.
    """

    hidden: Tensor
    cell: Tensor
    reads: Tensor
    weightings: Tensor
    memory: Tensor


def content_weights(similarity: Tensor, beta: Tensor) -> Tensor:
    """w^c = softmax(β K[k, M_i]) over locations (eq. 5); `similarity (B, H, N)`, `beta (B, H, 1)`."""
    return torch.softmax(beta * similarity, dim=-1)


def interpolate(content: Tensor, previous: Tensor, gate: Tensor) -> Tensor:
    """w^g = g w^c + (1 - g) w_{t-1} (eq. 7); `gate (B, H, 1)`."""
    return gate * content + (1 - gate) * previous


def shift(weights: Tensor, shift_weights: Tensor, offsets: Tensor) -> Tensor:
    """Circular convolution w̃(i) = Σ_k s_k w(i - o_k mod N) (eq. 8); `shift_weights (B, H, K)` over
    `offsets (K,)` = -k..k in order."""
    k, n = (len(offsets) - 1) // 2, weights.shape[-1]
    wrapped = torch.cat([weights[..., n - k :], weights, weights[..., :k]], -1)  # (B, H, N + 2k)
    windows = wrapped.unfold(-1, n, 1)  # (B, H, K, N): window j holds w(i + j - k), offset k - j
    return (shift_weights.flip(-1).unsqueeze(-2) @ windows).squeeze(-2)  # (B, H, N)


def sharpen(weights: Tensor, gamma: Tensor, eps: float = SHARPEN_EPS) -> Tensor:
    """w_i = w̃_i^γ / Σ_j w̃_j^γ (eq. 9), as softmax(γ log w̃); `gamma (B, H, 1)` ≥ 1; `eps` keeps log 0 finite."""
    return torch.softmax(gamma * torch.log(weights + eps), dim=-1)


def read(memory: Tensor, weights: Tensor) -> Tensor:
    """r = Σ_i w_i M_i (eq. 2): `memory (B, N, M)`, `weights (B, R, N)` -> (B, R, M)."""
    return weights @ memory


def write(memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    """M_t = M_{t-1} ∘ Π_h (1 - w_h e_hᵀ) + Σ_h w_h a_hᵀ (eqs. 3-4); `weights (B, W, N)`, `erase`/`add (B, W, M)`."""
    keep = 1 - weights.unsqueeze(-1) * erase.unsqueeze(-2)  # (B, W, N, M)
    keep = keep.squeeze(1) if keep.shape[1] == 1 else keep.prod(1)  # (B, N, M)
    return memory * keep + weights.transpose(1, 2) @ add


def _check_options(sizes: dict[str, int], *, controller: str, memory_init: str, shift_range: int) -> None:
    check_sizes("NTM", sizes)
    if controller not in CONTROLLERS:
        raise ValueError(f"NTM: controller must be one of {CONTROLLERS}, got {controller!r}")
    if memory_init not in MEMORY_INITS:
        raise ValueError(f"NTM: memory_init must be one of {MEMORY_INITS}, got {memory_init!r}")
    if shift_range < 0 or 2 * shift_range + 1 > sizes["memory_locations"]:
        raise ValueError(f"NTM: shift_range={shift_range} gives {2 * shift_range + 1} shifts, more than "
                         f"memory_locations={sizes['memory_locations']} (or is negative)")


class NTM(nn.Module, CarriesState, ReadHeads):
    """Neural Turing Machine, Graves, Wayne & Danihelka 2014, "Neural Turing Machines" (arXiv:1410.5401).

    Each step the controller (an LSTM, or a feed-forward layer) sees the input and the previous
    reads and emits, per head, a key k, key strength β = softplus, gate g = σ, shift weights
    s = softmax over `offsets` -shift_range..shift_range, and sharpening γ = 1 + softplus (§3.3.1-2,
    eqs. 5-9); write heads also emit erase e = σ and add a = tanh (§3.2, eqs. 3-4). Content
    addressing K[k, M_i] is the `score` (with `Cosine`, its `similarity`; β comes from the
    controller, not the score). Heads address the memory M_{t-1}; reads r_t are taken from it
    before the writes, and the output y_t = W [h_t; r_t] (logits).

    Memory init (`memory_init`, after Collier & Beel 2018, "Implementing Neural Turing Machines"):
    "constant" 1e-6 everywhere (their best), "learned" a parameter, "random" a fixed draw from
    N(0, 0.5²). Initial weightings are one-hot on location 0; initial reads are read with them.
    `forward(x)` returns the logits and the `NTMState` after the last step, from which a next call continues.
    `run_chunk` runs a piece of a sequence from a given state as an `Output`, for truncated BPTT
    (`task.tbptt_steps`); the sequence family trains it through `attnmem.tasks.sequence_nets.NTMSequence`.
    With cosine addressing (the default) it runs the fused loop of `models/ntm_sequence.py`, the same maths with
    a backward through time derived by hand; other scores run `step` in a loop under autograd.

    Args:
        input_size: width I of each step's input.
        output_size: width O of each step's output (logits).
        score: content addressing K[k, M_i]: a name ("cosine", "dot", ...), a score class or a factory
            `score(query_dim=, key_dim=)`.
        controller: "lstm" or "feedforward".
        controller_size: width C of the controller's output h.
        memory_locations: N, the memory's rows.
        memory_width: M, the width of a memory row.
        read_heads: R.
        write_heads: W.
        shift_range: the largest location shift k of the shift weights (2k + 1 offsets -k..k).
        memory_init: "constant", "learned" or "random" (above).
    """

    offsets: Tensor  # buffers (`initial_memory` a parameter when learned)
    initial_weights: Tensor
    initial_memory: Tensor

    def __init__(
        self,
        *,
        input_size: int,
        output_size: int,
        score: str | Callable[..., nn.Module] = "cosine",
        controller: str = "lstm",
        controller_size: int = 100,
        memory_locations: int = 128,
        memory_width: int = 20,
        read_heads: int = 1,
        write_heads: int = 1,
        shift_range: int = 1,
        memory_init: str = "constant",
    ) -> None:
        super().__init__()
        sizes = {"input_size": input_size, "output_size": output_size, "controller_size": controller_size,
                 "memory_locations": memory_locations, "memory_width": memory_width, "read_heads": read_heads,
                 "write_heads": write_heads}
        _check_options(sizes, controller=controller, memory_init=memory_init, shift_range=shift_range)
        n, m, heads = memory_locations, memory_width, read_heads + write_heads
        self.input_size, self.read_heads, self.write_heads, self.memory_width = input_size, read_heads, write_heads, m
        self.controller_size, self.lstm = controller_size, controller == "lstm"
        gates = 4 * controller_size if self.lstm else controller_size
        self.input_proj = nn.Linear(input_size, gates)  # applied to all steps at once
        self.recurrent_proj = nn.Linear(read_heads * m + (controller_size if self.lstm else 0), gates, bias=False)
        self.head_size = m + 3 + 2 * shift_range + 1  # k, β, g, s, γ
        self.heads_proj = nn.Linear(controller_size, heads * self.head_size + write_heads * 2 * m)
        self.output_proj = nn.Linear(controller_size + read_heads * m, output_size)
        content = score_factory(score, owner="NTM")(query_dim=m, key_dim=m)
        cosine = content if isinstance(content, Cosine) else None
        # Cosine's own β would be a second temperature, unused: keep only its similarity, not the module
        self.similarity: Callable[[Tensor, Tensor], Tensor] = content if cosine is None else cosine.similarity
        # cosine addressing runs the fused loop with its hand-derived backward (models/ntm_sequence.py)
        self.fused = None if cosine is None else Sizes(read_heads, write_heads, shift_range, self.lstm, cosine.eps)
        self.register_buffer("offsets", torch.arange(-shift_range, shift_range + 1), persistent=False)
        self.register_buffer("initial_weights", F.one_hot(torch.zeros(heads, dtype=torch.long), n).float())
        if memory_init == "learned":
            self.initial_memory = nn.Parameter(torch.randn(n, m) * 0.1)
        else:
            self.register_buffer("initial_memory", torch.full((n, m), 1e-6) if memory_init == "constant"
                                 else torch.randn(n, m) * 0.5)

    @in_float32  # β and the sharpening power γ amplify 16-bit rounding, and the weightings recur every step
    def address(self, params: Tensor, memory: Tensor, previous: Tensor) -> Tensor:
        """Weightings of all heads from their parameters (§3.3, Figure 2; eqs. 5-9).

        Args:
            params: each head's k, β, g, s and γ before their activations, side by side (`head_size`).
            memory: M_{t-1}, the memory the heads address.
            previous: w_{t-1}, the heads' previous weightings.

        Shapes:
            - params: (B, H, head_size), H = R + W heads
            - memory: (B, N, M)
            - previous: (B, H, N)
            - weightings: (B, H, N)

        Returns:
            w_t, the new weightings.
        """
        m = self.memory_width
        key, beta, gate, shifts, gamma = params.split([m, 1, 1, len(self.offsets), 1], dim=-1)
        weights = content_weights(self.similarity(key, memory), F.softplus(beta))
        weights = interpolate(weights, previous, torch.sigmoid(gate))
        weights = shift(weights, torch.softmax(shifts, dim=-1), self.offsets)
        return sharpen(weights, 1 + F.softplus(gamma))

    def step(self, x_gates: Tensor, state: NTMState) -> NTMState:
        """One time step: controller, addressing, reads from M_{t-1}, then the writes.

        Args:
            x_gates: the step's input through `input_proj` (the controller's gate projection).
            state: the state after the previous step.

        Shapes:
            - x_gates: (B, G), G = 4C with the LSTM, C feed-forward

        Returns:
            The state after this step.
        """
        h, c, memory = state.hidden, state.cell, state.memory
        b = h.shape[0]
        if self.lstm:
            gates = x_gates + self.recurrent_proj(torch.cat([state.reads.flatten(1), h], -1))
            i, f, g, o = gates.chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)  # (B, C)
        else:
            h = torch.tanh(x_gates + self.recurrent_proj(state.reads.flatten(1)))
        out = self.heads_proj(h)
        heads = self.read_heads + self.write_heads
        params, erase_add = out.split([heads * self.head_size, out.shape[-1] - heads * self.head_size], -1)
        weights = self.address(params.view(b, heads, self.head_size), memory, state.weightings)  # (B, R + W, N)
        read_w, write_w = weights.split([self.read_heads, self.write_heads], 1)
        reads = read(memory, read_w)  # (B, R, M)
        erase, add = erase_add.view(b, self.write_heads, 2 * self.memory_width).chunk(2, -1)
        memory = write(memory, write_w, torch.sigmoid(erase), torch.tanh(add))
        return NTMState(hidden=h, cell=c, reads=reads, weightings=weights, memory=memory)

    def initial_state(self, batch_size: int) -> NTMState:
        """The state before the first step: zero controller state, one-hot weightings, the initial memory, its reads.

        Args:
            batch_size: B.

        Returns:
            The initial `NTMState`, batched.
        """
        memory = self.initial_memory.expand(batch_size, -1, -1)  # (B, N, M)
        weights = self.initial_weights.expand(batch_size, -1, -1)  # (B, R + W, N)
        h = memory.new_zeros(batch_size, self.controller_size)
        reads = read(memory, weights[:, : self.read_heads])  # (B, R, M)
        return NTMState(hidden=h, cell=h, reads=reads, weightings=weights, memory=memory)

    def forward(self, x: Tensor, state: NTMState | None = None, *,
                return_attention: bool = False) -> tuple[Tensor, NTMState] | tuple[Tensor, NTMState, Tensor]:
        """Logits of a sequence, run from `state`, and the state after its last step.

        Args:
            x: the input sequence.
            state: where to start; default `initial_state`.
            return_attention: also return each step's weightings (read heads first).

        Shapes:
            - x: (B, T, input_size)
            - y: (B, T, output_size); weightings: (B, T, R + W, N)

        Returns:
            `(y, state)`, or `(y, state, weightings)` with `return_attention`.
        """
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"NTM expects x of shape (B, T, input_size={self.input_size}), got {tuple(x.shape)}")
        y, weights, state = self._sequence(x, self.initial_state(x.shape[0]) if state is None else state)
        return (y, state, weights) if return_attention else (y, state)

    def run_chunk(self, x: Tensor, state: NTMState) -> tuple[Output, NTMState]:
        """A piece of a sequence run from `state`, for truncated BPTT (`tasks/tbptt.py`).

        Args:
            x: the piece of the input sequence.
            state: the state after the previous piece (or `initial_state`).

        Shapes:
            - x: (B, T, input_size)
            - pred: (B, T, output_size); attention: per step (B, R + W, N)

        Returns:
            `(Output(pred, attention), state)`: the logits and each step's weightings, and the state after the
            last step.
        """
        y, weights, state = self._sequence(x, state)
        return Output(pred=y, attention=list(weights.unbind(1))), state

    def _sequence(self, x: Tensor, state: NTMState) -> tuple[Tensor, Tensor, NTMState]:
        """y (B, T, O), the weightings (B, T, R + W, N) and the last state of `x (B, T, I)` run from `state`."""
        x_gates = self.input_proj(x)  # (B, T, G): one matmul, one backward
        if self.fused is None:
            return self._run_steps(x_gates, state)
        hs, reads, weights, cell, memory = ntm_sequence(
            x_gates, state.hidden, state.cell, state.reads, state.weightings, state.memory, self.recurrent_proj.weight,
            self.heads_proj.weight, self.heads_proj.bias, self.fused)
        state = NTMState(hidden=hs[:, -1], cell=cell, reads=reads[:, -1], weightings=weights[:, -1], memory=memory)
        features = torch.cat([hs, reads.flatten(2)], -1)  # (B, T, C + R·M)
        return self.output_proj(features), weights, state

    def _run_steps(self, x_gates: Tensor, state: NTMState) -> tuple[Tensor, Tensor, NTMState]:
        hs, reads, attention = [], [], []
        for x_t in x_gates.unbind(1):  # (B, G) per step, no [:, t] per step
            state = self.step(x_t, state)
            hs.append(state.hidden)
            reads.append(state.reads.flatten(1))
            attention.append(state.weightings)
        features = torch.cat([torch.stack(hs, 1), torch.stack(reads, 1)], -1)  # (B, T, C + R·M)
        return self.output_proj(features), torch.stack(attention, 1), state
