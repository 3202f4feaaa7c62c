"""What every family module's `configure_optimizers` returns, from the config's partials."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim.lr_scheduler import ReduceLROnPlateau

from attnmem.core.errors import UserError


def configure(
    params: Iterable[torch.nn.Parameter],
    optimizer: Callable[..., torch.optim.Optimizer],
    scheduler: Callable[..., Any] | None,
) -> torch.optim.Optimizer | dict[str, Any]:
    """The optimizer over `params` and, when one is configured, its scheduler.

    A scheduler is stepped per epoch, unless its factory returns Lightning's scheduler dict itself
    (`{"scheduler": ..., "interval": "step"}`, as `attnmem.tasks.schedules.noam` does).
    """
    built = optimizer(params=params)
    if scheduler is None:
        return built
    lr_scheduler = scheduler(optimizer=built)
    if isinstance(lr_scheduler, ReduceLROnPlateau):
        raise UserError(
            "scheduler: a bare ReduceLROnPlateau cannot name the metric it watches; use "
            "scheduler={_target_:attnmem.tasks.schedules.plateau,_partial_:true,monitor:val/loss} "
            "(with its own options, e.g. factor:0.5,patience:2)"
        )
    return {
        "optimizer": built,
        "lr_scheduler": lr_scheduler if isinstance(lr_scheduler, dict) else {"scheduler": lr_scheduler},
    }
