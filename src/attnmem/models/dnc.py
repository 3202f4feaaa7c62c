"""Differentiable Neural Computer (Graves et al. 2016) for the sequence family: bits in, bits out."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.dnc import DNCCore, weightings
from attnmem.blocks.output import Output

__all__ = ["DNC"]


class DNC(nn.Module):
    """Differentiable Neural Computer, Graves et al. 2016, "Hybrid computing using a neural network with
    dynamic external memory" (Nature 538), Methods: an LSTM controller, content lookup, dynamic memory
    allocation by usage, a temporal link matrix and read modes (`blocks/dnc_memory.py`).

    The output y_t = W_y h_t + W_r [r^1_t; …; r^R_t] (one linear layer over [h_t; r_t]) gives logits.
    Content lookup D(k, M) is the `score` (cosine by default; the strength β comes from the interface
    vector). `masking`, `deallocation` and `link_sharpness` are Csordás & Schmidhuber's 2019 options.
    `forward` returns `pred (B, T, output_size)` and, per step, the weightings `(B, R + 1, N)` (the read
    heads', then the write head's) as `attention`, which the sequence family's plots draw.
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)
    replicas_batched: ClassVar[bool] = True  # replicas=R trains in one vmap (the link step has its vmap rule)

    def __init__(self, *, input_size: int, output_size: int, score: Callable[..., nn.Module],
                 controller_size: int = 100, memory_locations: int = 128, memory_width: int = 20,
                 read_heads: int = 1, masking: bool = False, deallocation: bool = False,
                 link_sharpness: bool = False, interface_clip: float = 20.0) -> None:
        super().__init__()
        check_sizes("DNC", {"output_size": output_size})
        self.core = DNCCore(input_size=input_size, score=score, controller_size=controller_size,
                            memory_locations=memory_locations, memory_width=memory_width, read_heads=read_heads,
                            masking=masking, deallocation=deallocation, link_sharpness=link_sharpness,
                            interface_clip=interface_clip)
        self.read_heads, self.write_heads = read_heads, 1
        self.output_proj = nn.Linear(self.core.output_size, output_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        features, states = self.core(batch["inputs"])  # (B, T, C + R·W)
        return Output(pred=self.output_proj(features), attention=weightings(states))

    @torch.no_grad()
    def memory_trace(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """For the plots: usage `(B, T, N)` after each step and the final link matrix `(B, N, N)`."""
        _, states = self.core(batch["inputs"])
        return {"usage": torch.stack([s.memory.usage for s in states], 1), "link": states[-1].memory.link}
