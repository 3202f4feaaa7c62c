"""Learning-rate schedules that the config's `scheduler` partial can name."""

from __future__ import annotations

from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau


def noam_factor(step: int, *, d_model: int, warmup: int) -> float:
    """d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (Vaswani et al. 2017, §5.3, eq. 3); `step` counts from 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam(optimizer: torch.optim.Optimizer, *, d_model: int, warmup: int = 4000) -> dict[str, Any]:
    """The Noam schedule, stepped every batch: lr = optimizer lr (the factor) · `noam_factor(step)`.

    Rises linearly for `warmup` steps, then decays as step^-0.5; set the optimizer's `lr` to 1.0 for
    the paper's rate, or to a factor as the Annotated Transformer does.
    """
    if d_model < 1 or warmup < 1:
        raise ValueError(f"scheduler: d_model and warmup must be >= 1, got {d_model} and {warmup}")
    schedule = LambdaLR(optimizer, lambda step: noam_factor(step + 1, d_model=d_model, warmup=warmup))
    return {"scheduler": schedule, "interval": "step"}


def plateau(optimizer: torch.optim.Optimizer, *, monitor: str = "val/loss", **options: Any) -> dict[str, Any]:
    """ReduceLROnPlateau on the logged metric `monitor`, stepped each epoch; `options` are its own (factor...).

    Lightning steps a plateau scheduler only with the metric it monitors, which a bare
    `torch.optim.lr_scheduler.ReduceLROnPlateau` partial cannot name.
    """
    return {"scheduler": ReduceLROnPlateau(optimizer, **options), "monitor": monitor, "interval": "epoch"}
