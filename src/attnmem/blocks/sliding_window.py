"""`SlidingWindow`: causal softmax attention over the last `window` positions (Beltagy et al. 2020, §3.1)."""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.attention import ScaledDot, attend
from attnmem.blocks.heads import merge_heads, split_heads

__all__ = ["SlidingWindow"]


class SlidingWindow(nn.Module):
    """Causal sliding-window attention: position t attends to positions t − window + 1 … t (Longformer, §3.1).

    Longformer's window is w/2 positions each side; a causal mixer sees only the past, so here the window is the
    `window` positions ending at t, t itself included (Zoology's sliding-window baseline, Arora et al. 2024). Each
    head scores with `ScaledDot` through `attend`, the package's one softmax attention: y_t = W_o [softmax(q_t K_wᵀ
    / √Dh) V_w]_heads, with K_w, V_w the window's keys and values. Inference keeps the last `window` keys and
    values of every head: `state_size` = window · 2 · d_model numbers per sequence. `forward` scores blocks of
    window queries against 2·window keys: O(T · window) time, not O(T²).

    Args:
        d_model: the width D of the input and output.
        window: how many positions each query sees, itself included; >= 1.
        heads: the number of heads H; must divide `d_model`.
    """

    def __init__(self, d_model: int, *, window: int = 64, heads: int = 1) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"SlidingWindow: window must be >= 1, got {window}")
        if heads < 1 or d_model % heads:
            raise ValueError(f"SlidingWindow: heads must be >= 1 and divide d_model ({d_model}), got {heads}")
        self.d_model, self.window, self.heads, self.head_dim = d_model, window, heads, d_model // heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.score = ScaledDot(self.head_dim, self.head_dim)

    @property
    def state_size(self) -> int:
        """The numbers one sequence keeps at inference: window · 2 · d_model (every head's keys and values)."""
        return self.window * 2 * self.d_model

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The queries, keys and values of every head, heads folded into the batch: each (B·H, T, Dh)."""
        b, t, _ = x.shape

        def split(y: Tensor) -> Tensor:
            return split_heads(y, self.heads).reshape(b * self.heads, t, self.head_dim)  # (B·H, T, Dh)

        return split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))

    def _merge(self, context: Tensor, b: int) -> Tensor:
        """The heads' contexts (B·H, T, Dh) concatenated and projected: (B, T, D)."""
        context = merge_heads(context.view(b, self.heads, context.shape[1], self.head_dim))  # (B, T, D)
        return cast(Tensor, self.out_proj(context))  # (B, T, D)

    def _blocks(self, n: int, c: int, device: torch.device) -> Tensor:
        """The band of `n` blocks of `c` queries over their 2c keys, the first c of block 0 padding: (N, C, 2C)."""
        query = torch.arange(n * c, device=device).view(n, c, 1)  # the positions of block i: i·c … i·c + c − 1
        key = torch.arange(-c, n * c, device=device).unfold(0, 2 * c, c).view(n, 1, 2 * c)  # i·c − c … i·c + c − 1
        lag = query - key  # (N, C, 2C)
        return (lag >= 0) & (lag < self.window) & (key >= 0)

    def forward(self, x: Tensor) -> Tensor:
        """Every position's attention over its window, all positions at once.

        Beyond one window, the queries go in blocks of C = window, each scored against the 2C keys ending with its last
        position under the band mask: O(T · window) scores, not O(T²).

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v = self._heads(x)  # (B·H, T, Dh)
        bh, t, d = q.shape
        if t <= self.window:  # one block: plain causal attention
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()  # (T, T)
            return self._merge(attend(q, k, v, self.score, attn_mask=causal, need_weights=False)[0], x.shape[0])
        c = self.window  # blocks of C queries, each reading the 2C keys that end with its last
        n = -(-t // c)
        q = F.pad(q, (0, 0, 0, n * c - t)).view(bh, n, c, d)  # (B·H, N, C, Dh)
        # keys and values: c zeros before position 0, in N + 1 blocks of C; block i reads i·c − c … i·c + c − 1, blocks
        # i and i + 1 side by side: (B·H, N, 2C, Dh) (as `unfold` would give them, whose backward is slower)
        blocks = (F.pad(y, (0, 0, c, n * c - t)).view(bh, n + 1, c, d) for y in (k, v))
        k, v = (torch.cat([y[:, :-1], y[:, 1:]], 2) for y in blocks)
        context, _ = attend(q, k, v, self.score, attn_mask=self._blocks(n, c, x.device), need_weights=False)
        return self._merge(context.reshape(bh, n * c, d)[:, :t], x.shape[0])

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map step by step: a queue of the last `window` keys and values, the reference form.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        q, k, v = self._heads(x)  # (B·H, T, Dh)
        contexts = []
        for t in range(x.shape[1]):
            start = max(0, t + 1 - self.window)  # the state: keys and values of positions start … t
            context, _ = attend(q[:, t:t + 1], k[:, start:t + 1], v[:, start:t + 1], self.score, need_weights=False)
            contexts.append(context)  # (B·H, 1, Dh)
        return self._merge(torch.cat(contexts, 1), x.shape[0])
