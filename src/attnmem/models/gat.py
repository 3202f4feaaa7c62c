"""Graph attention network, Veličković et al. 2018: masked multi-head attention over each node's neighbours."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import attend
from attnmem.blocks.output import Output

__all__ = ["GAT", "GraphAttentionLayer", "neighbour_mask"]


def neighbour_mask(edge_index: Tensor, num_nodes: int) -> Tensor:
    """True where node i may attend to node j: j ∈ N(i) ∪ {i}, from `edge_index (2, E)` (source j, target i): (N, N)."""
    mask = torch.eye(num_nodes, dtype=torch.bool, device=edge_index.device)
    mask[edge_index[1], edge_index[0]] = True
    return mask


class GraphAttentionLayer(nn.Module):
    """One graph attentional layer (§2.1): K heads, each α_ij = softmax_j(e(W h_i, W h_j)) over j ∈ N(i) ∪ {i}
    (eq. 2-3, e the `score`), h'_i = Σ_j α_ij W h_j (eq. 4); heads concatenated (eq. 5) or averaged (eq. 6)."""

    def __init__(
        self, in_dim: int, out_dim: int, *, heads: int, score: Callable[..., nn.Module], concat: bool, dropout: float
    ) -> None:
        super().__init__()
        self.heads, self.out_dim, self.concat, self.dropout = heads, out_dim, concat, dropout
        self.weight = nn.Linear(in_dim, heads * out_dim, bias=False)  # W of every head
        nn.init.xavier_uniform_(self.weight.weight)
        self.scores = nn.ModuleList(score(query_dim=out_dim, key_dim=out_dim) for _ in range(heads))
        self.bias = nn.Parameter(torch.zeros(heads * out_dim if concat else out_dim))  # the reference code's

    def forward(self, h: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """`h (N, F)`, `mask (N, N)` -> `h' (N, K·F')` (concat) or `(N, F')` (mean), and α `(K, N, N)`."""
        n = h.shape[0]
        wh = self.weight(h).view(n, self.heads, self.out_dim).transpose(0, 1)  # (K, N, F')
        outputs, alphas = [], []
        for k, score in enumerate(self.scores):
            x = wh[k : k + 1]  # (1, N, F'): the node states are queries, keys and values at once
            context, alpha = attend(x, x, x, score, mask=mask.unsqueeze(0))  # (1, N, F'), (1, N, N)
            if self.training and self.dropout > 0:  # dropout on the normalised coefficients α (§3.3)
                context = F.dropout(alpha, self.dropout, True).to(x.dtype) @ x
            outputs.append(context[0])
            alphas.append(alpha[0])
        stacked = torch.stack(outputs)  # (K, N, F')
        out = stacked.transpose(0, 1).reshape(n, -1) if self.concat else stacked.mean(0)
        return out + self.bias, torch.stack(alphas)


class GAT(nn.Module):
    """Graph attention network, Veličković et al. 2018, "Graph Attention Networks" (ICLR; arXiv:1710.10903).

    The transductive model of §3.3: a layer of `heads` heads of `hidden_dim` features, concatenated, ELU;
    then an output layer of `output_heads` heads of `num_classes` features, averaged (eq. 6), as logits.
    The score e(W h_i, W h_j) comes from the `attention` group; the paper's, LeakyReLU(aᵀ[W h_i ‖ W h_j])
    (eq. 3), is `attention=leaky_concat`, this model's default. Dropout `dropout` on both layers' inputs
    and on α. Attention is dense over an (N, N) neighbour mask: O(N²) memory per head, fine to a few
    thousand nodes. `Output.attention` holds α of each layer, (K, N, N).
    """

    families: ClassVar[tuple[str, ...]] = ("graph",)

    def __init__(
        self,
        *,
        num_features: int,
        num_classes: int,
        score: Callable[..., nn.Module],
        hidden_dim: int = 8,
        heads: int = 8,
        output_heads: int = 1,
        dropout: float = 0.6,
    ) -> None:
        super().__init__()
        for name, value in {"hidden_dim": hidden_dim, "heads": heads, "output_heads": output_heads}.items():
            if value < 1:
                raise ValueError(f"GAT: {name} must be >= 1, got {value}")
        if not 0 <= dropout < 1:
            raise ValueError(f"GAT: dropout must be in [0, 1), got {dropout}")
        self.layers = nn.ModuleList(
            [
                GraphAttentionLayer(num_features, hidden_dim, heads=heads, score=score, concat=True, dropout=dropout),
                GraphAttentionLayer(
                    heads * hidden_dim, num_classes, heads=output_heads, score=score, concat=False, dropout=dropout
                ),
            ]
        )
        self.dropout = dropout

    def forward(self, batch: dict[str, Tensor]) -> Output:
        h = batch["features"]  # (N, F)
        mask = neighbour_mask(batch["edge_index"], h.shape[0])  # (N, N)
        attention = []
        for i, layer in enumerate(self.layers):
            h, alpha = layer(F.dropout(h, self.dropout, self.training), mask)  # (N, K·F') or (N, C)
            attention.append(alpha)
            if i == 0:
                h = F.elu(h)
        return Output(pred=h, attention=attention)  # (N, C) logits
