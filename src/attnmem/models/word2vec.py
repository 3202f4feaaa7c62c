"""word2vec: continuous bag-of-words and skip-gram with negative sampling (Mikolov et al. 2013)."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.models.contract import WordVectors

__all__ = ["Word2Vec"]

MODES = ("skipgram", "cbow")


class Word2Vec(nn.Module, WordVectors):
    """Mikolov, Chen, Corrado & Dean 2013, "Efficient Estimation of Word Representations in Vector Space"
    (arXiv:1301.3781, §3.1 CBOW, §3.2 skip-gram), trained by negative sampling as in Mikolov, Sutskever, Chen,
    Corrado & Dean 2013, "Distributed Representations of Words and Phrases and their Compositionality" (NeurIPS).

    Each word has an input vector v_w and an output vector v'_w. Skip-gram: the centre word w_I predicts each
    context word w_O of its window, logit v'_{w_O}ᵀ v_{w_I}; CBOW: the mean of the context's input vectors
    predicts the centre. Negative sampling (eq. 4) scores the K noise words of the batch the same way; the
    family module minimises −log σ(v'_{w_O}ᵀ h) − Σ_k log σ(−v'_{w_k}ᵀ h). `pred (B, P, 1+K)`: for each
    of P predictions (skip-gram: the 2w context positions, whose pads the loss skips; CBOW: P = 1) the
    positive logit then the K negative ones; skip-gram's P pairs of one centre share its K noise words.
    Input vectors start U(−0.5/d, 0.5/d), output vectors at 0, as in word2vec.c; `vectors()` are the inputs.
    """

    families: ClassVar[tuple[str, ...]] = ("embeddings",)
    objective: ClassVar[str] = "negative_sampling"  # logistic loss: pred[..., 0] positive, pred[..., 1:] noise

    def __init__(self, *, vocab_size: int, window: int, embed_dim: int = 100, mode: str = "skipgram") -> None:
        super().__init__()
        check_sizes("Word2Vec", {"vocab_size": vocab_size, "window": window, "embed_dim": embed_dim})
        if mode not in MODES:
            raise ValueError(f"Word2Vec: mode must be one of {MODES}, got {mode!r}")
        self.window, self.mode = window, mode
        self.input = nn.Embedding(vocab_size, embed_dim, padding_idx=0)  # v_w
        self.output = nn.Embedding(vocab_size, embed_dim, padding_idx=0)  # v'_w
        nn.init.uniform_(self.input.weight, -0.5 / embed_dim, 0.5 / embed_dim)
        nn.init.zeros_(self.output.weight)
        with torch.no_grad():
            self.input.weight[0].zero_()

    def forward(self, batch: dict[str, Tensor]) -> Output:
        window, negatives = batch["window"], batch["negatives"]  # (B, 2w+1), (B, K)
        centre = window[:, self.window]  # (B,)
        context = torch.cat([window[:, : self.window], window[:, self.window + 1 :]], dim=1)  # (B, 2w)
        if self.mode == "skipgram":
            h = self.input(centre).unsqueeze(1)  # (B, 1, d): v_{w_I}
            targets = torch.cat(
                [context.unsqueeze(-1), negatives.unsqueeze(1).expand(-1, context.shape[1], -1)], dim=-1
            )  # (B, 2w, 1+K)
            logits = (self.output(targets) * h.unsqueeze(2)).sum(-1)  # (B, 2w, 1+K)
            return Output(pred=logits)
        real = (context != 0).unsqueeze(-1).float()  # (B, 2w, 1)
        h = (self.input(context) * real).sum(1) / real.sum(1).clamp_min(1.0)  # (B, d): mean of the context
        targets = torch.cat([centre.unsqueeze(1), negatives], dim=1)  # (B, 1+K)
        logits = (self.output(targets) * h.unsqueeze(1)).sum(-1)  # (B, 1+K)
        return Output(pred=logits.unsqueeze(1))  # (B, 1, 1+K)

    def vectors(self) -> Tensor:
        """The learned (input) word vectors, row i for word id i: (V, d)."""
        return self.input.weight
