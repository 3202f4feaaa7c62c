"""The values a model's `forward(batch)` returns: `Output`, and `Retrieval` for the `patterns` family."""

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


@dataclass
class Retrieval:
    """What a `patterns` model returns: final states, attention per update step, energy and steps.

    `pred (B, N)` are the final states; `energy (B, T+1)` the energy before the first and after
    each update step (constant once a probe has converged), None from a net that skips it while it
    trains; `steps (B,)` the update steps each probe
    took until it stopped changing; `scores (B, K)`, for a net that attends over its K patterns,
    the logits of its first update (which pattern the probe is taken for).
    """

    pred: Tensor
    energy: Tensor | None
    steps: Tensor
    attention: list[Tensor] = field(default_factory=list)
    scores: Tensor | None = None
