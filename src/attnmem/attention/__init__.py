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
import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention.additive_kernel import additive_scores
from attnmem.attention.edges import attend_edges, read_edges
from attnmem.core.float32 import in_float32

__all__ = [
    "Additive", "Bilinear", "Cosine", "Dot", "LeakyConcat", "MultiHead", "ScaledDot", "Trilinear", "attend",
    "attend_edges", "read_edges", "softmax",
]


def softmax(scores: Tensor, dim: int = -1) -> Tensor:
    """Softmax in at least float32: under mixed precision, bf16/fp16 scores give float32 weights that sum to 1."""
    if scores.dtype in (torch.float32, torch.float64):
        return torch.softmax(scores, dim=dim)
    return torch.softmax(scores, dim=dim, dtype=torch.float32)


def _check_dims(name: str, query_dim: int, key_dim: int, *, equal: bool) -> None:
    if query_dim < 1 or key_dim < 1:
        raise ValueError(f"{name}: query_dim and key_dim must be >= 1, got {query_dim} and {key_dim}")
    if equal and query_dim != key_dim:
        raise ValueError(
            f"{name} needs query_dim == key_dim (got {query_dim} and {key_dim}); "
            "use attention=bilinear or attention=additive for different widths"
        )


def _dot(query: Tensor, keys: Tensor) -> Tensor:
    """qᵀk of `query (..., Tq, D)` and `keys (..., Tk, D)`: (..., Tq, Tk).

    With one query (a memory read, a decoder step) it is computed as k q, so the keys' gradient comes out
    contiguous: the backward of q kᵀ gives it transposed, which an embedding's backward then copies.
    Batches of matrices go to `bmm` directly, without `matmul`'s reshapes and their backward.
    """
    if query.dim() == keys.dim() == 3 and query.shape[0] == keys.shape[0]:  # bmm: none of matmul's reshapes
        if query.shape[1] == 1:
            return torch.bmm(keys, query.transpose(1, 2)).transpose(1, 2)
        return torch.bmm(query, keys.transpose(1, 2))
    if query.shape[-2] == 1:
        return (keys @ query.transpose(-1, -2)).transpose(-1, -2)
    return query @ keys.transpose(-1, -2)


class Dot(nn.Module):
    """Dot-product score qᵀk (Luong et al. 2015, 'dot')."""

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        _check_dims("Dot", query_dim, key_dim, equal=True)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return _dot(query, keys)  # (B, Tq, Tk)


class ScaledDot(nn.Module):
    """Scaled dot-product score qᵀk / √d (Vaswani et al. 2017, eq. 1)."""

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        _check_dims("ScaledDot", query_dim, key_dim, equal=True)
        self.scale = 1.0 / math.sqrt(key_dim)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return _dot(query, keys) * self.scale  # (B, Tq, Tk)


class Bilinear(nn.Module):
    """Bilinear score qᵀWk (Luong et al. 2015, 'general'); query and key widths may differ."""

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        _check_dims("Bilinear", query_dim, key_dim, equal=False)
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return (query @ self.weight) @ keys.transpose(-1, -2)  # (B, Tq, Tk)


class Additive(nn.Module):
    """Additive score e(q, k) = vᵀ tanh(W q + U k) (Bahdanau et al. 2015, eq. 6 / appendix A.1.2).

    The formula runs as `additive_scores(W q, U k, v)`, a chunked kernel (`attention/additive_kernel.py`)
    that never holds the (B, Tq, Tk, H) tensor of tanh(W q + U k) whole.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        _check_dims("Additive", query_dim, key_dim, equal=False)
        hidden_dim = hidden_dim or key_dim
        if hidden_dim < 1:
            raise ValueError(f"Additive: hidden_dim must be >= 1, got {hidden_dim}")
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=True)  # U (+ bias)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """vᵀ tanh(W q + U k) for every query and key: (..., Tq, Tk)."""
        q, k = self.query_proj(query), self.key_proj(keys)  # (..., Tq, H), (..., Tk, H)
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        q = q.expand(*batch, *q.shape[-2:]).reshape(-1, *q.shape[-2:])  # (B, Tq, H)
        k = k.expand(*batch, *k.shape[-2:]).reshape(-1, *k.shape[-2:]).to(q.dtype)  # (B, Tk, H)
        scores = additive_scores(q, k, self.v.weight.squeeze(0).to(q.dtype))  # (B, Tq, Tk)
        return scores.view(*batch, *scores.shape[-2:])


class LeakyConcat(nn.Module):
    """GAT's score LeakyReLU(aᵀ[q ‖ k]) = LeakyReLU(a_qᵀq + a_kᵀk) (Veličković et al. 2018, eq. 1 and 3).

    The paper applies it to W h_i and W h_j; query and key widths may differ. Being monotone in a_kᵀk,
    it ranks the keys alike for every query (the "static attention" of Brody et al. 2022, GATv2).
    """

    def __init__(self, query_dim: int, key_dim: int, negative_slope: float = 0.2) -> None:
        super().__init__()
        _check_dims("LeakyConcat", query_dim, key_dim, equal=False)
        if negative_slope < 0:
            raise ValueError(f"LeakyConcat: negative_slope must be >= 0, got {negative_slope}")
        self.query_weight = nn.Parameter(torch.empty(query_dim))  # a_q, the first half of a
        self.key_weight = nn.Parameter(torch.empty(key_dim))  # a_k, the second half
        bound = math.sqrt(6.0 / (query_dim + key_dim + 1))  # Glorot on a (2F', 1), as the reference code
        nn.init.uniform_(self.query_weight, -bound, bound)
        nn.init.uniform_(self.key_weight, -bound, bound)
        self.negative_slope = negative_slope

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        q = query @ self.query_weight.to(query.dtype)  # (B, Tq)
        k = keys @ self.key_weight.to(keys.dtype)  # (B, Tk)
        return F.leaky_relu(q.unsqueeze(-1) + k.unsqueeze(-2), self.negative_slope)  # (B, Tq, Tk)


class Trilinear(nn.Module):
    """BiDAF's similarity α(h, u) = wᵀ[h; u; h∘u] (Seo et al. 2017, eq. 1), w = [w₁; w₂; w₃].

    Computed as w₁ᵀh + w₂ᵀu + (h∘w₃)ᵀu, never holding the (B, Tq, Tk, 3D) concatenation. Keys of another
    width are first projected to the query's width (a linear map without bias), so any two widths work.
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        _check_dims("Trilinear", query_dim, key_dim, equal=False)
        self.key_proj = nn.Linear(key_dim, query_dim, bias=False) if key_dim != query_dim else None
        bound = 1.0 / math.sqrt(3 * query_dim)  # nn.Linear(3D, 1)'s initialisation of w
        self.weight = nn.Parameter(torch.empty(3, query_dim).uniform_(-bound, bound))  # rows w₁, w₂, w₃

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        keys = keys if self.key_proj is None else self.key_proj(keys)  # (B, Tk, Dq)
        w = self.weight.to(query.dtype)
        by_query = (query @ w[0]).unsqueeze(-1)  # w₁ᵀh: (B, Tq, 1)
        by_key = (keys @ w[1]).unsqueeze(-2)  # w₂ᵀu: (B, 1, Tk)
        return by_query + by_key + (query * w[2]) @ keys.transpose(-1, -2)  # (B, Tq, Tk)


class Cosine(nn.Module):
    """Cosine similarity times a temperature β (Graves et al. 2014, eq. 5-6).

    `beta` is a fixed temperature (float) or, with `learn_beta=True`, its learned initial value.
    Without a temperature (β = 1) cosine scores lie in [-1, 1] and softmax is nearly uniform.
    """

    def __init__(
        self, query_dim: int, key_dim: int, beta: float = 10.0, learn_beta: bool = False, eps: float = 1e-8
    ) -> None:
        super().__init__()
        _check_dims("Cosine", query_dim, key_dim, equal=True)
        if beta <= 0:
            raise ValueError(f"Cosine: beta must be > 0, got {beta}")
        log_beta = torch.tensor(math.log(beta))
        if learn_beta:
            self.log_beta = nn.Parameter(log_beta)
        else:
            self.register_buffer("log_beta", log_beta)
        self.eps = eps

    @property
    def beta(self) -> Tensor:
        """The current temperature β."""
        return self.log_beta.exp()

    @in_float32  # β (or the NTM's key strength) multiplies it: 16-bit rounding would be amplified
    def similarity(self, query: Tensor, keys: Tensor) -> Tensor:
        """Cosine similarity K[q, k] in [-1, 1], without the temperature."""
        # q·k / (|q| |k|), the norms dividing the (Tq, Tk) dots: no normalised copy of the keys (an NTM's memory)
        q_norm = query.norm(dim=-1, keepdim=True).clamp_min(self.eps)  # (B, Tq, 1)
        k_norm = keys.norm(dim=-1).clamp_min(self.eps).unsqueeze(-2)  # (B, 1, Tk)
        return (query @ keys.transpose(-1, -2)) / (q_norm * k_norm)  # (B, Tq, Tk)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.beta * self.similarity(query, keys)  # (B, Tq, Tk)


def attend(
    query: Tensor,
    keys: Tensor,
    values: Tensor,
    score: nn.Module,
    *,
    mask: Tensor | None = None,
    need_weights: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Softmax attention of `query (B, Tq, Dq)` over `keys (B, Tk, Dk)`, reading `values (B, Tk, Dv)`.

    Args:
        mask: bool, True where a query may attend; broadcast to (B, Tq, Tk). A fully masked row
            gives zero weights and a zero context.
        need_weights: when False and `score` is `ScaledDot`, uses `F.scaled_dot_product_attention`
            and returns `None` for the weights.

    Returns:
        `(context (B, Tq, Dv), weights (B, Tq, Tk) or None)`; the weights are at least float32.
    """
    if not need_weights and type(score) is ScaledDot:
        return _fast_scaled_dot(query, keys, values, mask), None
    scores = score(query, keys)  # (B, Tq, Tk)
    if mask is None:
        weights = softmax(scores)
    else:
        mask = mask.expand_as(scores)
        scores = scores.masked_fill(~mask, float("-inf"))
        # a fully masked row would be NaN after softmax: give it zeros instead
        weights = softmax(scores).masked_fill(~mask, 0.0)
    context = weights @ values  # (B, Tq, Dv)
    return context, weights


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
    """

    def __init__(self, model_dim: int, heads: int, score, *, dropout: float = 0.0) -> None:
        super().__init__()
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

    def _heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, Dh)

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, *, mask: Tensor | None = None, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Attend `query (B, Tq, D)` over `keys`/`values (B, Tk, D)`; weights are (B, H, Tq, Tk)."""
        b, tq, d = query.shape
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(keys)), self._heads(self.v_proj(values))
        if mask is not None:
            mask = mask.unsqueeze(1).expand(b, self.heads, tq, keys.shape[1])  # (B, H, Tq, Tk)
        if self.shared:
            q, k, v = q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1)  # (B*H, T, Dh)
            folded = None if mask is None else mask.flatten(0, 1)  # (B*H, Tq, Tk)
            context, weights = attend(q, k, v, self.scores[0], mask=folded, need_weights=need_weights)
            context = context.unflatten(0, (b, self.heads))  # (B, H, Tq, Dh)
            weights = None if weights is None else weights.unflatten(0, (b, self.heads))  # (B, H, Tq, Tk)
        else:
            masks = [None] * self.heads if mask is None else mask.unbind(1)
            heads = [
                attend(q[:, h], k[:, h], v[:, h], score, mask=masks[h], need_weights=need_weights)
                for h, score in enumerate(self.scores)
            ]  # per head: (B, Tq, Dh), (B, Tq, Tk)
            context = torch.stack([c for c, _ in heads], 1)  # (B, H, Tq, Dh)
            weights = torch.stack([w for _, w in heads], 1) if need_weights else None  # (B, H, Tq, Tk)
        context = context.transpose(1, 2).reshape(b, tq, d)  # (B, Tq, D)
        return self.out_proj(self.dropout(context)), weights
