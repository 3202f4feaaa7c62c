"""`DeltaRule`: the delta-rule fast-weight memory (Schlag et al. 2021), trained chunkwise in the WY form (Yang et al.
2024)."""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.blocks.heads import merge_heads, split_heads

__all__ = ["DeltaRule"]


class DeltaRule(nn.Module):
    """The delta rule (Schlag, Irie & Schmidhuber 2021, "Linear Transformers Are Secretly Fast Weight Programmers").

    Per head, a fast-weight matrix S_t (Dv × Dk) replaces the value it holds for key k_t by v_t, at rate β_t:

        S_t = S_{t-1} + β_t (v_t − S_{t-1} k_t) k_tᵀ,   β_t = σ(w_β x_t),   y_t = S_t q_t

    with keys and queries L2-normalised (the choice of Yang et al. 2024; Schlag et al. pair the rule with DPFP
    features and sum normalisation, not offered here), then the output projection. `recurrent` is this recursion.
    `forward` is the chunkwise parallel form of Yang et al. 2024 ("Parallelizing Linear Transformers with the
    Delta Rule over Sequence Length", §3): within a chunk of C positions starting from the state S_0, the updates
    δ_i = β_i (v_i − S_{i-1} k_i), stacked as rows of Δ, solve the unit lower-triangular system
    (I + tril₋₁(diag(β) K Kᵀ)) Δ = diag(β)(V − K S_0ᵀ); with T = (I + tril₋₁(diag(β) K Kᵀ))⁻¹ (the UT transform),
    the WY representation W = T diag(β) K and the pseudo-values U = T diag(β) V give Δ = U − W S_0ᵀ, then
    Y = Q S_0ᵀ + (Q Kᵀ ⊙ M) Δ (M lower triangular, the diagonal included) and S_C = S_0 + Δᵀ K. The chunks run in
    order, all positions of a chunk at once. `state_size` = H · Dk·Dv, Dk = Dv = D / H.

    Args:
        d_model: the width D of the input and output.
        heads: the number of heads H; must divide `d_model`.
        chunk_size: C, the positions `forward` computes at once; the result does not depend on it.
    """

    def __init__(self, d_model: int, *, heads: int = 1, chunk_size: int = 64) -> None:
        super().__init__()
        if heads < 1 or d_model % heads:
            raise ValueError(f"DeltaRule: heads must be >= 1 and divide d_model ({d_model}), got {heads}")
        if chunk_size < 1:
            raise ValueError(f"DeltaRule: chunk_size must be >= 1, got {chunk_size}")
        self.d_model, self.heads, self.head_dim, self.chunk_size = d_model, heads, d_model // heads, chunk_size
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.beta_proj = nn.Linear(d_model, heads)  # w_β, one writing strength per head
        self.out_proj = nn.Linear(d_model, d_model)

    @property
    def state_size(self) -> int:
        """The numbers one sequence keeps at inference: H · Dk·Dv."""
        return self.heads * self.head_dim * self.head_dim

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """q, k (L2-normalised), v of every head, each (B, H, T, Dh), and β (B, H, T)."""
        q = F.normalize(split_heads(self.q_proj(x), self.heads), dim=-1)
        k = F.normalize(split_heads(self.k_proj(x), self.heads), dim=-1)
        beta = torch.sigmoid(self.beta_proj(x)).transpose(1, 2)  # (B, H, T)
        return q, k, split_heads(self.v_proj(x), self.heads), beta

    def _merge(self, y: Tensor) -> Tensor:
        """The heads' outputs (B, H, T, Dh) concatenated and projected: (B, T, D)."""
        return cast(Tensor, self.out_proj(merge_heads(y)))  # (B, T, D)

    def forward(self, x: Tensor) -> Tensor:
        """The chunkwise parallel form: the WY representation within a chunk, the state carried across chunks.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v, beta = self._heads(x)  # (B, H, T, Dh), (B, H, T)
        b, h, t, d = q.shape
        c = min(self.chunk_size, t)
        n = -(-t // c)  # chunks; the last is padded with zeros: β = 0, k = 0 write nothing
        q, k, v = (F.pad(y, (0, 0, 0, n * c - t)).view(b, h, n, c, d) for y in (q, k, v))  # (B, H, N, C, Dh)
        beta = F.pad(beta, (0, n * c - t)).view(b, h, n, c, 1)  # (B, H, N, C, 1)
        lower = (beta * k @ k.transpose(-1, -2)).tril(-1)  # (B, H, N, C, C): β_i k_iᵀk_j, j < i
        eye = torch.eye(c, dtype=x.dtype, device=x.device)
        rhs = torch.cat([beta * v, beta * k], -1)  # (B, H, N, C, 2·Dh): diag(β) V, diag(β) K
        # T diag(β) [V K] by forward substitution, T = (I + lower)⁻¹ never formed
        u, w = torch.linalg.solve_triangular(eye + lower, rhs, upper=False, unitriangular=True).split(d, -1)
        scores = (q @ k.transpose(-1, -2)).tril()  # (B, H, N, C, C): q_iᵀk_j, j <= i
        state = x.new_zeros(b, h, d, d)  # (B, H, Dk, Dv): S_0ᵀ
        ys = []
        # the chunks by `unbind`, whose backward stacks their gradients once (indexing's writes each into zeros)
        for u_i, w_i, q_i, s_i, k_i in zip(*(y.unbind(2) for y in (u, w, q, scores, k)), strict=True):
            delta = u_i - w_i @ state  # (B, H, C, Dv): Δ = U − W S_0ᵀ
            ys.append(q_i @ state + s_i @ delta)  # (B, H, C, Dv)
            state = state + k_i.transpose(-1, -2) @ delta  # S_Cᵀ = S_0ᵀ + Kᵀ Δ
        return self._merge(torch.cat(ys, 2)[:, :, :t])

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map step by step: S_t = S_{t-1} + β_t (v_t − S_{t-1} k_t) k_tᵀ, y_t = S_t q_t.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v, beta = self._heads(x)  # (B, H, T, Dh), (B, H, T)
        b, h, _, d = q.shape
        s = x.new_zeros(b, h, d, d)  # (B, H, Dv, Dk)
        ys = []
        for t in range(x.shape[1]):
            k_t = k[:, :, t, :, None]  # (B, H, Dk, 1)
            error = v[:, :, t, :, None] - s @ k_t  # (B, H, Dv, 1): v_t − S_{t-1} k_t
            s = s + beta[:, :, t, None, None] * error @ k_t.transpose(-1, -2)
            ys.append((s @ q[:, :, t, :, None]).squeeze(-1))  # (B, H, Dv): y_t = S_t q_t
        return self._merge(torch.stack(ys, 2))
