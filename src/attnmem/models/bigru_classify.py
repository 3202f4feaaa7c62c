"""The flat recurrent baseline of the `classify` family: one bidirectional GRU over the whole document, averaged."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import Encoder, RNNOptions, check_rnn_options, compact

__all__ = ["BiGRUClassify"]


class BiGRUClassify(nn.Module):
    """A bidirectional GRU over the document's words, its states averaged (mean pooling), then a linear layer.

    The flat, attention-free counterpart of HAN (Yang et al. 2016; Tang et al. 2015's GRU with average
    pooling): the sentences' words read as one sequence (padding dropped), `hidden_size // 2` units per
    direction, the mean of the states over the document's words classified. `Output.attention` is empty.
    """

    families: ClassVar[tuple[str, ...]] = ("classify",)

    def __init__(self, *, vocab_size: int, num_classes: int, pad_id: int = 0, embed_dim: int = 64,
                 hidden_size: int = 64, num_layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        check_sizes("BiGRUClassify", {"vocab_size": vocab_size, "num_classes": num_classes})
        options = RNNOptions(cell="gru", embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                             bidirectional=True, dropout=dropout)
        check_rnn_options("BiGRUClassify", **options)
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size=vocab_size, pad_id=pad_id, **options)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size, num_classes)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        words = compact(batch["document"].flatten(1).long(), self.pad_id)  # (B, T)
        states, _, mask = self.encoder(words)  # (B, T, H), (B, T)
        mean = (states * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)  # (B, H)
        return Output(pred=self.head(self.dropout(mean)))  # (B, C)
