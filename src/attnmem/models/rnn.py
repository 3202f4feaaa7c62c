"""A recurrent baseline (Elman RNN, LSTM or GRU) without external memory or attention, for several task families."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from attnmem.blocks.float32 import recurrent
from attnmem.blocks.output import Output
from attnmem.models.rnn_seq2seq import CELLS, Encoder, EncoderDecoder, check_rnn_options, compact

__all__ = ["RNN"]

QA_PAD = 0  # word id of <pad> in the qa vocabularies (data/babi_tensors.py)


class RNN(nn.Module):
    """A stacked RNN/LSTM/GRU (`cell`) without attention; the family, given at build time, picks the forward.

    - `sequence`: the baseline of Graves et al. 2014 (§4: an LSTM of 3 × 256 on the algorithmic tasks):
      `inputs (B, T, input_size)` -> a linear layer on every step's state -> logits `(B, T, output_size)`.
    - `qa`: the LSTM baseline of Weston et al. 2015 / Sukhbaatar et al. 2015 (§5): the story's words, then the
      query's, read as one sequence (padding dropped); the answer class from the last layer's final state.
    - `seq2seq`: the plain encoder-decoder of Sutskever et al. 2014 (`models/rnn_seq2seq.py`): the decoder
      starts from the encoder's final state; `encode`/`decode_step` for greedy and beam search.
    `bidirectional` (qa, seq2seq) gives each direction `hidden_size // 2` units. `Output.attention` is empty.
    """

    families: ClassVar[tuple[str, ...]] = ("sequence", "qa", "seq2seq")

    def __init__(
        self,
        *,
        family: str,
        input_size: int | None = None,
        output_size: int | None = None,
        vocab_size: int | None = None,
        num_answers: int | None = None,
        src_vocab_size: int | None = None,
        tgt_vocab_size: int | None = None,
        pad_id: int = 0,
        cell: str = "lstm",
        embed_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if family not in self.families:
            raise ValueError(f"RNN: family must be one of {self.families}, got {family!r}")
        check_rnn_options(
            "RNN",
            cell=cell,
            hidden_size=hidden_size,
            num_layers=num_layers,
            embed_dim=embed_dim,
            dropout=dropout,
            bidirectional=bidirectional,
        )
        sizes = {
            "sequence": {"input_size": input_size, "output_size": output_size},
            "qa": {"vocab_size": vocab_size, "num_answers": num_answers},
            "seq2seq": {"src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size},
        }[family]
        if any(v is None or v < 1 for v in sizes.values()):
            raise ValueError(f"RNN: family {family!r} needs {' and '.join(sizes)} >= 1 (from the data), got {sizes}")
        if family == "sequence" and bidirectional:
            raise ValueError("RNN: bidirectional is for the qa and seq2seq families (a sequence model answers online)")
        self.family = family
        options = {
            "cell": cell,
            "embed_dim": embed_dim,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "bidirectional": bidirectional,
            "dropout": dropout,
        }
        if family == "sequence":
            self.rnn = CELLS[cell](
                input_size, hidden_size, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
            )
            self.head = nn.Linear(hidden_size, output_size)
        elif family == "qa":
            self.encoder = Encoder(vocab_size=vocab_size, pad_id=QA_PAD, **options)
            self.head = nn.Linear(hidden_size, num_answers)
        else:
            self.seq2seq = EncoderDecoder(
                src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, pad_id=pad_id, **options
            )

    def forward(self, batch: dict[str, Tensor]) -> Output:
        if self.family == "sequence":
            states, _ = recurrent(self.rnn, batch["inputs"])  # (B, T, H)
            return Output(pred=self.head(states))  # (B, T, output_size)
        if self.family == "qa":
            words = torch.cat([batch["story"].flatten(1), batch["query"]], dim=1)  # (B, S*L + Lq)
            _, final, _ = self.encoder(compact(words.long(), QA_PAD))
            h = final[0] if isinstance(final, tuple) else final  # (layers, B, H)
            return Output(pred=self.head(h[-1]))  # (B, num_answers)
        return self.seq2seq(batch)

    def encode(self, src: Tensor) -> dict[str, Tensor]:
        """seq2seq: the decoding state of `src (B, Ls)`."""
        return self.seq2seq.encode(src)

    def decode_step(self, state: dict[str, Tensor], tokens: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """seq2seq: next-token logits (B, V) after feeding `tokens (B,)`, and the new state."""
        return self.seq2seq.decode_step(state, tokens)
