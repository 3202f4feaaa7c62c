"""Differentiable Neural Computer (Graves et al. 2016) for the sequence family: bits in, bits out."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnmem.attention.scores import Cosine, score_factory
from attnmem.blocks.checks import check_sizes
from attnmem.blocks.dnc import DNCCore, weightings
from attnmem.blocks.output import Output
from attnmem.models.contract import ReadHeads
from attnmem.models.dnc_loop import Layout, dnc_loop

__all__ = ["DNC"]


class DNC(nn.Module, ReadHeads):
    """Differentiable Neural Computer, Graves et al. 2016, "Hybrid computing using a neural network with
    dynamic external memory" (Nature 538), Methods: an LSTM controller, content lookup, dynamic memory
    allocation by usage, a temporal link matrix and read modes (`blocks/dnc_memory.py`).

    The output y_t = W_y h_t + W_r [r^1_t; …; r^R_t] (one linear layer over [h_t; r_t]) gives logits.
    Content lookup D(k, M) is the `score` (cosine by default; the strength β comes from the interface
    vector). `masking`, `deallocation` and `link_sharpness` are Csordás & Schmidhuber's 2019 options.
    `forward(x)` returns the logits; `run(x)` gives the same as an `Output` (per-step weightings as
    `attention`), which the sequence family trains through `attnmem.tasks.sequence_nets.DNCSequence`.
    With cosine content lookup (the default) it runs the fused loop of `models/dnc_loop.py`, the same maths with
    a hand-derived backward through time; `fused = None` runs `DNCCore`'s steps under autograd instead.

    Args:
        input_size: width of each step's input x_t.
        output_size: width of each step's output y_t (logits).
        score: content lookup D(k, M): a name ("cosine", ...), a score class or a factory
            `score(query_dim=, key_dim=)`.
        controller_size: width C of the LSTM controller's h_t.
        memory_locations: N, the memory's rows.
        memory_width: W, the width of a memory row.
        read_heads: R.
        masking: a key mask s = σ per head, D(k ∘ s, M ∘ s) (Csordás & Schmidhuber 2019).
        deallocation: freed locations are erased, M_{t-1} ∘ ψ_t before the write (Csordás & Schmidhuber 2019).
        link_sharpness: forward and backward weightings sharpened by strengths oneplus (Csordás & Schmidhuber
            2019).
        interface_clip: the interface vector ξ_t is clipped to ±this, against saturated gates.
    """

    def __init__(self, *, input_size: int, output_size: int, score: str | Callable[..., nn.Module] = "cosine",
                 controller_size: int = 100, memory_locations: int = 128, memory_width: int = 20,
                 read_heads: int = 1, masking: bool = False, deallocation: bool = False,
                 link_sharpness: bool = False, interface_clip: float = 20.0) -> None:
        super().__init__()
        check_sizes("DNC", {"output_size": output_size})
        self.input_size = input_size
        self.core = DNCCore(input_size=input_size, score=score_factory(score, owner="DNC"),
                            controller_size=controller_size,
                            memory_locations=memory_locations, memory_width=memory_width, read_heads=read_heads,
                            masking=masking, deallocation=deallocation, link_sharpness=link_sharpness,
                            interface_clip=interface_clip)
        self.read_heads, self.write_heads = read_heads, 1
        self.output_proj = nn.Linear(self.core.output_size, output_size)
        cosine = getattr(self.core.memory.similarity, "__self__", None)
        memory = self.core.memory
        self.fused = None if not isinstance(cosine, Cosine) else Layout(
            tuple(memory.sizes), read_heads, memory_locations, memory_width, masking, deallocation, link_sharpness,
            interface_clip, cosine.eps)

    def forward(self, x: Tensor, *, return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Logits of a sequence.

        Args:
            x: the input sequence.
            return_attention: also return each step's weightings (the read heads', then the write head's).

        Shapes:
            - x: (B, T, input_size)
            - y: (B, T, output_size); weightings: (B, T, R + 1, N)

        Returns:
            `y`, or `(y, weightings)` with `return_attention`.
        """
        out = self.run(x)
        return (out.pred, torch.stack(out.attention, 1)) if return_attention else out.pred

    def run(self, x: Tensor) -> Output:
        """Logits and weightings of a sequence as an `Output`, as the sequence family trains it.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, input_size)
            - pred: (B, T, output_size); attention: per step (B, R + 1, N)

        Returns:
            `Output(pred, attention)`: the logits and each step's weightings (read heads first).
        """
        self._check_input(x)
        if self.fused is None:
            features, states = self.core(x)  # (B, T, C + R·W)
            return Output(pred=self.output_proj(features), attention=weightings(states))
        core = self.core
        hs, reads, weights = dnc_loop(core.input_proj(x), core.recurrent_proj.weight, core.interface_proj.weight,
                                      core.interface_proj.bias, self.fused)
        features = torch.cat([hs, reads.flatten(2)], -1)  # (B, T, C + R·W)
        return Output(pred=self.output_proj(features), attention=list(weights.unbind(1)))

    @torch.no_grad()
    def memory_trace(self, x: Tensor) -> dict[str, Tensor]:
        """The memory's usage after each step of a sequence and its final temporal link matrix (no gradient).

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, input_size)
            - usage: (B, T, N); link: (B, N, N)

        Returns:
            `{"usage": usage, "link": link}`.
        """
        self._check_input(x)
        _, states = self.core(x)
        return {"usage": torch.stack([s.memory.usage for s in states], 1), "link": states[-1].memory.link}

    def _check_input(self, x: Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            raise ValueError(f"DNC expects x of shape (B, T, input_size={self.input_size}), got {tuple(x.shape)}")
