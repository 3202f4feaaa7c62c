"""The sequence family's training adapters: the NTM and the DNC on the batch `{"inputs": (B, T, I), ...}`.

`attnmem.models.ntm.NTM` and `attnmem.models.dnc.DNC` take tensors (`ntm(x)`); the sequence family module calls
`net(batch) -> Output` and, for truncated BPTT, `initial_state` / `run_chunk`. An adapter holds its model under one
name (`ntm`, `dnc`); checkpoints saved before it did load into it (`adapters.nest_old_keys`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.models.contract import AdaptsModel, CarriesState, MemoryTrace, ReadHeads
from attnmem.models.dnc import DNC
from attnmem.models.ntm import NTM, NTMState
from attnmem.tasks.adapters import batch_tensor, constructor_of, nest_old_keys

__all__ = ["DNCSequence", "NTMSequence"]


class NTMSequence(nn.Module, AdaptsModel, CarriesState, ReadHeads):
    """The NTM trained on the sequence family's batch: `net(batch)` is the `Output` of `batch["inputs"]` (B, T, I)
    from the initial state; the constructor is `NTM`'s."""

    families: ClassVar[tuple[str, ...]] = ("sequence",)
    tensor_model: ClassVar[type[nn.Module]] = NTM
    __signature__ = constructor_of(NTM)

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.ntm = NTM(**options)
        self.read_heads = self.ntm.read_heads  # the first read_heads weightings are read heads'
        nest_old_keys(self, "ntm")

    def forward(self, batch: dict[str, Tensor]) -> Output:
        x = batch_tensor(self, batch, "inputs", "NTM(x)")  # (B, T, I)
        return self.ntm.run_chunk(x, self.ntm.initial_state(x.shape[0]))[0]

    def initial_state(self, batch_size: int) -> NTMState:
        """The NTM's state before the first step (`NTM.initial_state`)."""
        return self.ntm.initial_state(batch_size)

    def run_chunk(self, x: Tensor, state: NTMState) -> tuple[Output, NTMState]:
        """A piece `x (B, T, I)` of a sequence from `state` (`NTM.run_chunk`): its Output and the state after it."""
        return self.ntm.run_chunk(x, state)


class DNCSequence(nn.Module, AdaptsModel, MemoryTrace, ReadHeads):
    """The DNC trained on the sequence family's batch: `net(batch)` is the `Output` of `batch["inputs"]` (B, T, I),
    with the memory trace the sequence plots draw; the constructor is `DNC`'s."""

    families: ClassVar[tuple[str, ...]] = ("sequence",)
    tensor_model: ClassVar[type[nn.Module]] = DNC
    __signature__ = constructor_of(DNC)

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.dnc = DNC(**options)
        self.read_heads = self.dnc.read_heads  # the first read_heads weightings are read heads'
        nest_old_keys(self, "dnc")

    def forward(self, batch: dict[str, Tensor]) -> Output:
        return self.dnc.run(batch_tensor(self, batch, "inputs", "DNC(x)"))

    @torch.no_grad()
    def memory_trace(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """For the plots: usage `(B, T, N)` after each step and the final link matrix `(B, N, N)`."""
        return self.dnc.memory_trace(batch_tensor(self, batch, "inputs", "DNC.memory_trace(x)"))
