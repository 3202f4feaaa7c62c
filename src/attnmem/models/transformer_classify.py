"""Encoder-only Transformer for the `classify` family: the document's words as one sequence, read by a readout."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.transformer import encoder_stack

__all__ = ["TransformerClassify"]


class TransformerClassify(nn.Module):
    """Encoder-only Transformer (Vaswani et al. 2017, §3.1) as a document classifier.

    The sentences' words form one sequence (padding dropped) with positions; a learned readout vector in
    front (BERT's [CLS], Devlin et al. 2019) attends with bidirectional self-attention, and its final state
    is classified. In eval mode `Output.attention` holds, per layer, the readout's attention (mean over
    heads) summed over each sentence's words, (B, S): which sentence the layer read.
    """

    families: ClassVar[tuple[str, ...]] = ("classify",)

    def __init__(self, *, vocab_size: int, num_classes: int, score: Callable[..., nn.Module], pad_id: int = 0,
                 d_model: int = 32, heads: int = 4, layers: int = 2, d_ff: int = 128, dropout: float = 0.1,
                 positions: str = "sinusoidal", max_len: int = 2048, norm_first: bool = True) -> None:
        super().__init__()
        check_sizes("TransformerClassify", {"vocab_size": vocab_size, "num_classes": num_classes})
        self.pad_id, self.scale = pad_id, math.sqrt(d_model)
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)  # times √d in forward: unit variance
        self.readout = nn.Parameter(torch.randn(d_model) * d_model**-0.5)
        self.positions, self.encoder = encoder_stack(
            "TransformerClassify", score=score, d_model=d_model, heads=heads, layers=layers, d_ff=d_ff,
            dropout=dropout, positions=positions, max_len=max_len, norm_first=norm_first,
        )
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        document = batch["document"].long()  # (B, S, L)
        b, s, length = document.shape
        tokens = document.view(b, s * length)  # (B, S·L)
        sentence = torch.arange(s, device=document.device).repeat_interleave(length).expand(b, -1)  # (B, S·L)
        keep = tokens != self.pad_id
        order = torch.sort((~keep).byte(), dim=1, stable=True).indices[:, : max(1, int(keep.sum(1).max()))]
        tokens, sentence = tokens.gather(1, order), sentence.gather(1, order)  # (B, T): words first
        x = torch.cat([self.readout.expand(b, 1, -1), self.embed(tokens) * self.scale], dim=1)  # (B, 1 + T, D)
        mask = torch.cat([torch.ones_like(tokens[:, :1], dtype=torch.bool), tokens != self.pad_id], dim=1)
        hidden, weights = self.encoder(self.positions(x), mask=mask.unsqueeze(1), need_weights=not self.training)
        attention = []
        for w in weights:  # (B, H, 1 + T, 1 + T)
            readout = w[:, :, 0, 1:].mean(1)  # (B, T)
            attention.append(readout.new_zeros(b, s).scatter_add_(1, sentence, readout))  # (B, S)
        return Output(pred=self.head(hidden[:, 0]), attention=attention)
