"""Attention scoring functions and `attend`: the one place attention is computed.

Every score maps `query (B, Tq, Dq)` and `keys (B, Tk, Dk)` to `scores (B, Tq, Tk)`, and 2-D `query (Tq, Dq)`
and `keys (Tk, Dk)` to `(Tq, Tk)`.
An `attention/*.yaml` config is a `_partial_` of one of these classes; a model calls it with
the dimensions it needs: `score(query_dim=..., key_dim=...)`. `attend` reads dense keys (B, Tk);
`attend_edges` (`edges.py`) a sparse set of pairs, a graph's edges. A score with `linear_in_query = True`
(`Dot`, `ScaledDot`, `Bilinear`) satisfies score(c·q, k) = c·score(q, k): a temperature may scale the query;
one with `linear_in_key = True` (the same three) satisfies score(q, c·k) = c·score(q, k), so a zero key scores 0.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention.edges import attend_edges, read_edges
from attnmem.attention.masks import allowed
from attnmem.attention.scores import (
    SCORES,
    Additive,
    Bilinear,
    Cosine,
    Dot,
    LeakyConcat,
    ScaledDot,
    Trilinear,
    score_factory,
    softmax,
)

__all__ = [
    "Additive", "Bilinear", "Cosine", "Dot", "LeakyConcat", "MultiHead", "ScaledDot", "Trilinear", "SCORES", "attend",
    "attend_edges", "read_edges", "score_factory", "softmax",
]


def attend(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    score: Callable[[Tensor, Tensor], Tensor],
    *,
    attn_mask: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Softmax attention of `query` over `keys`, reading `values`: softmax(score(q, k)) v.

    Args:
        query: the queries.
        keys: what the queries are scored against.
        values: what the weights average, one per key.
        score: a built score module, e.g. `ScaledDot(64, 64)`, or any function of `(query, keys)` giving the scores.
        attn_mask: bool, True where a query may attend (as `F.scaled_dot_product_attention`). A row with
            nothing to attend gives zero weights and a zero context.
        key_padding_mask: bool, True where a key is padding (as `nn.MultiheadAttention`).
        need_weights: False returns `None` for the weights (and, with `ScaledDot`, takes SDPA).
        mask: deprecated: `attn_mask` under its old name (the same meaning); removed in 0.4.

    Shapes:
        - query: (B, Tq, Dq), or (Tq, Dq) unbatched
        - keys: (B, Tk, Dk), or (Tk, Dk) unbatched
        - values: (B, Tk, Dv), or (Tk, Dv) unbatched
        - attn_mask, mask: broadcastable to (B, Tq, Tk)
        - key_padding_mask: (B, Tk)
        - context: (B, Tq, Dv); weights: (B, Tq, Tk)

    Returns:
        `(context, weights)`; `weights` is None when skipped, else at least float32.
    """
    attn_mask = _renamed(mask, attn_mask, "attend")
    scores_shape = torch.Size((*query.shape[:-1], keys.shape[-2]))  # (B, Tq, Tk)
    keep = allowed(scores_shape, attn_mask, key_padding_mask)
    if not need_weights and type(score) is ScaledDot:
        return _fast_scaled_dot(query, keys, values, keep), None
    scores = score(query, keys)  # (B, Tq, Tk)
    if keep is None:
        weights = softmax(scores)
        return weights @ values, weights if need_weights else None  # (B, Tq, Dv)
    return _masked_read(scores, values, keep, need_weights)


def _masked_read(scores: Tensor, values: Tensor, keep: Tensor, need_weights: bool) -> tuple[Tensor, Tensor | None]:
    drop = ~keep  # as small as the masks given: broadcast, never expanded to the scores' shape
    if need_weights:  # a query with nothing to attend gets NaN weights from softmax: zeroed, as is their gradient
        weights = softmax(scores.masked_fill(drop, float("-inf"))).masked_fill(drop, 0.0)
        return weights @ values, weights
    # without the weights, a query with nothing to attend scores 0 everywhere (finite weights: NaN ones would make
    # the values' gradient NaN) and only its context, often smaller than the weights, is zeroed
    empty = drop.all(-1, keepdim=True)  # (…, Tq, 1)
    scores = torch.where(drop, torch.where(empty, 0.0, float("-inf")).to(scores.dtype), scores)
    return (softmax(scores) @ values).masked_fill(empty, 0.0), None  # (B, Tq, Dv)


def _renamed(mask: Tensor | None, attn_mask: Tensor | None, owner: str) -> Tensor | None:
    # the deprecated `mask=`: `attn_mask` under its old name, the same meaning
    if mask is None:
        return attn_mask
    warnings.warn(f"{owner}(mask=...) is deprecated and goes in 0.4: use attn_mask= (the same meaning, True = may "
                  "attend) or key_padding_mask= (True = padding)", DeprecationWarning, stacklevel=3)
    return mask if attn_mask is None else attn_mask & mask


def _fast_scaled_dot(query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return F.scaled_dot_product_attention(query, keys, values)
    mask = mask.expand(*query.shape[:-1], keys.shape[-2])  # (B, Tq, Tk)
    context = F.scaled_dot_product_attention(query, keys, values, attn_mask=mask)
    # SDPA gives NaN for a fully masked row; the contract is a zero context
    return context.masked_fill(~mask.any(-1, keepdim=True), 0.0)


class MultiHead(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, §3.2.2) over any score factory.

    Projects queries, keys and values to `heads` subspaces of `model_dim // heads`, scores each
    head with its own `score(query_dim=d_head, key_dim=d_head)` (`scores[h]`: a score with parameters,
    bilinear or additive, learns them per head), and projects the concatenation.

    Args:
        model_dim: the width D of queries, keys, values and the output.
        heads: the number of heads H; must divide `model_dim`.
        score: the score of each head: a name (`"scaled_dot"`, `"additive"`, ...: `attnmem.attention.SCORES`),
            a score class (`Bilinear`), or a factory called as `score(query_dim=..., key_dim=...)`.
        dropout: dropout on the heads' concatenated context, before the output projection.
    """

    def __init__(
        self, model_dim: int, heads: int, score: str | Callable[..., nn.Module] = "scaled_dot", *, dropout: float = 0.0
    ) -> None:
        super().__init__()
        score = score_factory(score, owner="MultiHead")
        if heads < 1 or model_dim % heads:
            raise ValueError(f"MultiHead: heads ({heads}) must be >= 1 and divide model_dim ({model_dim})")
        self.heads, self.head_dim = heads, model_dim // heads
        self.q_proj = nn.Linear(model_dim, model_dim)
        self.k_proj = nn.Linear(model_dim, model_dim)
        self.v_proj = nn.Linear(model_dim, model_dim)
        self.out_proj = nn.Linear(model_dim, model_dim)
        self.scores = nn.ModuleList(score(query_dim=self.head_dim, key_dim=self.head_dim) for _ in range(heads))
        # scores without parameters or buffers (dot, scaled dot) are one function: heads fold into the batch
        self.shared = not any(True for _ in itertools.chain(self.scores.parameters(), self.scores.buffers()))
        self.dropout = nn.Dropout(dropout)

    def _check_inputs(self, **inputs: Tensor) -> None:
        for name, x in inputs.items():
            if x.dim() != 3 or x.shape[-1] != self.heads * self.head_dim:
                raise ValueError(f"MultiHead: {name} of shape {tuple(x.shape)}, expected (batch, length, "
                                 f"{self.heads * self.head_dim})")

    def _heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, Dh)

    def _attend_heads(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Every head's context (B, H, Tq, Dh) and weights (B, H, Tq, Tk) from `q`, `k`, `v` (B, H, T, Dh)."""
        b = q.shape[0]
        if self.shared:
            q, k, v = q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1)  # (B*H, T, Dh)
            folded = None if mask is None else mask.flatten(0, 1)  # (B*H, Tq, Tk)
            context, weights = attend(q, k, v, self.scores[0], attn_mask=folded, need_weights=need_weights)
            context = context.unflatten(0, (b, self.heads))  # (B, H, Tq, Dh)
            weights = None if weights is None else weights.unflatten(0, (b, self.heads))  # (B, H, Tq, Tk)
        else:
            masks = [None] * self.heads if mask is None else mask.unbind(1)
            heads = [
                attend(q[:, h], k[:, h], v[:, h], score, attn_mask=masks[h], need_weights=need_weights)
                for h, score in enumerate(self.scores)
            ]  # per head: (B, Tq, Dh), (B, Tq, Tk)
            context = torch.stack([c for c, _ in heads], 1)  # (B, H, Tq, Dh)
            # (B, H, Tq, Tk); with need_weights every head returned its weights, none is None
            weights = torch.stack(cast(list[Tensor], [w for _, w in heads]), 1) if need_weights else None
        return context, weights

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend `query` over `keys`/`values` with every head.

        Args:
            query: the queries.
            keys: what the queries are scored against.
            values: what the weights average, one per key.
            attn_mask: bool, True where a query may attend; the same for every head.
            key_padding_mask: bool, True where a key is padding.
            need_weights: False skips the weights (and, with `ScaledDot`, takes `F.scaled_dot_product_attention`).
            mask: deprecated: `attn_mask` under its old name; removed in 0.4.

        Shapes:
            - query: (B, Tq, D), D = model_dim
            - keys, values: (B, Tk, D)
            - attn_mask, mask: broadcastable to (B, Tq, Tk)
            - key_padding_mask: (B, Tk)
            - output: (B, Tq, D); weights: (B, H, Tq, Tk)

        Returns:
            `(output, weights)`; `weights` is None when skipped.
        """
        self._check_inputs(query=query, keys=keys, values=values)
        mask = allowed(torch.Size((query.shape[0], query.shape[1], keys.shape[1])),
                       _renamed(mask, attn_mask, "MultiHead"), key_padding_mask, owner="MultiHead")
        b, tq, d = query.shape
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(keys)), self._heads(self.v_proj(values))
        if mask is not None:
            mask = mask.expand(b, tq, keys.shape[1])  # a (Tq, Tk) mask too: (B, Tq, Tk)
            mask = mask.unsqueeze(1).expand(b, self.heads, tq, keys.shape[1])  # (B, H, Tq, Tk)
        context, weights = self._attend_heads(q, k, v, mask, need_weights)  # (B, H, Tq, Dh), (B, H, Tq, Tk)
        context = context.transpose(1, 2).reshape(b, tq, d)  # (B, Tq, D)
        return self.out_proj(self.dropout(context)), weights
