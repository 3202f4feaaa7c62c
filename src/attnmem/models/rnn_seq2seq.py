"""The plain RNN encoder-decoder of Sutskever et al. 2014 for the `seq2seq` family."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import Encoder, RNNOptions, check_rnn_options, layer_state, stacked, step_state
from attnmem.core.float32 import recurrent

__all__ = ["RNNSeq2Seq"]


class RNNSeq2Seq(nn.Module):
    """The plain encoder-decoder of Sutskever et al. 2014 ("Sequence to Sequence Learning with Neural Networks").

    An `Encoder` (a stacked, optionally bidirectional RNN/LSTM/GRU; `hidden_size // 2` units per
    direction) reads the source; the decoder RNN starts from its final state (per layer) and models
    p(y_t | y_<t, x) from its own state alone: no attention, so the whole source must pass through a
    fixed-size vector (§2). `encode`/`decode_step` serve greedy and beam search. `Output.attention` is empty.
    """

    families: ClassVar[tuple[str, ...]] = ("seq2seq",)

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        pad_id: int = 0,
        cell: str = "lstm",
        embed_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_sizes("RNNSeq2Seq", {"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size})
        options = RNNOptions(cell=cell, embed_dim=embed_dim, hidden_size=hidden_size, num_layers=num_layers,
                             bidirectional=bidirectional, dropout=dropout)
        check_rnn_options("RNNSeq2Seq", **options)
        self.encoder = Encoder(vocab_size=src_vocab_size, pad_id=pad_id, **options)
        self.embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=pad_id)
        self.decoder = stacked(cell, embed_dim, hidden_size, num_layers, dropout)
        self.out = nn.Linear(hidden_size, tgt_vocab_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        _, final, _ = self.encoder(batch["src"])
        states, _ = recurrent(self.decoder, self.embed(batch["tgt"][:, :-1].long()), final)  # (B, Lt-1, H)
        return Output(pred=self.out(states))  # (B, Lt-1, V)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """The decoding state of `src (B, Ls)`: the encoder's final state, batch first."""
        return step_state(self.encoder(src)[1])

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """Next-token logits (B, V) after feeding `tokens (B,)`, and the new state."""
        out, final = recurrent(self.decoder, self.embed(tokens.long()).unsqueeze(1), layer_state(state))
        return self.out(out[:, 0]), step_state(final)
