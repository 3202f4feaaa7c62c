"""The value every model's `forward(batch)` returns."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class Output:
    """A model's prediction and the attention it used.

    `pred` holds logits or states; `attention` holds one tensor per hop / layer / step
    (empty when the model has none). The family module, never the model, computes the loss.
    """

    pred: Tensor
    attention: list[Tensor] = field(default_factory=list)
