"""Collobert & Weston's window language model (2008): a window scorer trained by ranking against corrupted windows."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.models.contract import WordVectors

__all__ = ["CW"]


class CW(nn.Module, WordVectors):
    """Collobert & Weston 2008, "A Unified Architecture for Natural Language Processing" (ICML), §4 and §5.

    A window x of 2w+1 words is scored s(x) = W_2 HardTanh(W_1 [LT(x_1); …; LT(x_{2w+1})] + b_1) + b_2:
    the lookup table LT (§4.1) concatenated, a hidden layer and a linear output (§3). The language model
    (§5) ranks each real window above the same window with its centre word replaced by a random word x̃;
    the family module minimises Σ max(0, 1 − s(x) + s(x̃)). Here the corrupting words are the batch's
    `negatives` (drawn ∝ U(w)^{3/4}; the paper draws them uniformly). `pred (B, 1+K)`: column 0 is s(x),
    column k the k-th corrupted window's score. The word vectors are LT's rows (`vectors()`).
    """

    families: ClassVar[tuple[str, ...]] = ("embeddings",)
    objective: ClassVar[str] = "ranking"  # hinge of pred[:, 0] against each pred[:, k]

    def __init__(self, *, vocab_size: int, window: int, embed_dim: int = 32, hidden_size: int = 64) -> None:
        super().__init__()
        check_sizes(
            "CW", {"vocab_size": vocab_size, "window": window, "embed_dim": embed_dim, "hidden_size": hidden_size}
        )
        self.window = window
        self.lookup = nn.Embedding(vocab_size, embed_dim, padding_idx=0)  # LT
        self.hidden = nn.Linear((2 * window + 1) * embed_dim, hidden_size)  # W_1, b_1
        self.out = nn.Linear(hidden_size, 1)  # W_2, b_2

    def score(self, windows: Tensor) -> Tensor:
        """s(x) of each window `(..., 2w+1)`: (...)."""
        x = self.lookup(windows).flatten(-2)  # (..., (2w+1)·d)
        return self.out(nn.functional.hardtanh(self.hidden(x))).squeeze(-1)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        window, negatives = batch["window"], batch["negatives"]  # (B, 2w+1), (B, K)
        k = negatives.shape[1]
        corrupted = window.unsqueeze(1).repeat(1, k, 1)  # (B, K, 2w+1)
        corrupted[:, :, self.window] = negatives  # x̃: the centre word replaced
        windows = torch.cat([window.unsqueeze(1), corrupted], dim=1)  # (B, 1+K, 2w+1)
        return Output(pred=self.score(windows))  # (B, 1+K)

    def vectors(self) -> Tensor:
        """The learned word vectors, row i for word id i: (V, d)."""
        return self.lookup.weight
