"""`LinearAttention`: causal linear attention, a kernel feature map in place of softmax (Katharopoulos et al. 2020)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.heads import merge_heads, split_heads

__all__ = ["LinearAttention"]


def _elu_plus_one(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1 (Katharopoulos et al. 2020, eq. 7): positive, so the normaliser φ(q)ᵀz is > 0."""
    return F.elu(x) + 1.0


def _identity(x: Tensor) -> Tensor:
    """φ(x) = x: plain linear attention, the unnormalised form of Zoology's and Based's baselines."""
    return x


FEATURE_MAPS: dict[str, Callable[[Tensor], Tensor]] = {"elu": _elu_plus_one, "identity": _identity}


class LinearAttention(nn.Module):
    """Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs", §3.2–3.3).

    Softmax similarity replaced by a kernel, sim(q, k) = φ(q)ᵀφ(k) (eqs. 4–6), gives in causal form (eqs. 8–11)

        S_i = S_{i-1} + φ(k_i) v_iᵀ,   z_i = z_{i-1} + φ(k_i),   y_i = φ(q_i)ᵀ S_i / (φ(q_i)ᵀ z_i + ε)

    per head, then the output projection. `forward` computes all positions at once, the masked quadratic form
    ((φ(Q)φ(K)ᵀ ⊙ M) V, M lower triangular); `recurrent` the S/z recursion. `normalize=False` drops the
    denominator, y_i = φ(q_i)ᵀ S_i, as Zoology's and Based's linear-attention baselines (Arora et al. 2024) do;
    then z is not kept. `state_size` = H · (Dk·Dv + Dk) with the normaliser, H · Dk·Dv without, Dk = Dv = D / H.

    Args:
        d_model: the width D of the input and output.
        feature_map: φ: "elu" (elu(x) + 1, the paper's eq. 7) or "identity" (only with `normalize=False`: its
            φ(q)ᵀz may be 0 or negative).
        normalize: divide by φ(q_i)ᵀ z_i (eq. 6); False reads φ(q_i)ᵀ S_i as it is.
        heads: the number of heads H; must divide `d_model`.
        eps: ε added to the denominator, as the paper's code does.
    """

    def __init__(
        self, d_model: int, *, feature_map: str = "elu", normalize: bool = True, heads: int = 1, eps: float = 1e-6
    ) -> None:
        super().__init__()
        if feature_map not in FEATURE_MAPS:
            raise ValueError(f"LinearAttention: feature_map must be one of {sorted(FEATURE_MAPS)}, got {feature_map!r}")
        if normalize and feature_map != "elu":
            raise ValueError(f"LinearAttention: normalize=True needs a positive feature map (elu), got "
                             f"feature_map={feature_map!r}: use normalize=False")
        if heads < 1 or d_model % heads:
            raise ValueError(f"LinearAttention: heads must be >= 1 and divide d_model ({d_model}), got {heads}")
        self.d_model, self.heads, self.head_dim = d_model, heads, d_model // heads
        self.feature_map, self.normalize, self.eps = feature_map, normalize, eps
        self.phi = FEATURE_MAPS[feature_map]
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    @property
    def state_size(self) -> int:
        """The numbers one sequence keeps at inference: H · (Dk·Dv + Dk), or H · Dk·Dv without the normaliser."""
        per_head = self.head_dim * self.head_dim + (self.head_dim if self.normalize else 0)
        return self.heads * per_head

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """φ(q), φ(k) and v of every head: each (B, H, T, Dh)."""
        q, k, v = (split_heads(proj(x), self.heads) for proj in (self.q_proj, self.k_proj, self.v_proj))
        return self.phi(q), self.phi(k), v

    def _merge(self, y: Tensor) -> Tensor:
        """The heads' outputs (B, H, T, Dh) concatenated and projected: (B, T, D)."""
        return cast(Tensor, self.out_proj(merge_heads(y)))  # (B, T, D)

    def forward(self, x: Tensor) -> Tensor:
        """All positions at once: the causal masked quadratic form (φ(Q)φ(K)ᵀ ⊙ M) V, M lower triangular.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v = self._heads(x)  # (B, H, T, Dh)
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()  # (T, T): j <= i
        sim = (q @ k.transpose(-1, -2)).masked_fill(~causal, 0.0)  # (B, H, T, T): φ(q_i)ᵀφ(k_j), j <= i
        y = sim @ v  # (B, H, T, Dv): φ(q_i)ᵀ S_i
        if self.normalize:
            y = y / (sim.sum(-1, keepdim=True) + self.eps)  # φ(q_i)ᵀ z_i = Σ_{j<=i} φ(q_i)ᵀφ(k_j)
        return self._merge(y)

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map step by step from the state S_i, z_i (eqs. 8–11): the reference form.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v = self._heads(x)  # (B, H, T, Dh)
        b, h, _, d = q.shape
        s = q.new_zeros(b, h, d, d)  # (B, H, Dk, Dv)
        z = q.new_zeros(b, h, d)  # (B, H, Dk)
        ys = []
        for i in range(x.shape[1]):
            s = s + k[:, :, i, :, None] * v[:, :, i, None, :]  # S_i = S_{i-1} + φ(k_i) v_iᵀ
            z = z + k[:, :, i]  # z_i = z_{i-1} + φ(k_i)
            y = (q[:, :, i, :, None] * s).sum(-2)  # (B, H, Dv): φ(q_i)ᵀ S_i
            if self.normalize:
                y = y / ((q[:, :, i] * z).sum(-1, keepdim=True) + self.eps)
            ys.append(y)
        return self._merge(torch.stack(ys, 2))  # (B, T, D)
