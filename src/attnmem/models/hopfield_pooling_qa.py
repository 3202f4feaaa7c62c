"""A bAbI reader built from Hopfield pooling (Ramsauer et al. 2020): the story is the stored set, pooled per hop."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.hopfield import HopfieldPooling
from attnmem.blocks.output import Output
from attnmem.blocks.position_encoding import bag_of_words, position_encoding
from attnmem.blocks.recency import recency

__all__ = ["HopfieldPoolingQA"]


class HopfieldPoolingQA(nn.Module):
    """Question answering over a story with `HopfieldPooling` layers (Ramsauer et al. 2020, §3).

    Each sentence is a position-encoded bag of words (Sukhbaatar et al. 2015, §4.1) plus a learned
    embedding of its recency; these are the stored patterns. The question u = Σ_j l_j ∘ B q_j is
    added to each pooling layer's learned state pattern, its pooled read-out o is added back
    (u ← u + o, one `HopfieldPooling` per hop), and the answer logits are W u. Each pooling is the plain
    update of the paper: keys Y W_K, values Y W_V, the state pattern in the key space (no normalisation,
    bias or output projection), β = `scaling`, `update_steps_max` updates after the first retrieval.

    `beta` and `update_steps` (0.2's names: `update_steps` counted the retrieval too) still work, with a
    DeprecationWarning, until 0.4.
    """

    families: ClassVar[tuple[str, ...]] = ("qa",)
    position: Tensor  # a buffer

    def __init__(self, *, vocab_size: int, num_answers: int, memory_size: int, sentence_len: int,
                 score: Callable[..., nn.Module], embed_dim: int = 32, hops: int = 2, scaling: float = 1.0,
                 update_steps_max: int = 0, beta: float | None = None, update_steps: int | None = None) -> None:
        super().__init__()
        scaling, update_steps_max = _renamed(scaling, update_steps_max, beta, update_steps)
        sizes = {"vocab_size": vocab_size, "num_answers": num_answers, "memory_size": memory_size,
                 "sentence_len": sentence_len, "embed_dim": embed_dim, "hops": hops}
        check_sizes("HopfieldPoolingQA", sizes)
        self.memory_size, self.sentence_len = memory_size, sentence_len
        self.story_embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.query_embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.recency = nn.Embedding(memory_size, embed_dim)
        self.pools = nn.ModuleList(_pooling(embed_dim, score, scaling, update_steps_max) for _ in range(hops))
        self.answer = nn.Linear(embed_dim, num_answers, bias=False)  # W
        self.register_buffer("position", position_encoding(sentence_len, embed_dim), persistent=False)  # (J, d)
        for embed in (self.story_embed, self.query_embed, self.recency):
            nn.init.normal_(embed.weight, std=0.1)
        with torch.no_grad():
            self.story_embed.weight[0].zero_()
            self.query_embed.weight[0].zero_()

    def encode(self, embed: nn.Embedding, words: Tensor) -> Tensor:
        """Position-weighted bag of words of `words (..., L)`: (..., d)."""
        return bag_of_words(embed.weight, words, self.position, owner="HopfieldPoolingQA",
                            padding_idx=embed.padding_idx)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        story, query = batch["story"], batch["query"]  # (B, S, L), (B, Lq)
        if story.shape[1] > self.memory_size:
            raise ValueError(f"HopfieldPoolingQA: a story of {story.shape[1]} sentences exceeds "
                             f"memory_size={self.memory_size}")
        slot_mask = story.ne(0).any(-1)  # (B, S) True for a real sentence (slots are left-aligned)
        stored = self.encode(self.story_embed, story) + self.recency(recency(slot_mask))  # (B, S, d), 0 = most recent
        u = self.encode(self.query_embed, query).unsqueeze(1)  # (B, 1, d)
        attention = []
        for pool in self.pools:
            o, weights = pool(stored, ~slot_mask, state=u, return_association=True)  # (B, d), (B, 1, 1, S)
            u = u + o.unsqueeze(1)
            attention.append(weights[:, 0, 0])  # (B, S)
        return Output(pred=self.answer(u.squeeze(1)), attention=attention)  # (B, num_answers)


def _pooling(embed_dim: int, score: Callable[..., nn.Module], scaling: float, steps: int) -> HopfieldPooling:
    """0.2's pooling: a state pattern in the key space, Y W_K and Y W_V without bias, nothing normalised."""
    off = {f"normalize_{name}": False for name in ("stored_pattern", "state_pattern", "pattern_projection")}
    off |= {f"{key}_affine": False for key in off}
    pool = HopfieldPooling(embed_dim, hidden_size=embed_dim, score=score, scaling=scaling, update_steps_max=steps,
                           update_steps_eps=0.0, state_pattern_as_static=True, input_bias=False,
                           disable_out_projection=True, **off)
    with torch.no_grad():  # 0.2's initialisation (hflayers' N(0, 0.02²) learns more slowly here)
        pool.pooling_weights.normal_(std=embed_dim**-0.5)
        core = pool.hopfield
        assert core.key_proj is not None and core.value_proj is not None  # stored patterns and values are not static
        core.key_proj.reset_parameters()
        core.value_proj.reset_parameters()
    return pool


def _renamed(scaling: float, steps_max: int, beta: float | None, update_steps: int | None) -> tuple[float, int]:
    if beta is not None:
        warnings.warn("HopfieldPoolingQA(beta=...) is deprecated and goes in 0.4: use scaling= (the same β)",
                      DeprecationWarning, stacklevel=3)
        scaling = beta
    if update_steps is not None:
        warnings.warn("HopfieldPoolingQA(update_steps=n) is deprecated and goes in 0.4: use update_steps_max=n-1 "
                      "(the updates after the first retrieval)", DeprecationWarning, stacklevel=3)
        if update_steps < 1:
            raise ValueError(f"HopfieldPoolingQA: update_steps must be >= 1, got {update_steps}")
        steps_max = update_steps - 1
    return scaling, steps_max
