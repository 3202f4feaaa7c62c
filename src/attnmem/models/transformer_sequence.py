"""Encoder-only Transformer for the `sequence` family: a causal encoder over the input vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from torch import Tensor, nn

from attnmem.blocks.checks import check_sizes
from attnmem.blocks.output import Output
from attnmem.blocks.transformer import causal_mask, encoder_stack
from attnmem.models.contract import ReadHeads

__all__ = ["TransformerSequence"]


class TransformerSequence(nn.Module, ReadHeads):
    """Encoder-only Transformer (Vaswani et al. 2017, §3.1 encoder) as a sequence model.

    Each input vector (B, T, W) is projected to d_model and the encoder is causal: step t sees steps
    <= t, as a recurrent baseline does. The output phase follows the input phase, so it sees the whole
    input; padding steps sit at the end and, being later, never reach a real step (no padding mask
    needed). Logits per step (B, T, output_size). In eval mode `Output.attention` holds the last
    layer's weights per step (B, heads, T), shown by the sequence plots as one read head per head.
    """

    families: ClassVar[tuple[str, ...]] = ("sequence",)

    def __init__(
        self,
        *,
        input_size: int,
        output_size: int,
        score: Callable[..., nn.Module],
        d_model: int = 64,
        heads: int = 4,
        layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        max_len: int = 512,
        norm_first: bool = True,
    ) -> None:
        super().__init__()
        check_sizes("TransformerSequence", {"input_size": input_size, "output_size": output_size})
        self.read_heads = heads  # the sequence plots label every head a read head
        self.embed = nn.Linear(input_size, d_model)
        self.positions, self.encoder = encoder_stack(
            "TransformerSequence",
            score=score,
            d_model=d_model,
            heads=heads,
            layers=layers,
            d_ff=d_ff,
            dropout=dropout,
            positions=positions,
            max_len=max_len,
            norm_first=norm_first,
        )
        self.head = nn.Linear(d_model, output_size)

    def forward(self, batch: dict[str, Tensor]) -> Output:
        x = self.positions(self.embed(batch["inputs"]))  # (B, T, D)
        hidden, weights = self.encoder(x, mask=causal_mask(x.shape[1], x.device), need_weights=not self.training)
        attention = list(weights[-1].unbind(2)) if weights else []  # per step t: (B, heads, T)
        return Output(pred=self.head(hidden), attention=attention)  # (B, T, output_size)
