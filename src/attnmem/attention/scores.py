"""The scores of attention: each maps `query (B, Tq, Dq)` and `keys (B, Tk, Dk)` to `scores (B, Tq, Tk)`.

2-D `query (Tq, Dq)` and `keys (Tk, Dk)` give `(Tq, Tk)`. A layer takes a score as `score=`: a name of `SCORES`,
a class, or a factory called as `score(query_dim=..., key_dim=...)` (`score_factory`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention.additive_kernel import additive_scores
from attnmem.attention.score_parts import check_dims, dot
from attnmem.core.float32 import in_float32

__all__ = [
    "SCORES", "Additive", "Bilinear", "Cosine", "Dot", "LeakyConcat", "ScaledDot", "Trilinear", "score_factory",
    "softmax",
]


def softmax(scores: Tensor, dim: int = -1) -> Tensor:
    """Softmax in at least float32: under mixed precision, bf16/fp16 scores give float32 weights that sum to 1."""
    if scores.dtype in (torch.float32, torch.float64):
        return torch.softmax(scores, dim=dim)
    return torch.softmax(scores, dim=dim, dtype=torch.float32)


class Dot(nn.Module):
    """Dot-product score qᵀk (Luong et al. 2015, 'dot').

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk; must equal `query_dim`.
    """

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        check_dims("Dot", query_dim, key_dim, equal=True)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """qᵀk of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, D), or (Tq, D) unbatched
            - keys: (B, Tk, D), or (Tk, D) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        return dot(query, keys)  # (B, Tq, Tk)


class ScaledDot(nn.Module):
    """Scaled dot-product score qᵀk / √d (Vaswani et al. 2017, eq. 1).

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk; must equal `query_dim`.
    """

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        check_dims("ScaledDot", query_dim, key_dim, equal=True)
        self.scale = 1.0 / math.sqrt(key_dim)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """qᵀk / √D of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, D), or (Tq, D) unbatched
            - keys: (B, Tk, D), or (Tk, D) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        return dot(query, keys) * self.scale  # (B, Tq, Tk)


class Bilinear(nn.Module):
    """Bilinear score qᵀWk (Luong et al. 2015, 'general'); query and key widths may differ.

    W (Dq, Dk) is a parameter, Xavier-uniform initialised.

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk (may differ from `query_dim`).
    """

    linear_in_query: ClassVar[bool] = True
    linear_in_key: ClassVar[bool] = True

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        check_dims("Bilinear", query_dim, key_dim, equal=False)
        self.weight = nn.Parameter(torch.empty(query_dim, key_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """qᵀWk of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, Dq), or (Tq, Dq) unbatched
            - keys: (B, Tk, Dk), or (Tk, Dk) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        return (query @ self.weight) @ keys.transpose(-1, -2)  # (B, Tq, Tk)


class Additive(nn.Module):
    """Additive score e(q, k) = vᵀ tanh(W q + U k) (Bahdanau et al. 2015, eq. 6 / appendix A.1.2).

    The formula runs as `additive_scores(W q, U k, v)`, a chunked kernel (`attention/additive_kernel.py`)
    that never holds the (B, Tq, Tk, H) tensor of tanh(W q + U k) whole.

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk (may differ from `query_dim`).
        hidden_dim: the width H of W q + U k; default `key_dim`.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        check_dims("Additive", query_dim, key_dim, equal=False)
        hidden_dim = hidden_dim or key_dim
        if hidden_dim < 1:
            raise ValueError(f"Additive: hidden_dim must be >= 1, got {hidden_dim}")
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=True)  # U (+ bias)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """vᵀ tanh(W q + U k) of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, Dq), or (Tq, Dq) unbatched
            - keys: (B, Tk, Dk), or (Tk, Dk) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
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

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk (may differ from `query_dim`).
        negative_slope: the slope of the LeakyReLU below 0 (the paper's 0.2).
    """

    def __init__(self, query_dim: int, key_dim: int, negative_slope: float = 0.2) -> None:
        super().__init__()
        check_dims("LeakyConcat", query_dim, key_dim, equal=False)
        if negative_slope < 0:
            raise ValueError(f"LeakyConcat: negative_slope must be >= 0, got {negative_slope}")
        self.query_weight = nn.Parameter(torch.empty(query_dim))  # a_q, the first half of a
        self.key_weight = nn.Parameter(torch.empty(key_dim))  # a_k, the second half
        bound = math.sqrt(6.0 / (query_dim + key_dim + 1))  # Glorot on a (2F', 1), as the reference code
        nn.init.uniform_(self.query_weight, -bound, bound)
        nn.init.uniform_(self.key_weight, -bound, bound)
        self.negative_slope = negative_slope

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """LeakyReLU(a_qᵀq + a_kᵀk) of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, Dq), or (Tq, Dq) unbatched
            - keys: (B, Tk, Dk), or (Tk, Dk) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        q = query @ self.query_weight.to(query.dtype)  # (B, Tq)
        k = keys @ self.key_weight.to(keys.dtype)  # (B, Tk)
        return F.leaky_relu(q.unsqueeze(-1) + k.unsqueeze(-2), self.negative_slope)  # (B, Tq, Tk)


class Trilinear(nn.Module):
    """BiDAF's similarity α(h, u) = wᵀ[h; u; h∘u] (Seo et al. 2017, eq. 1), w = [w₁; w₂; w₃].

    Computed as w₁ᵀh + w₂ᵀu + (h∘w₃)ᵀu, never holding the (B, Tq, Tk, 3D) concatenation. Keys of another
    width are first projected to the query's width (a linear map without bias), so any two widths work.

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk (may differ from `query_dim`).
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        check_dims("Trilinear", query_dim, key_dim, equal=False)
        self.key_proj = nn.Linear(key_dim, query_dim, bias=False) if key_dim != query_dim else None
        bound = 1.0 / math.sqrt(3 * query_dim)  # nn.Linear(3D, 1)'s initialisation of w
        self.weight = nn.Parameter(torch.empty(3, query_dim).uniform_(-bound, bound))  # rows w₁, w₂, w₃

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """wᵀ[q; k; q∘k] of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, Dq), or (Tq, Dq) unbatched
            - keys: (B, Tk, Dk), or (Tk, Dk) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        keys = keys if self.key_proj is None else self.key_proj(keys)  # (B, Tk, Dq)
        w = self.weight.to(query.dtype)
        by_query = (query @ w[0]).unsqueeze(-1)  # w₁ᵀh: (B, Tq, 1)
        by_key = (keys @ w[1]).unsqueeze(-2)  # w₂ᵀu: (B, 1, Tk)
        return by_query + by_key + (query * w[2]) @ keys.transpose(-1, -2)  # (B, Tq, Tk)


class Cosine(nn.Module):
    """Cosine similarity times a temperature β (Graves et al. 2014, eq. 5-6).

    `beta` is a fixed temperature (float) or, with `learn_beta=True`, its learned initial value.
    Without a temperature (β = 1) cosine scores lie in [-1, 1] and softmax is nearly uniform.

    Args:
        query_dim: the width of a query, Dq.
        key_dim: the width of a key, Dk; must equal `query_dim`.
        beta: the temperature β (> 0), or its initial value when learned.
        learn_beta: learn β (as log β, a parameter) instead of keeping it fixed.
        eps: the smallest norm a query or key is divided by (a zero vector scores 0, not NaN).
    """

    def __init__(
        self, query_dim: int, key_dim: int, beta: float = 10.0, learn_beta: bool = False, eps: float = 1e-8
    ) -> None:
        super().__init__()
        check_dims("Cosine", query_dim, key_dim, equal=True)
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
        """Cosine similarity K[q, k] in [-1, 1], without the temperature (the NTM's and DNC's content lookup).

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, D), or (Tq, D) unbatched
            - keys: (B, Tk, D), or (Tk, D) unbatched

        Returns:
            q·k / (|q| |k|): (B, Tq, Tk), or (Tq, Tk), in at least float32.
        """
        # q·k / (|q| |k|), the norms dividing the (Tq, Tk) dots: no normalised copy of the keys (an NTM's memory)
        q_norm: Tensor = query.norm(dim=-1, keepdim=True).clamp_min(self.eps)  # (B, Tq, 1)
        k_norm: Tensor = keys.norm(dim=-1).clamp_min(self.eps).unsqueeze(-2)  # (B, 1, Tk)
        return (query @ keys.transpose(-1, -2)) / (q_norm * k_norm)  # (B, Tq, Tk)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """β q·k / (|q| |k|) of every query against every key.

        Args:
            query: the queries.
            keys: the keys.

        Shapes:
            - query: (B, Tq, D), or (Tq, D) unbatched
            - keys: (B, Tk, D), or (Tk, D) unbatched

        Returns:
            The scores (B, Tq, Tk), or (Tq, Tk), before any softmax.
        """
        return self.beta * self.similarity(query, keys)  # (B, Tq, Tk)


SCORES: dict[str, type[nn.Module]] = {
    "dot": Dot, "scaled_dot": ScaledDot, "bilinear": Bilinear, "additive": Additive, "cosine": Cosine,
    "leaky_concat": LeakyConcat, "trilinear": Trilinear,
}  # the names a layer's `score=` takes, those of conf/attention/


def score_factory(score: str | Callable[..., nn.Module], *, owner: str) -> Callable[..., nn.Module]:
    """The factory `score(query_dim=, key_dim=)` of a layer's `score=`: a name of `SCORES`, a class or a factory."""
    if isinstance(score, str):
        if score not in SCORES:
            raise ValueError(f"{owner}: unknown score {score!r}: one of {', '.join(map(repr, SCORES))}, a score "
                             "class such as Cosine, or a factory called as score(query_dim=..., key_dim=...)")
        return SCORES[score]
    if isinstance(score, nn.Module):
        name = type(score).__name__
        raise TypeError(f"{owner}: score={name}(...) is a built score; pass the class ({name}), its name or "
                        f"functools.partial({name}, ...): the layer builds its scores with the widths it needs")
    if not callable(score):
        raise TypeError(f"{owner}: score must be a name, a score class or a factory, got {type(score).__name__}")
    return score
