"""What every family module's `configure_optimizers` returns, from the config's partials."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


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
    return {
        "optimizer": built,
        "lr_scheduler": lr_scheduler if isinstance(lr_scheduler, dict) else {"scheduler": lr_scheduler},
    }
