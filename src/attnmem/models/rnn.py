"""A recurrent baseline (Elman RNN, LSTM or GRU) without external memory, for several task families."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from attnmem.models.output import Output

__all__ = ["RNN"]

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNN(nn.Module):
    """A stacked RNN/LSTM/GRU (`cell`) read over the input, a linear layer on every step's state.

    The baseline of Graves et al. 2014 (§4: an LSTM of 3 × 256 on the algorithmic tasks). The
    family is given at build time and picks the forward:
    - `sequence`: `inputs (B, T, input_size)` -> logits `pred (B, T, output_size)`.
    It has no attention: `Output.attention` is empty.
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)

    def __init__(
        self,
        *,
        family: str,
        input_size: int | None = None,
        output_size: int | None = None,
        cell: str = "lstm",
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if family not in self.families:
            raise ValueError(f"RNN: family must be one of {self.families}, got {family!r}")
        if cell not in CELLS:
            raise ValueError(f"RNN: cell must be one of {tuple(CELLS)}, got {cell!r}")
        for name, value in {"hidden_size": hidden_size, "num_layers": num_layers}.items():
            if value < 1:
                raise ValueError(f"RNN: {name} must be >= 1, got {value}")
        if not 0 <= dropout < 1:
            raise ValueError(f"RNN: dropout must be in [0, 1), got {dropout}")
        if family == "sequence" and (input_size is None or output_size is None or min(input_size, output_size) < 1):
            raise ValueError(f"RNN: family 'sequence' needs input_size and output_size >= 1, got "
                             f"{input_size} and {output_size}")
        self.family = family
        self.rnn = CELLS[cell](input_size, hidden_size, num_layers, batch_first=True,
                               dropout=dropout if num_layers > 1 else 0.0)
        self.head = nn.Linear(hidden_size, output_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        states, _ = self.rnn(batch["inputs"])  # (B, T, H)
        return Output(pred=self.head(states))  # (B, T, output_size)
