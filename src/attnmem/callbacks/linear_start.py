"""MemN2N's linear start: the softmax of every hop removed for the first epochs (Sukhbaatar et al. 2015, §4.2)."""

from __future__ import annotations

import logging
import math
from typing import Any

from lightning.pytorch.callbacks import Callback

from attnmem.core import compat
from attnmem.core.errors import UserError
from attnmem.models.contract import LinearStartable
from attnmem.tasks.family import RunModule

log = logging.getLogger(__name__)


class LinearStart(Callback):
    """Linear start (Sukhbaatar et al. 2015, §4.2) for the first `epochs` epochs, or until the validation loss stalls.

    At each training epoch's start sets `pl_module.net.linear_start` to whether LS still runs. With
    `patience` given, LS ends as the paper's does: once `monitor` (the validation loss, measured with
    the softmax removed) has not decreased below its best for `patience` validations, `epochs` being
    the most LS may take; the run's `max_epochs` shrinks by the LS epochs left unused, so the main
    run keeps its length. With `patience=None`, LS takes exactly `epochs` (the reference code).
    With `lr` given it follows the reference code, which trains LS as a separate run: during LS every
    param group's lr is set to `lr` (each epoch, so a scheduler step in between has no effect);
    when LS ends the configured lr (the group's `initial_lr`, else the lr seen when LS began)
    comes back and every epoch-based scheduler restarts (`last_epoch = 0`), so a StepLR counts
    its steps from the end of LS. A ReduceLROnPlateau keeps its state; with `lr=None` the
    optimizer and schedulers are left alone. Set `max_epochs` to LS epochs plus the main run's.
    """

    def __init__(
        self, epochs: int = 20, lr: float | None = 0.005, patience: int | None = None, monitor: str = "val/loss"
    ) -> None:
        if epochs < 0:
            raise ValueError(f"LinearStart: epochs must be >= 0, got {epochs}")
        if lr is not None and lr <= 0:
            raise ValueError(f"LinearStart: lr must be > 0 or None, got {lr}")
        if patience is not None and patience < 1:
            raise ValueError(f"LinearStart: patience must be >= 1 or None, got {patience}")
        self.epochs, self.lr, self.patience, self.monitor = epochs, lr, patience, monitor
        self.end = epochs  # the first epoch after LS
        self.best, self.stale = math.inf, 0
        self.configured_lrs: list[list[float]] | None = None  # per optimizer, per param group

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        for member in pl_module.family_modules() if isinstance(pl_module, RunModule) else [pl_module]:
            if not isinstance(member.net, LinearStartable):
                raise UserError(f"callbacks.linear_start: {type(member.net).__name__} has no linear start (MemN2N "
                                "has): drop callbacks.linear_start (callbacks.linear_start=null)")
        self._shorten(trainer, self.epochs - self.end)  # a run resumed after LS ended early

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        epoch = trainer.current_epoch
        for member in pl_module.family_modules() if isinstance(pl_module, RunModule) else [pl_module]:
            member.net.linear_start = epoch < self.end
        if self.lr is None:
            return
        if epoch < self.end:
            if self.configured_lrs is None:
                self.configured_lrs = [[g["lr"] for g in opt.param_groups] for opt in trainer.optimizers]
            for opt in trainer.optimizers:
                for group in opt.param_groups:
                    group["lr"] = self.lr
        elif epoch == self.end and self.end > 0:
            self._end(trainer)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        epoch = trainer.current_epoch
        if self.patience is None or trainer.sanity_checking or epoch >= self.end:
            return
        if self.monitor not in trainer.callback_metrics:
            logged = ", ".join(sorted(trainer.callback_metrics)) or "nothing"
            raise UserError(f"callbacks.linear_start.monitor={self.monitor}: validation logs no such metric (it logs "
                            f"{logged}): pass one of them, or callbacks.linear_start.patience=null for a fixed LS")
        loss = float(trainer.callback_metrics[self.monitor])
        self.best, self.stale = (loss, 0) if loss < self.best else (self.best, self.stale + 1)
        if self.stale >= self.patience:
            self._shorten(trainer, self.end - (epoch + 1))
            self.end = epoch + 1
            last = trainer.fit_loop.max_epochs  # an int once fitting: -1 for no epoch limit
            log.info("linear start ends after epoch %d (%s %.4g, best %.4g, not lower for %d validations): the "
                     "softmax is back from epoch %d%s", epoch, self.monitor, loss, self.best, self.stale, self.end,
                     f", the run ends after epoch {last - 1}" if last >= 0 else "")

    @staticmethod
    def _shorten(trainer: Any, epochs: int) -> None:
        if trainer.fit_loop.max_epochs >= 0:  # -1: no epoch limit
            trainer.fit_loop.max_epochs -= epochs

    def _end(self, trainer: Any) -> None:
        saved = self.configured_lrs or [[group["lr"] for group in opt.param_groups] for opt in trainer.optimizers]
        for opt, lrs in zip(trainer.optimizers, saved):
            for group, lr in zip(opt.param_groups, lrs):
                group["lr"] = group.get("initial_lr", lr)
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            if hasattr(scheduler, "base_lrs"):  # not ReduceLROnPlateau
                scheduler.last_epoch = 0
                compat.set_last_lr(scheduler, [g["lr"] for g in scheduler.optimizer.param_groups])

    def state_dict(self) -> dict[str, Any]:
        return {"configured_lrs": self.configured_lrs, "end": self.end, "best": self.best, "stale": self.stale}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.configured_lrs = state_dict["configured_lrs"]
        self.end = state_dict.get("end", self.epochs)  # checkpoints before the patience option: a fixed LS
        self.best, self.stale = state_dict.get("best", math.inf), state_dict.get("stale", 0)
