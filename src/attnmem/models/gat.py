"""Graph attention network, Veličković et al. 2018: multi-head attention over each node's neighbours, edge by edge."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import attend_edges, read_edges
from attnmem.blocks.output import Output

__all__ = ["GAT", "GraphAttentionLayer", "neighbour_edges"]


def neighbour_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The pairs (source j, target i) with j ∈ N(i) ∪ {i}, each once, from `edge_index (2, E)`: (2, E')."""
    loops = torch.arange(num_nodes, device=edge_index.device).expand(2, -1)
    return torch.unique(torch.cat([edge_index, loops], 1), dim=1)  # sorted by source, then target


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

    def forward(self, h: Tensor, edges: Tensor) -> tuple[Tensor, Tensor]:
        """`h (N, F)`, `edges (2, E)` from `neighbour_edges` -> `h' (N, K·F')` (concat) or `(N, F')` (mean), and α
        as a sparse `(K, N, N)` tensor, α[k, i, j] on the edges j -> i."""
        n, (source, target) = h.shape[0], edges
        wh = self.weight(h).view(n, self.heads, self.out_dim)  # (N, K, F')
        outputs, alphas = [], []
        for k, score in enumerate(self.scores):
            x = wh[:, k]  # (N, F'): the node states are queries, keys and values at once
            context, alpha = attend_edges(x[target], x[source], x[source], score, target=target, num_targets=n)
            if self.training and self.dropout > 0:  # dropout on the normalised coefficients α (§3.3)
                context = read_edges(F.dropout(alpha, self.dropout, True), x[source], target, n)
            outputs.append(context)  # (N, F')
            alphas.append(alpha)  # (E,)
        stacked = torch.stack(outputs)  # (K, N, F')
        out = stacked.transpose(0, 1).reshape(n, -1) if self.concat else stacked.mean(0)
        return out + self.bias, _sparse_alpha(torch.stack(alphas), edges, n)


def _sparse_alpha(alpha: Tensor, edges: Tensor, n: int) -> Tensor:
    """`alpha (K, E)` on `edges (2, E)` as the sparse (K, N, N) tensor whose [k, i, j] is α_ij of head k."""
    heads, count = alpha.shape
    head = torch.arange(heads, device=alpha.device).repeat_interleave(count)  # (K·E,)
    indices = torch.stack([head, edges[1].repeat(heads), edges[0].repeat(heads)])  # (3, K·E): head, target, source
    return torch.sparse_coo_tensor(indices, alpha.reshape(-1), (heads, n, n), check_invariants=False)


class GAT(nn.Module):
    """Graph attention network, Veličković et al. 2018, "Graph Attention Networks" (ICLR; arXiv:1710.10903).

    The transductive model of §3.3: a layer of `heads` heads of `hidden_dim` features, concatenated, ELU;
    then an output layer of `output_heads` heads of `num_classes` features, averaged (eq. 6), as logits.
    The score e(W h_i, W h_j) comes from the `attention` group; the paper's, LeakyReLU(aᵀ[W h_i ‖ W h_j])
    (eq. 3), is `attention=leaky_concat`, this model's default. Dropout `dropout` on both layers' inputs
    and on α. Attention runs edge by edge (`attention.attend_edges`): O(E) memory per head, not O(N²).
    `Output.attention` holds α of each layer, a sparse (K, N, N) tensor.
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
        edges = neighbour_edges(batch["edge_index"], h.shape[0])  # (2, E) with every self-loop
        attention = []
        for i, layer in enumerate(self.layers):
            h, alpha = layer(F.dropout(h, self.dropout, self.training), edges)  # (N, K·F') or (N, C)
            attention.append(alpha)
            if i == 0:
                h = F.elu(h)
        return Output(pred=h, attention=attention)  # (N, C) logits
