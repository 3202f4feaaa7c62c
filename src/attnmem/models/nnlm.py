"""Neural probabilistic language model (Bengio et al. 2003)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.models.contract import WordVectors

__all__ = ["NNLM"]


class NNLM(nn.Module, WordVectors):
    """Bengio, Ducharme, Vincent & Jauvin 2003, "A Neural Probabilistic Language Model" (JMLR 3), §2 / eq. 1.

    The n-1 = `window` words before a word, x = (C(w_{t-1}), …, C(w_{t-n+1})) (the concatenated rows of
    the shared word features C), give the next word's logits y = b + W x + U tanh(d + H x) (eq. 1;
    `direct=False` drops the direct connections W, as the paper's W = 0 runs). The history is the left half
    of the batch's window, the target its centre; the softmax P(w_t | history) is left to the loss.
    `pred (B, V)`: the logits over the vocabulary. The word vectors are C's rows (`vectors()`).
    """

    families: ClassVar[tuple[str, ...]] = ("embeddings",)
    objective: ClassVar[str] = "next_word"  # cross-entropy of pred (B, V) against the centre word

    def __init__(
        self, *, vocab_size: int, window: int, embed_dim: int = 32, hidden_size: int = 64, direct: bool = True
    ) -> None:
        super().__init__()
        check_sizes(
            "NNLM", {"vocab_size": vocab_size, "window": window, "embed_dim": embed_dim, "hidden_size": hidden_size}
        )
        self.window = window
        self.C = nn.Embedding(vocab_size, embed_dim, padding_idx=0)  # word features, m = embed_dim
        self.H = nn.Linear(window * embed_dim, hidden_size)  # H x + d
        self.U = nn.Linear(hidden_size, vocab_size)  # U tanh(·) + b
        self.W = nn.Linear(window * embed_dim, vocab_size, bias=False) if direct else None

    def forward(self, batch: dict[str, Tensor]) -> Output:
        history = batch["window"][:, : self.window]  # (B, n-1): w_{t-n+1} … w_{t-1}
        x = self.C(history).flatten(1)  # (B, (n-1)·m)
        y = self.U(torch.tanh(self.H(x)))  # (B, V)
        if self.W is not None:
            y = y + self.W(x)  # eq. 1's direct connections
        return Output(pred=y)

    def vectors(self) -> Tensor:
        """The learned word vectors, row i for word id i: (V, m)."""
        return self.C.weight
