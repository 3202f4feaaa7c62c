"""The W&B run id in every checkpoint, so a resumed run continues the same W&B run."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.loggers import WandbLogger

KEY = "wandb_run_id"


def wandb_logger(trainer: L.Trainer) -> WandbLogger | None:
    """The trainer's W&B logger, if it has one."""
    return next((lg for lg in trainer.loggers if isinstance(lg, WandbLogger)), None)


class WandbRunId(L.Callback):
    """Stores the W&B run id in every checkpoint, so `ckpt_path=last` / `resume=auto` continue the same W&B run."""

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, ckpt: dict[str, Any]) -> None:
        logger = wandb_logger(trainer)
        if logger is not None:
            ckpt[KEY] = logger.version  # the run id (None on ranks other than 0, which save nothing)
