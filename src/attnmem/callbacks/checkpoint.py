"""Checkpoints written whole: a temp name in the checkpoint folder, then a rename; `last.ckpt` every epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

from attnmem.core.atomic import replacing


class AtomicModelCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint`, with every file complete or absent, and `last.ckpt` the latest epoch.

    Lightning writes through fsspec to a file in the system temp folder and moves it into place: a
    copy, not a rename, when that folder is on another filesystem, so a kill can leave a partial
    `.ckpt`. Here each file is written to a hidden temp name in its own folder and renamed. Since
    Lightning 2.6, `save_last` refreshes `last.ckpt` only when a top-k checkpoint was saved at the
    same step; resuming needs the latest epoch, so it is saved at every checkpointing point.
    """

    def _save_checkpoint(self, trainer: Any, filepath: str) -> None:
        with replacing(Path(filepath)) as tmp:  # rank 0 writes; the others' temp names stay unwritten
            super()._save_checkpoint(trainer, str(tmp))
        self._last_checkpoint_saved = filepath

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if not self._should_skip_saving_checkpoint(trainer) and self._should_save_on_train_epoch_end(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_skip_saving_checkpoint(trainer) and not self._should_save_on_train_epoch_end(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
