"""Word embeddings: pretrained vectors when the data gives them, else a trained table."""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["embedding"]


def embedding(vocab_size: int, embed_dim: int, embeddings: Tensor | None, freeze: bool) -> nn.Embedding:
    """Word embeddings: pretrained ones when given (their width wins over `embed_dim`), else random."""
    if embeddings is not None:
        return nn.Embedding.from_pretrained(embeddings.float(), freeze=freeze, padding_idx=0)
    return nn.Embedding(vocab_size, embed_dim, padding_idx=0)
