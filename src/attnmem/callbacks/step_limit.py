"""A run that `trainer.max_steps` ends inside an epoch is validated there, so its last weights are checkpointed."""

from __future__ import annotations

from typing import Any

import lightning as L


class ValidateAtStepLimit(L.Callback):
    """Validate at the step where `trainer.max_steps` stops training before the epoch's last batch.

    Lightning stops at `max_steps` without validating, so a run shorter than one epoch would end with no
    checkpoint and no metric for checkpointing or early stopping. Asking the trainer to stop at that step
    makes Lightning validate first, as it does for early stopping.
    """

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Ask to stop (and so validate) once the step limit is reached mid-epoch."""
        at_limit = 0 < trainer.max_steps <= trainer.global_step
        if at_limit and not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            trainer.should_stop = True
