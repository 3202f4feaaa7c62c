"""The recurrent baseline of the `qa` family: the story's words, then the question's, read as one sequence."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import Encoder, RNNOptions, check_rnn_options, compact

__all__ = ["RNNQA"]


class RNNQA(nn.Module):
    """The LSTM baseline of Weston et al. 2015 and Sukhbaatar et al. 2015 (§5) for bAbI.

    The story's words, then the query's, are one sequence (padding, word id `pad_id`, dropped) read by a
    stacked RNN/LSTM/GRU `Encoder` (`bidirectional`: `hidden_size // 2` units per direction); the answer
    class comes from a linear layer on the last layer's final state. `Output.attention` is empty.
    """

    families: ClassVar[tuple[str, ...]] = ("qa",)

    def __init__(
        self,
        *,
        vocab_size: int,
        num_answers: int,
        pad_id: int = 0,
        cell: str = "lstm",
        embed_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_sizes("RNNQA", {"vocab_size": vocab_size, "num_answers": num_answers})
        options = RNNOptions(cell=cell, embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                             bidirectional=bidirectional, dropout=dropout)
        check_rnn_options("RNNQA", **options)
        self.pad_id = pad_id
        self.encoder = Encoder(vocab_size=vocab_size, pad_id=pad_id, **options)
        self.head = nn.Linear(hidden_size, num_answers)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        words = torch.cat([batch["story"].flatten(1), batch["query"]], dim=1)  # (B, S*L + Lq)
        _, final, _ = self.encoder(compact(words.long(), self.pad_id))
        h = final[0] if isinstance(final, tuple) else final  # (layers, B, H)
        return Output(pred=self.head(h[-1]))  # (B, num_answers)
