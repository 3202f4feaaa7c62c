"""Early stopping that waits for its metric instead of failing before the first validation."""

from __future__ import annotations

from functools import cached_property

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping as LightningEarlyStopping


# the private names of Lightning's EarlyStopping this class overrides or calls: core/compat.py, SUBCLASSED
class EarlyStopping(LightningEarlyStopping):
    """Lightning's `EarlyStopping`, idle until a metric of its monitor's split (`val/`, `train/`) is logged.

    Lightning checks at the end of every training epoch and fails when the monitor is missing, as it is
    before the first validation (a run cut short by `trainer.max_steps`, validation switched off). A
    monitor the family never logs is still refused, in one line, by `MonitorCheck` at the first validation.
    """

    @cached_property
    def state_key(self) -> str:
        """Lightning's key (monitor and mode: fixed once built), made once; Lightning reads it per hook call."""
        return super().state_key

    def _run_early_stopping_check(self, trainer: L.Trainer) -> None:
        split = self.monitor.partition("/")[0] + "/"
        if self.monitor in trainer.callback_metrics or any(k.startswith(split) for k in trainer.callback_metrics):
            super()._run_early_stopping_check(trainer)
