"""Lightning hooks written once for the five family modules, which assign them as class attributes.

A family module provides `shared_step(batch, split, test_set)` (the loss of one batch, its sums added
in place), `epoch_metrics(split)` (the logged values of one split, from those sums), `prog_bar_splits`
and the config's `optimizer_factory` / `scheduler_factory`; the hooks here call them, so no family
writes its steps, epoch ends or optimizers again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
from torch import Tensor

from attnmem.tasks import optim

STAGES = {"train": "train", "val": "validation", "test": "test"}  # Lightning's name of each split in its hooks
MODEL_KEY = "attnmem_model"  # the checkpoint's record of the model class its weights belong to


def on_save_checkpoint(module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
    """Record the model's class in the checkpoint, so evaluating it with another model's config names both."""
    checkpoint[MODEL_KEY] = f"{type(module.net).__module__}.{type(module.net).__qualname__}"


def log_epoch(module: L.LightningModule, split: str) -> None:
    """Log the split's epoch metrics once, as float32; in the progress bar for the module's `prog_bar_splits`."""
    logged = module.epoch_metrics(split)
    if logged:
        prog_bar = split in module.prog_bar_splits
        module.log_dict({k: v.float() for k, v in logged.items()}, prog_bar=prog_bar, add_dataloader_idx=False)


def epoch_end(split: str) -> Callable[[L.LightningModule], None]:
    """The `on_{split}_epoch_end` hook: `log_epoch(module, split)`."""

    def hook(module: L.LightningModule) -> None:
        log_epoch(module, split)

    hook.__name__ = f"on_{STAGES[split]}_epoch_end"
    return hook


def step(split: str) -> Callable[..., Tensor | None]:
    """The `{split}_step` hook: `module.shared_step(batch, split, test_set)`; `test_set` is the dataloader index."""

    def hook(module: L.LightningModule, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Any:
        return module.shared_step(batch, split, dataloader_idx)

    hook.__name__ = "training_step" if split == "train" else f"{STAGES[split]}_step"
    return hook


def configure_optimizers(module: L.LightningModule) -> Any:
    """The optimizer over all the module's parameters, and its scheduler, from the config's partials."""
    return optim.configure(module.parameters(), module.optimizer_factory, module.scheduler_factory)
