"""The progress bar of a run: Lightning's Rich bar, idle between refreshes."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    """Lightning's Rich progress bar, touched only every `refresh_rate` training batches.

    The stock bar updates its task, gathers the metrics and refreshes on every batch, which costs
    a sizeable share of a step of these small models; here the batches in between skip all of it.
    """

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if (batch_idx + 1) % max(self.refresh_rate, 1) == 0 or batch_idx + 1 == self.total_train_batches:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
