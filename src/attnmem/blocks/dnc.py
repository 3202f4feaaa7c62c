"""The DNC core (Graves et al. 2016): an LSTM controller and its memory, stepped over time in one batched loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.dnc_memory import DNCMemory, MemoryState

__all__ = ["DNCCore", "DNCState", "weightings"]


class DNCState(NamedTuple):
    """The controller's state and the memory's, carried from step t - 1 to t."""

    hidden: Tensor  # h (B, C)
    cell: Tensor  # c (B, C)
    memory: MemoryState


class DNCCore(nn.Module):
    """Controller + memory of the DNC, Graves et al. 2016, "Hybrid computing using a neural network with
    dynamic external memory" (Nature 538), Methods.

    The controller, an LSTM written out (so `torch.func.vmap` can batch it, which it cannot with
    `nn.LSTM`), sees χ_t = [x_t; r_{t-1}] and emits the interface vector ξ_t = W_ξ h_t, clipped to
    ±`interface_clip` (as Csordás & Schmidhuber's implementation, against saturated gates); the memory
    then writes and reads (`DNCMemory`). `forward` returns the features [h_t; r_t] per step, from which
    a model's output layer gives y_t = W_y h_t + W_r r_t, and the state after each step.
    """

    def __init__(self, *, input_size: int, score: Callable[..., nn.Module], controller_size: int = 100,
                 memory_locations: int = 128, memory_width: int = 20, read_heads: int = 1, masking: bool = False,
                 deallocation: bool = False, link_sharpness: bool = False, interface_clip: float = 20.0) -> None:
        super().__init__()
        check_sizes("DNC", {"input_size": input_size, "controller_size": controller_size})
        if interface_clip <= 0:
            raise ValueError(f"DNC: interface_clip must be > 0, got {interface_clip}")
        self.memory = DNCMemory(score=score, memory_locations=memory_locations, memory_width=memory_width,
                                read_heads=read_heads, masking=masking, deallocation=deallocation,
                                link_sharpness=link_sharpness)
        self.controller_size, self.interface_clip = controller_size, interface_clip
        reads = read_heads * memory_width
        self.input_proj = nn.Linear(input_size, 4 * controller_size)  # applied to all steps at once
        self.recurrent_proj = nn.Linear(reads + controller_size, 4 * controller_size, bias=False)
        self.interface_proj = nn.Linear(controller_size, self.memory.interface_size)
        self.output_size = controller_size + reads

    def initial_state(self, batch_size: int, like: Tensor) -> DNCState:
        """Zero controller state and an empty memory."""
        h = like.new_zeros(batch_size, self.controller_size)
        return DNCState(hidden=h, cell=h, memory=self.memory.initial_state(batch_size, like))

    def step(self, x_gates: Tensor, state: DNCState) -> DNCState:
        """One time step from the input's gate projection `x_gates (B, 4C)`: the new state."""
        reads = state.memory.reads.flatten(1)  # (B, R·W)
        gates = x_gates + self.recurrent_proj(torch.cat([reads, state.hidden], -1))
        i, f, g, o = gates.chunk(4, -1)
        c = torch.sigmoid(f) * state.cell + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)  # (B, C)
        interface = self.interface_proj(h).clamp(-self.interface_clip, self.interface_clip)
        return DNCState(hidden=h, cell=c, memory=self.memory(interface, state.memory))

    def forward(self, inputs: Tensor, steps: Tensor | None = None) -> tuple[Tensor, list[DNCState]]:
        """Features (B, T, C + R·W) and the state after each step.

        `steps (B, T)` bool, when given, marks the real steps: at a padding step a sequence keeps its state.
        """
        state = self.initial_state(inputs.shape[0], inputs)
        # (B, T, 4C): one matmul for the whole sequence, unbound once (indexing [:, t] would make each
        # step's backward fill a zero (B, T, 4C) gradient: O(T²))
        x_gates = self.input_proj(inputs).unbind(1)
        features, states = [], []
        for t, x_t in enumerate(x_gates):
            new = self.step(x_t, state)
            state = new if steps is None else _where(steps[:, t], new, state)
            features.append(torch.cat([state.hidden, state.memory.reads.flatten(1)], -1))
            states.append(state)
        return torch.stack(features, 1), states


def weightings(states: list[DNCState]) -> list[Tensor]:
    """Per step, the read heads' weightings and then the write head's: (B, R + 1, N)."""
    return [torch.cat([s.memory.read_weights, s.memory.write_weights.unsqueeze(1)], 1) for s in states]


def _where(keep_new: Tensor, new: DNCState, old: DNCState) -> DNCState:
    """The new state where `keep_new (B,)`, else the old, field by field."""

    def pick(a: Tensor, b: Tensor) -> Tensor:
        return torch.where(keep_new.view(-1, *([1] * (a.dim() - 1))), a, b)

    memory = MemoryState(*(pick(a, b) for a, b in zip(new.memory, old.memory, strict=True)))
    return DNCState(hidden=pick(new.hidden, old.hidden), cell=pick(new.cell, old.cell), memory=memory)
