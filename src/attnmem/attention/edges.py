"""Attention over a sparse set of (target, source) pairs: a graph's edges, in O(E) memory, not O(N²)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def read_edges(weights: Tensor, values: Tensor, target: Tensor, num_targets: int) -> Tensor:
    """Σ over the edges e into each target of `weights (E,)` · `values (E, Dv)`: (num_targets, Dv)."""
    weighted = weights.to(values.dtype).unsqueeze(-1) * values  # (E, Dv)
    return values.new_zeros(num_targets, values.shape[-1]).index_add(0, target, weighted)


def attend_edges(
    query: Tensor, keys: Tensor, values: Tensor, score: nn.Module, *, target: Tensor, num_targets: int
) -> tuple[Tensor, Tensor]:
    """Softmax attention of each target over its edges: edge e scores `query[e]` against `keys[e]`.

    `query (E, Dq)`, `keys (E, Dk)` and `values (E, Dv)` are gathered per edge; `target (E,)` names the
    node each edge leads to. The weights of a target's edges sum to 1 (softmax over them); a target
    without edges gets a zero context. Any score of this package works: each edge is scored as a batch
    of one query and one key.

    Returns:
        `(context (num_targets, Dv), weights (E,))`; the weights are at least float32.
    """
    scores = score(query.unsqueeze(1), keys.unsqueeze(1)).view(-1)  # (E,)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    peak = scores.new_full((num_targets,), float("-inf"))
    peak = peak.scatter_reduce(0, target, scores.detach(), "amax")  # (N,) softmax is shift-invariant: no gradient
    exp = (scores - peak[target]).exp()  # (E,) each target's largest is exp(0)
    weights = exp / exp.new_zeros(num_targets).index_add(0, target, exp)[target]  # (E,)
    return read_edges(weights, values, target, num_targets), weights
