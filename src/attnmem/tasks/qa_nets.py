"""The qa family's training adapter: MemN2N on the batch `{"story": (B, S, L), "query": (B, L), ...}`.

`attnmem.models.memn2n.MemN2N` takes tensors (`memn2n(story, query)`); the qa family module and the linear-start
callback call `net(batch) -> Output`, `after_clipping`, `weight_matrices` and `linear_start`. The adapter holds the
model as `memn2n`; checkpoints saved before it did load into it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.models.contract import AdaptsModel, AfterClipping, LinearStartable, WeightMatrices
from attnmem.models.memn2n import MemN2N
from attnmem.tasks.adapters import batch_tensor, constructor_of, nest_old_keys

__all__ = ["MemN2NQA"]


class MemN2NQA(nn.Module, AdaptsModel, AfterClipping, WeightMatrices, LinearStartable):
    """MemN2N trained on the qa family's batch: `net(batch)` is the `Output` of its story and query; the constructor
    is `MemN2N`'s."""

    families: ClassVar[tuple[str, ...]] = ("qa",)
    tensor_model: ClassVar[type[nn.Module]] = MemN2N
    __signature__ = constructor_of(MemN2N)

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.memn2n = MemN2N(**options)
        nest_old_keys(self, "memn2n")

    def forward(self, batch: dict[str, Tensor]) -> Output:
        story = batch_tensor(self, batch, "story", "MemN2N(story, query)")  # (B, S, L)
        return self.memn2n.answer(story, batch["query"], self.memn2n.draws(story))

    def after_clipping(self) -> None:
        """The pad word's gradient zeroed once clipping has measured it (`MemN2N.after_clipping`)."""
        self.memn2n.after_clipping()

    def weight_matrices(self) -> list[list[nn.Parameter]]:
        """The groups per-weight clipping measures together (`MemN2N.weight_matrices`)."""
        return self.memn2n.weight_matrices()

    @property
    def linear_start(self) -> bool:
        """Whether memory addressing skips the softmax (linear start, §4.2; the `LinearStart` callback sets it)."""
        return self.memn2n.linear_start

    @linear_start.setter
    def linear_start(self, value: bool) -> None:
        self.memn2n.linear_start = value
