"""Graph convolutional network, Kipf & Welling 2017: renormalised propagation D̃^{-1/2} Ã D̃^{-1/2} H W."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.core.float32 import in_float32

__all__ = ["GCN", "propagate", "renormalized_adjacency"]


def renormalized_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Â = D̃^{-1/2} Ã D̃^{-1/2} with Ã = A + I_N, D̃_ii = Σ_j Ã_ij (the renormalisation trick, eq. 8): sparse (N, N).

    `edge_index (2, E)` lists each undirected edge in both directions and no self-loop.
    """
    loops = torch.arange(num_nodes, device=edge_index.device).expand(2, -1)  # (2, N)
    rows, cols = torch.cat([edge_index, loops], dim=1)  # (E + N,) each: Ã's nonzeros
    degree = torch.zeros(num_nodes, device=edge_index.device).index_add_(
        0, rows, torch.ones_like(rows, dtype=torch.float)
    )
    inv_sqrt = degree.rsqrt()  # (N,) every degree >= 1: the self-loop
    values = inv_sqrt[rows] * inv_sqrt[cols]  # (E + N,)
    return torch.sparse_coo_tensor(
        torch.stack([rows, cols]), values, (num_nodes, num_nodes), check_invariants=False
    ).coalesce()


@in_float32  # sparse products take no bfloat16 on every device, and each row sums a node's whole neighbourhood
def propagate(a_hat: Tensor, h: Tensor) -> Tensor:
    """Â H for sparse `a_hat (N, N)` and `h (N, D)`: (N, D)."""
    return torch.sparse.mm(a_hat, h)


class GCN(nn.Module):
    """Graph convolutional network, Kipf & Welling 2017, "Semi-Supervised Classification with Graph
    Convolutional Networks" (ICLR; arXiv:1609.02907).

    Each layer is H⁽ˡ⁺¹⁾ = σ(Â H⁽ˡ⁾ W⁽ˡ⁾) (eq. 2) with Â the renormalised adjacency (eq. 8); the two-layer
    model of eq. 9 is Z = softmax(Â ReLU(Â X W⁽⁰⁾) W⁽¹⁾), here its logits. Dropout on each layer's input
    (the paper's 0.5). The propagation is a sparse product (`torch.sparse.mm`): O(E) per layer.
    """

    families: ClassVar[tuple[str, ...]] = ("graph",)

    def __init__(
        self, *, num_features: int, num_classes: int, hidden_dim: int = 16, layers: int = 2, dropout: float = 0.5
    ) -> None:
        super().__init__()
        check_sizes("GCN", {"layers": layers, "hidden_dim": hidden_dim})
        if not 0 <= dropout < 1:
            raise ValueError(f"GCN: dropout must be in [0, 1), got {dropout}")
        widths = [num_features] + [hidden_dim] * (layers - 1) + [num_classes]
        linears = [nn.Linear(a, b, bias=True) for a, b in zip(widths, widths[1:])]  # W⁽ˡ⁾
        for linear in linears:  # Glorot, as the paper (§5.3)
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)
        self.weights = nn.ModuleList(linears)
        self.dropout = dropout

    def forward(self, batch: dict[str, Tensor]) -> Output:
        h = batch["features"]  # (N, F)
        a_hat = renormalized_adjacency(batch["edge_index"], h.shape[0])  # (N, N) sparse
        for layer, linear in enumerate(cast("Iterable[nn.Linear]", self.weights)):  # a ModuleList of Linear layers
            h = F.dropout(h, self.dropout, self.training)
            h = propagate(a_hat, h @ linear.weight.T) + linear.bias  # Â H W, (N, width)
            if layer < len(self.weights) - 1:
                h = F.relu(h)
        return Output(pred=h)  # (N, C) logits
