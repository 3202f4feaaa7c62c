"""The position-encoded bag of words of Sukhbaatar et al. 2015 (§4.1): one vector per sentence."""

from __future__ import annotations

import torch
from torch import Tensor

from attnmem.blocks.embedding import lookup

__all__ = ["bag_of_words", "position_encoding"]


def position_encoding(sentence_len: int, embed_dim: int) -> Tensor:
    """Position encoding l_kj = 1 + 4(k - (d+1)/2)(j - (J+1)/2) / (d J), 1-indexed (§4.1); (J, d)."""
    j = torch.arange(1, sentence_len + 1, dtype=torch.float32).unsqueeze(1)  # (J, 1)
    k = torch.arange(1, embed_dim + 1, dtype=torch.float32).unsqueeze(0)  # (1, d)
    return 1 + 4 * (k - (embed_dim + 1) / 2) * (j - (sentence_len + 1) / 2) / (embed_dim * sentence_len)


def bag_of_words(weight: Tensor, words: Tensor, encoding: Tensor, *, owner: str, padding_idx: int | None = 0) -> Tensor:
    """m = Σ_j l_j ∘ E x_j of `words (..., L)` with the table `weight (V, d)` and `encoding (J, d)`: (..., d).

    One J for every batch, however much padding it has (as MemN2N's reference code); a sentence longer
    than J is a ValueError naming `sentence_len`.
    """
    length = words.shape[-1]
    if length > encoding.shape[0]:
        raise ValueError(f"{owner}: sentences of {length} words exceed sentence_len={encoding.shape[0]}")
    vectors = lookup(weight, words, padding_idx)  # (..., L, d)
    return (vectors * encoding[:length]).sum(-2)  # (..., d)
