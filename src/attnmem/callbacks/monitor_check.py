"""`monitor=` checked against the metrics the family module really logs, as soon as they are known."""

from __future__ import annotations

import lightning as L

from attnmem.core.errors import UserError


class MonitorCheck(L.Callback):
    """Stop with one line naming the logged metrics when `monitor` names one the family does not log.

    The family's `val/` metric names are known at the end of the first validation (the sanity check's,
    when Lightning runs one): a `val/` monitor is checked there, before any training. Its `train/` epoch
    metrics are logged by the family's own `on_train_epoch_end`, after every callback's but just before
    checkpointing and early stopping read the monitor; their error is turned into the same line (`refusal`).
    """

    def __init__(self, monitor: str, family: str, default: str) -> None:
        self.monitor, self.family, self.default = monitor, family, default
        self.checked = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Check a monitor other than a `train/` metric (those are not logged yet)."""
        if self.checked or self.monitor.startswith("train/"):
            return
        if (refusal := self._missing(trainer)) is not None:
            raise refusal
        self.checked = True

    def refusal(self, err: BaseException, trainer: L.Trainer) -> UserError | None:
        """The one-line error for Lightning's `err` when it says the monitor is missing, else None."""
        return self._missing(trainer) if f"{self.monitor}" in str(err) else None

    def _missing(self, trainer: L.Trainer) -> UserError | None:
        logged = sorted(key for key in trainer.callback_metrics if "/" in key)
        if self.monitor in logged:
            return None
        return UserError(
            f"monitor={self.monitor}: the {self.family} family logs no such metric; it logs "
            f"{', '.join(logged)}: pass monitor=<one of them>, or leave monitor out for {self.default}"
        )
