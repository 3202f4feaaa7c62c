"""Stop training at the first NaN or infinite loss, before it reaches the weights or a checkpoint."""

from __future__ import annotations

import math

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from torch import Tensor

from attnmem.core.errors import UserError


class FiniteLoss(L.Callback):
    """Raises a one-line `UserError` naming the step and the last finite loss when the loss is not finite.

    It checks before the backward pass, so the bad step never updates the weights and the checkpoints
    on disk stay those of the last good epoch. One `.item()` per step: on a GPU that is one sync.
    """

    def __init__(self) -> None:
        self.last_finite: tuple[int, float] | None = None  # (step, loss)

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Tensor) -> None:
        value = float(loss.detach().float().item())
        step = trainer.global_step + 1  # the optimizer step this loss would make, counted from 1
        if math.isfinite(value):
            self.last_finite = (step, value)
            return
        last = (
            f"the last finite loss was {self.last_finite[1]:.4g} at step {self.last_finite[0]}"
            if self.last_finite
            else "no finite loss before it"
        )
        raise UserError(
            f"training stopped: the loss is {value} at step {step} (epoch {trainer.current_epoch}); {last}; "
            f"{_last_checkpoint(trainer)}; lower optimizer.lr or set trainer.gradient_clip_val=1.0"
        )


def _last_checkpoint(trainer: L.Trainer) -> str:
    checkpoints = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
    paths = [c.last_model_path or c.best_model_path for c in checkpoints]
    return f"the last good checkpoint is {paths[0]}" if paths and paths[0] else "no checkpoint was written yet"
