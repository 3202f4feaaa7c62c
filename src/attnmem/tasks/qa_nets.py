"""The qa family's training adapter: MemN2N on the batch `{"story": (B, S, L), "query": (B, L), ...}`.

`attnmem.models.memn2n.MemN2N` takes tensors (`memn2n(story, query)`); the qa family module, `Replicas` and the
linear-start callback call `net(batch) -> Output`, `draws`, `fold`, `after_clipping`, `weight_matrices` and
`linear_start`. The adapter holds the model as `memn2n`; checkpoints saved before it did load into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.output import Output
from attnmem.models.contract import (
    AdaptsModel,
    AfterClipping,
    Draws,
    Folds,
    LinearStartable,
    ReplicaPads,
    ReplicasBatched,
    WeightMatrices,
)
from attnmem.models.memn2n import MemN2N
from attnmem.tasks.adapters import batch_tensor, constructor_of, nest_old_keys

__all__ = ["MemN2NQA"]


class MemN2NQA(nn.Module, AdaptsModel, ReplicasBatched, ReplicaPads, Draws, Folds, AfterClipping, WeightMatrices,
               LinearStartable):
    """MemN2N trained on the qa family's batch: `net(batch)` is the `Output` of its story and query, with RN's
    numbers from the batch when `Replicas` drew them (`draws`) and folded replicas' rows (`fold`); the constructor
    is `MemN2N`'s."""

    families: ClassVar[tuple[str, ...]] = ("qa",)
    tensor_model: ClassVar[type[nn.Module]] = MemN2N
    replicas_batched = True  # replicas=R in one batched step (`fold`, else vmap); RN's from `draws`
    # replicas' batches padded to one shape: more empty slots, and RN keys past every slot `noisy_recency` picks from
    replica_pads: ClassVar[dict[str, float]] = {"story": 0, "rn_keys": 1.0}
    __signature__ = constructor_of(MemN2N)

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.memn2n = MemN2N(**options)
        nest_old_keys(self, "memn2n")

    def forward(self, batch: dict[str, Tensor]) -> Output:
        story = batch_tensor(self, batch, "story", "MemN2N(story, query)")  # (B, S, L)
        drawn = {k: batch[k] for k in ("rn_blank", "rn_keys") if k in batch} or self.memn2n.draws(story)
        return self.memn2n.answer(story, batch["query"], drawn, batch.get("replica"))

    def draws(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The uniform numbers RN draws for `batch` while training (none otherwise), as batch keys."""
        return self.memn2n.draws(batch["story"])

    @property
    def folds(self) -> bool:
        """Whether replicas of this model can run folded into one batch (`fold`): every weight a lookup table (no
        H, no W, no score with weights); else they take `vmap`."""
        net = self.memn2n
        return net.H is None and net.W is None and not any(True for s in net.scores for _ in s.parameters())

    def fold(self, batches: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
        """R replicas' batches as one batch of all their rows, for one forward over their tables stacked replica by
        replica ((R·V, d) each): a word id moves to replica r's rows, the pad word to row 0 (zero in every
        replica; with `nil_gradient` to replica r's row 0, which takes gradient), `replica (R·B,)` names each
        row's."""
        folded = {k: torch.cat([b[k] for b in batches]) for k, v in batches[0].items() if isinstance(v, Tensor)}
        replica = torch.arange(len(batches), device=batches[0]["story"].device)  # (R,)
        for key in ("story", "query"):
            words = torch.stack([b[key] for b in batches])  # (R, B, ...)
            shift = self.memn2n.A[0].num_embeddings * replica.view(-1, *[1] * (words.dim() - 1))  # (R, 1, ...)
            moved = words + shift if self.memn2n.pad is None else torch.where(words > 0, words + shift, 0)
            folded[key] = moved.flatten(0, 1)  # (R·B, ...)
        folded["replica"] = replica.repeat_interleave(batches[0]["story"].shape[0])  # (R·B,)
        return folded

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
