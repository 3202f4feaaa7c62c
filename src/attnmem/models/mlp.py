"""A multilayer perceptron on node features alone: the baseline that shows what a graph's edges add."""

from __future__ import annotations

from typing import ClassVar

import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output

__all__ = ["MLP"]


class MLP(nn.Module):
    """Two (or `layers`) fully connected layers per node, ReLU between, dropout on each input; no edges.

    Kipf & Welling 2017 and Veličković et al. 2018 report it beside their models (Cora: 55.1%).
    """

    families: ClassVar[tuple[str, ...]] = ("graph",)

    def __init__(
        self, *, num_features: int, num_classes: int, hidden_dim: int = 16, layers: int = 2, dropout: float = 0.5
    ) -> None:
        super().__init__()
        check_sizes("MLP", {"layers": layers, "hidden_dim": hidden_dim})
        if not 0 <= dropout < 1:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout}")
        widths = [num_features] + [hidden_dim] * (layers - 1) + [num_classes]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.dropout = dropout

    def forward(self, batch: dict[str, Tensor]) -> Output:
        h = batch["features"]  # (N, F)
        for layer, linear in enumerate(self.linears):
            h = linear(F.dropout(h, self.dropout, self.training))
            if layer < len(self.linears) - 1:
                h = F.relu(h)
        return Output(pred=h)  # (N, C) logits
