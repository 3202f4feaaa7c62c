"""What the hetero-associative memories share: the outer-product storage of pairs and its checks."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmem.core.float32 import in_float32

__all__ = ["PairStorage", "check_pairs", "check_partner_size", "outer_product"]


def outer_product(patterns: Tensor, pairs: Tensor) -> Tensor:
    """Hebbian correlation matrix W = Σₖ yₖ xₖᵀ of `patterns (K, N)` x and `pairs (K, M)` y: (M, N)."""
    return pairs.T @ patterns


def check_partner_size(owner: str, size: int, partner_size: int) -> None:
    """ValueError naming the data option when the data gives no partners y (`partner_size` 0)."""
    if size < 1:
        raise ValueError(f"{owner}: size must be >= 1, got {size}")
    if partner_size < 1:
        raise ValueError(
            f"{owner}: partner_size=0: there are no partners y to recall; build it with partner_size=M (in a run: "
            "data.partner_size=M or data.pairs_path=<file.npy>)"
        )


def check_pairs(owner: str, patterns: Tensor, pairs: Tensor, size: int, partner_size: int) -> None:
    """ValueError unless `patterns (K, N)` and `pairs (K, M)` are K pairs of the memory's sizes N and M."""
    if len(patterns) != len(pairs):
        raise ValueError(
            f"{owner}: {len(patterns)} patterns x but {len(pairs)} partners y: store one partner y "
            "per pattern x (in a run, a data.pairs_path file needs one row per stored pattern)"
        )
    if patterns.shape[-1] != size or pairs.shape[-1] != partner_size:
        raise ValueError(
            f"{owner}: pairs of {patterns.shape[-1]} and {pairs.shape[-1]} units for size={size}, "
            f"partner_size={partner_size}"
        )


class PairStorage(nn.Module):
    """The correlation matrix W (M, N) of the stored pairs, and whether any are stored yet."""

    weights: Tensor  # buffers
    stored: Tensor

    def __init__(self, owner: str, size: int, partner_size: int) -> None:
        super().__init__()
        self.owner, self.size, self.partner_size = owner, size, partner_size
        self.register_buffer("weights", torch.zeros(partner_size, size))  # W, (M, N)
        self.register_buffer("stored", torch.tensor(False))

    @torch.no_grad()
    @in_float32  # the sums of ±1 products are integers, exact in float32, not in 16 bits
    def store(self, patterns: Tensor, pairs: Tensor) -> None:
        """Store the pairs `patterns (K, N)` x, `pairs (K, M)` y by the outer-product rule (replacing what was)."""
        check_pairs(self.owner, patterns, pairs, self.size, self.partner_size)
        self.weights.copy_(outer_product(patterns.to(self.weights.dtype), pairs.to(self.weights.dtype)))
        self.stored.fill_(True)

    def store_once(self, batch: dict[str, Tensor]) -> None:
        """Store the batch's `patterns` and `pairs` when nothing is stored yet."""
        if not self.stored:
            self.store(batch["patterns"], batch["pairs"])
