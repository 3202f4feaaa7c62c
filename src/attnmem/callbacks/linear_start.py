"""MemN2N's linear start: the softmax of every hop removed for the first epochs (Sukhbaatar et al. 2015, §4.2)."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback


class LinearStart(Callback):
    """Linear start (Sukhbaatar et al. 2015, §4.2) for the first `epochs` epochs.

    At each training epoch's start sets `pl_module.net.linear_start` to `epoch < epochs`. With
    `lr` given it follows the reference code, which trains LS as a separate run: during LS every
    param group's lr is set to `lr` (each epoch, so a scheduler step in between has no effect);
    at epoch `epochs` the configured lr (the group's `initial_lr`, else the lr seen when LS began)
    comes back and every epoch-based scheduler restarts (`last_epoch = 0`), so a StepLR counts
    its steps from the end of LS. A ReduceLROnPlateau keeps its state; with `lr=None` the
    optimizer and schedulers are left alone. Set `max_epochs` to LS epochs plus the main run's.
    """

    def __init__(self, epochs: int = 20, lr: float | None = 0.005) -> None:
        if epochs < 0:
            raise ValueError(f"LinearStart: epochs must be >= 0, got {epochs}")
        if lr is not None and lr <= 0:
            raise ValueError(f"LinearStart: lr must be > 0 or None, got {lr}")
        self.epochs, self.lr = epochs, lr
        self.configured_lrs: list[list[float]] | None = None  # per optimizer, per param group

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        epoch = trainer.current_epoch
        for member in getattr(pl_module, "members", [pl_module]):  # every replica (replicas=R)
            member.net.linear_start = epoch < self.epochs
        if self.lr is None:
            return
        if epoch < self.epochs:
            if self.configured_lrs is None:
                self.configured_lrs = [[g["lr"] for g in opt.param_groups] for opt in trainer.optimizers]
            for opt in trainer.optimizers:
                for group in opt.param_groups:
                    group["lr"] = self.lr
        elif epoch == self.epochs and self.epochs > 0:
            self._end(trainer)

    def _end(self, trainer: Any) -> None:
        saved = self.configured_lrs or [[None] * len(opt.param_groups) for opt in trainer.optimizers]
        for opt, lrs in zip(trainer.optimizers, saved):
            for group, lr in zip(opt.param_groups, lrs):
                group["lr"] = group.get("initial_lr", lr if lr is not None else group["lr"])
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            if hasattr(scheduler, "base_lrs"):  # not ReduceLROnPlateau
                scheduler.last_epoch = 0
                scheduler._last_lr = [g["lr"] for g in scheduler.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"configured_lrs": self.configured_lrs}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.configured_lrs = state_dict["configured_lrs"]
