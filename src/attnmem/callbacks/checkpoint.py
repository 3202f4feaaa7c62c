"""Checkpoints written whole (a temp name in the checkpoint folder, then a rename: `checkpoint_io`), `last.ckpt`
every epoch, and a moved or copied run directory that resumes as if it had always been where it is."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from attnmem.callbacks import csv_logger
from attnmem.callbacks.checkpoint_io import AtomicCheckpointIO


# the private names of Lightning's ModelCheckpoint this class overrides or calls: core/compat.py, SUBCLASSED
class AtomicModelCheckpoint(ModelCheckpoint):
    """Lightning's `ModelCheckpoint`, with every file complete or absent, and `last.ckpt` the latest epoch.

    Lightning writes through fsspec to a file in the system temp folder and moves it into place: a
    copy, not a rename, when that folder is on another filesystem, so a kill can leave a partial
    `.ckpt`. Here the trainer writes through `checkpoint_io.AtomicCheckpointIO`, which this callback
    installs at setup (unless the trainer has a `CheckpointIO` of its own): each file is written to a
    hidden temp name in its own folder, fsynced and renamed, and checked when read. Since
    Lightning 2.6, `save_last` refreshes `last.ckpt` only when a top-k checkpoint was saved at the
    same step; resuming needs the latest epoch, so it is saved at every checkpointing point.

    There is one `last.ckpt`, always the newest (no `last-v1.ckpt`: conf sets `enable_version_counter: false`).
    A run resumed after its directory was moved or copied finds its checkpoints under their new folder:
    Lightning would keep the old absolute paths and forget the best ones, so they are mapped to the new
    folder first (those that are there).
    """

    @cached_property
    def state_key(self) -> str:
        """Lightning's key (monitor, mode, intervals: fixed once built), made once; Lightning reads it per hook call."""
        return super().state_key

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the checkpoint's state, its paths mapped to this checkpoint folder when the run has moved."""
        old, new = state_dict.get("dirpath"), self.dirpath
        if old is None or new is None or old == new:
            return super().load_state_dict(state_dict)

        def moved(path: str) -> str:
            here = Path(new) / Path(path).name
            return str(here) if path and Path(path).parent == Path(old) and here.is_file() else path

        state = dict(state_dict, dirpath=self.dirpath)
        for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
            state[key] = moved(state_dict.get(key) or "")
        state["best_k_models"] = {moved(k): v for k, v in (state_dict.get("best_k_models") or {}).items()}
        return super().load_state_dict(state)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """Record where the CSV log stood (`csv_logger.record`), for a run resumed from this checkpoint."""
        csv_logger.record(trainer, checkpoint)

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Lightning's setup, and the trainer's checkpoint files written and read by `AtomicCheckpointIO`."""
        super().setup(trainer, pl_module, stage)
        if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:  # Lightning's default, not one the user gave
            root = Path(trainer.default_root_dir)
            trainer.strategy.checkpoint_io = AtomicCheckpointIO(root if root.is_dir() else None)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if not self._should_skip_saving_checkpoint(trainer) and self._should_save_on_train_epoch_end(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_skip_saving_checkpoint(trainer) and not self._should_save_on_train_epoch_end(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
