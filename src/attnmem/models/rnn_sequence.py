"""The recurrent baseline of the `sequence` family (Graves et al. 2014): a stacked LSTM, no external memory."""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.rnn import check_rnn_options, stacked
from attnmem.core.float32 import recurrent
from attnmem.models.contract import CarriesState

__all__ = ["RNNSequence"]


class RNNSequence(nn.Module, CarriesState):
    """A stacked RNN/LSTM/GRU (`cell`) and a linear layer on every step's state: the NTM's baseline.

    Graves, Wayne & Danihelka 2014, "Neural Turing Machines", §4: an LSTM of 3 × 256 on the algorithmic
    tasks. `inputs (B, T, input_size)` -> logits `(B, T, output_size)`; the model answers online, so it
    reads in one direction only. `Output.attention` is empty. `initial_state` and `run_chunk` run a
    sequence in pieces, for truncated BPTT (`task.tbptt_steps`).
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)

    def __init__(
        self,
        *,
        input_size: int,
        output_size: int,
        cell: str = "lstm",
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_sizes("RNNSequence", {"input_size": input_size, "output_size": output_size})
        check_rnn_options("RNNSequence", cell=cell, hidden_size=hidden_size, num_layers=num_layers, dropout=dropout)
        self.rnn = stacked(cell, input_size, hidden_size, num_layers, dropout)
        self.head = nn.Linear(hidden_size, output_size)

    def initial_state(self, batch_size: int) -> Tensor | tuple[Tensor, Tensor]:
        """Zero states `(layers, B, H)`; an LSTM's is the pair (h, c)."""
        h = self.head.weight.new_zeros(self.rnn.num_layers, batch_size, self.rnn.hidden_size)
        return (h, h.clone()) if isinstance(self.rnn, nn.LSTM) else h

    def run_chunk(self, inputs: Tensor, state: Tensor | tuple[Tensor, Tensor]) -> tuple[Output, Any]:
        """Logits of `inputs (B, T, I)` from `state`, and the state after the last step."""
        states, last = recurrent(self.rnn, inputs, state)  # (B, T, H)
        return Output(pred=self.head(states)), last  # (B, T, output_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        states, _ = recurrent(self.rnn, batch["inputs"])  # (B, T, H)
        return Output(pred=self.head(states))  # (B, T, output_size)
