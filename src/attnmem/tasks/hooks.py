"""Lightning hooks written once for the five family modules, which assign them as class attributes.

A family module provides `shared_step(batch, split, test_set)` (the loss of one batch, its sums added
in place), `epoch_metrics(split)` (the logged values of one split, from those sums), `prog_bar_splits`
and the config's `optimizer_factory` / `scheduler_factory`; the hooks here call them, so no family
writes its steps, epoch ends or optimizers again. `set_attribute` is every family's `__setattr__`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import lightning as L
from torch import Tensor, nn

from attnmem.core import compat, dims
from attnmem.tasks import optim
from attnmem.tasks.metrics import Sums

STAGES = {"train": "train", "val": "validation", "test": "test"}  # Lightning's name of each split in its hooks
MODEL_KEY = "attnmem_model"  # the checkpoint's record of the model class its weights belong to
TRAIN_KEY = "attnmem_train_metrics"  # the checkpoint's record of the last logged train/ metrics
DIMS_KEY = "attnmem_dims"  # the checkpoint's record of the data sizes the model was built with (core.dims.to_record)
SUMS_KEY = "attnmem_sums"  # the checkpoint's record of the module's running sums (an epoch may be under way)


def on_save_checkpoint(module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
    """Record the model's class (evaluating with another model's config names both), the running sums of the
    epoch under way and the last logged `train/` metrics (what a run resumed with nothing left to train reports)."""
    record_model(module.net, checkpoint, module.trainer.datamodule)
    checkpoint[SUMS_KEY] = sums_state(module, synced=True)
    checkpoint[TRAIN_KEY] = {k: float(v) for k, v in module.trainer.callback_metrics.items() if k.startswith("train/")}


def on_load_checkpoint(module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
    """Continue the running sums the checkpoint recorded (none in one written before that record)."""
    if module.global_rank == 0:  # the recorded sums are all processes'; the others start from zero
        load_sums(module, checkpoint.get(SUMS_KEY, {}))


def record_model(net: nn.Module, checkpoint: dict[str, Any], datamodule: Any) -> None:
    """Record the class of `net` and the data sizes it was built with (`load_model` needs no data)."""
    checkpoint[MODEL_KEY] = f"{type(net).__module__}.{type(net).__qualname__}"
    if datamodule is not None:
        checkpoint[DIMS_KEY] = dims.to_record(datamodule.dims)


def sums_state(module: nn.Module, *, synced: bool = False) -> dict[str, dict[str, Tensor]]:
    """Every `Sums` of the module by name, its states copied (`synced`: reduced over all processes). A checkpoint
    written at validation's end comes while the training epoch's sums are still to be logged."""
    states = {}
    for name, m in module.named_modules():
        if isinstance(m, Sums):
            with m.sync_context(should_sync=synced):
                states[name] = {state: value.clone() for state, value in m.metric_state.items()}
    return states


def load_sums(module: nn.Module, saved: dict[str, dict[str, Tensor]]) -> None:
    """Give each `Sums` of the module the states `sums_state` recorded under its name."""
    for name, m in module.named_modules():
        for state, value in saved.get(name, {}).items() if isinstance(m, Sums) else ():
            setattr(m, state, value.to(getattr(m, state).device))


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
    # Lightning reads the step's signature on every batch (does it take `batch_idx`?): store it once
    hook.__signature__ = inspect.signature(hook)
    return hook


def set_attribute(module: L.LightningModule, name: str, value: Any) -> None:
    """`LightningModule.__setattr__`, stored directly for `_current_fx_name` (a hook's name, never a tensor or module),
    which Lightning sets twice around each of the ~40 hooks it calls a training step (~0.1 ms of MemN2N's step)."""
    if name == compat.CURRENT_FX_NAME:
        object.__setattr__(module, name, value)
    else:
        L.LightningModule.__setattr__(module, name, value)


def configure_optimizers(module: L.LightningModule) -> Any:
    """The optimizer over all the module's parameters, and its scheduler, from the config's partials."""
    return optim.configure(module.parameters(), module.optimizer_factory, module.scheduler_factory)
