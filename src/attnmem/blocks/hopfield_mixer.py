"""`HopfieldMixer`: causal modern-Hopfield retrieval as a sequence mixer (Ramsauer et al. 2020, §3, eqs. 3 and 10)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

from attnmem.attention.scores import score_factory
from attnmem.blocks.heads import merge_heads, split_heads
from attnmem.blocks.hopfield_update import update
from attnmem.core.float32 import in_float32

__all__ = ["HopfieldMixer"]


class _LearnedBeta(nn.Module):
    """β · score(q, k) with one inverse temperature β = exp(log β) per head, learned or fixed (`Tempered`'s
    product, its β a parameter)."""

    def __init__(self, score: nn.Module, beta: float, heads: int, learn: bool) -> None:
        super().__init__()
        self.score = score
        self.log_beta = nn.Parameter(torch.full((heads, 1, 1), math.log(beta)), requires_grad=learn)  # (H, 1, 1)
        self.scales_query: bool = getattr(score, "linear_in_query", False)

    @in_float32  # a large β would amplify 16-bit rounding of the scores
    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        beta = self.log_beta.exp().to(query.dtype)  # (H, 1, 1) against (B, H, L, ·)
        if self.scales_query:
            return cast(Tensor, self.score(beta * query, keys))  # score(βq, k) = β·score(q, k): (B, H, L, S)
        return cast(Tensor, beta * self.score(query, keys))


class HopfieldMixer(nn.Module):
    """Causal Hopfield retrieval: Ramsauer et al. 2020, "Hopfield Networks is All You Need" (§3, eqs. 3 and 10).

    At step t the state pattern ξ_t = W_Q x_t retrieves from the stored patterns Y_t = [P_K; W_K x_{≤t}]: the
    past context's keys and, beside them, `memory` learned stored patterns P_K (the lookup of §3's
    "HopfieldLayer", a trainable memory that every sequence shares), reading the values [P_V; W_V x_{≤t}]:

        ξ ← Y_t softmax(β score(Y_t, ξ))    `steps` − 1 times (eq. 3 iterated: ξ moves to a fixed point)
        y_t = W_O [V_t softmax(β score(Y_t, ξ))]_heads    (eq. 10, the read of the final ξ)

    Three choices make it more than causal attention renamed: the learned patterns (a memory beside the context
    that no position writes: facts the model keeps across sequences, and somewhere for a query with no match in
    the context to go), the update steps (each one pulls ξ closer to one stored pattern, the retrieval sharpening
    that eq. 3 iterates and attention does once), and β as a learned inverse temperature per head (how sharply
    each head separates the patterns; §3: a large β retrieves one pattern, a small one their mean) in place of
    attention's fixed 1/√Dh. The scores go through `attend` and the updates through `hopfield_update.update`,
    as the `Hopfield` layer's do (with `update_steps_eps` 0: exactly `steps` updates, never stopped by the batch).

    state_size = 2 · max_len · d_model: the keys and values of the longest sequence, as attention's cache; the
    `memory` learned patterns are weights shared by every sequence, not state a sequence carries.

    Args:
        d_model: the width D of the input and output.
        heads: the number of heads H; must divide d_model.
        memory: S, the learned stored patterns of each head; >= 0 (0: the context alone).
        steps: retrievals per position; >= 1 (1: one read, the updates of eq. 3 from 2 on).
        beta: β's initial value (> 0); None: 1/√(d_model / heads), the scaled dot product's.
        learn_beta: learn β; False keeps it fixed.
        score: the similarity: a name ("dot", "cosine", ...), a score class or a factory `score(query_dim=,
            key_dim=)`.
        max_len: the longest sequence, for `state_size`.
    """

    def __init__(self, d_model: int, *, heads: int = 1, memory: int = 16, steps: int = 1, beta: float | None = None,
                 learn_beta: bool = True, score: str | Callable[..., nn.Module] = "dot", max_len: int = 512) -> None:
        super().__init__()
        if heads < 1 or d_model % heads:
            raise ValueError(f"HopfieldMixer: heads must be >= 1 and divide d_model ({d_model}), got {heads}")
        if memory < 0:
            raise ValueError(f"HopfieldMixer: memory (learned stored patterns) must be >= 0, got {memory}")
        if steps < 1:
            raise ValueError(f"HopfieldMixer: steps must be >= 1 (1: one retrieval), got {steps}")
        if beta is not None and not beta > 0:
            raise ValueError(f"HopfieldMixer: beta must be > 0 or None (1/sqrt(head width)), got {beta}")
        if max_len < 1:
            raise ValueError(f"HopfieldMixer: max_len must be >= 1, got {max_len}")
        self.d_model, self.heads, self.head_dim, self.steps = d_model, heads, d_model // heads, steps
        self.q_proj = nn.Linear(d_model, d_model)  # W_Q
        self.k_proj = nn.Linear(d_model, d_model)  # W_K
        self.v_proj = nn.Linear(d_model, d_model)  # W_V
        self.out_proj = nn.Linear(d_model, d_model)  # W_O
        self.memory_keys = nn.Parameter(torch.randn(heads, memory, self.head_dim) * 0.02)  # P_K (H, S, Dh)
        self.memory_values = nn.Parameter(torch.randn(heads, memory, self.head_dim) * 0.02)  # P_V (H, S, Dh)
        built = score_factory(score, owner="HopfieldMixer")(query_dim=self.head_dim, key_dim=self.head_dim)
        beta = 1.0 / math.sqrt(self.head_dim) if beta is None else beta
        self.score = _LearnedBeta(built, beta, heads, learn_beta)
        self.dropout = nn.Dropout(0.0)  # `update`'s dropout on ξ: none here (MixerLM drops the mixer's output)
        self.state_size = 2 * max_len * d_model

    @property
    def beta(self) -> Tensor:
        """β, one per head: (H,)."""
        return self.score.log_beta.detach().exp().flatten()

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The state patterns, keys and values of every head: each (B, H, T, Dh)."""
        q, k, v = (split_heads(proj(x), self.heads) for proj in (self.q_proj, self.k_proj, self.v_proj))
        return q, k, v

    def _stored(self, context: Tensor, patterns: Tensor) -> Tensor:
        """The learned patterns (H, S, Dh) before the context's (B, H, T, Dh): (B, H, S + T, Dh)."""
        learned = patterns.to(context.dtype).expand(context.shape[0], -1, -1, -1)
        return torch.cat([learned, context], dim=2)

    def _retrieve(self, query: Tensor, keys: Tensor, values: Tensor, keep: Tensor | None) -> Tensor:
        """The read of the final ξ after `steps` − 1 updates: (B, H, L, Dh)."""
        read, _ = update(query, self._stored(keys, self.memory_keys), self._stored(values, self.memory_values),
                         self.score, keep, steps_max=self.steps - 1, eps=0.0, dropout=self.dropout,
                         need_weights=False)
        return read

    def _merge(self, read: Tensor) -> Tensor:
        """The heads' reads (B, H, T, Dh) side by side, projected: (B, T, D)."""
        return cast(Tensor, self.out_proj(merge_heads(read)))  # (B, T, D)

    def forward(self, x: Tensor) -> Tensor:
        """Every position's retrieval from the learned patterns and its past, all positions at once.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence, position t a function of x_{≤t}.
        """
        query, keys, values = self._heads(x)  # (B, H, T, Dh)
        t, s = x.shape[1], self.memory_keys.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()  # (T, T) True = may retrieve
        keep = torch.cat([causal.new_ones(t, s), causal], dim=1)  # (T, S + T): the learned patterns always
        return self._merge(self._retrieve(query, keys, values, keep))

    def recurrent(self, x: Tensor) -> Tensor:
        """The same map step by step: the stored patterns grow by one key and value a step, the reference form.

        Args:
            x: the input sequence.

        Shapes:
            - x: (B, T, D)
            - output: (B, T, D)

        Returns:
            the mixed sequence.
        """
        query, keys, values = self._heads(x)  # (B, H, T, Dh)
        reads = [self._retrieve(query[:, :, t:t + 1], keys[:, :, :t + 1], values[:, :, :t + 1], None)
                 for t in range(x.shape[1])]  # each (B, H, 1, Dh)
        return self._merge(torch.cat(reads, dim=2))
