"""W&B runs that survive a resume: the run id travels in the checkpoint, final metrics go to the summary."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from omegaconf import DictConfig, open_dict

from attnmem import checkpoint

KEY = "wandb_run_id"


def _wandb(trainer: L.Trainer) -> WandbLogger | None:
    return next((lg for lg in trainer.loggers if isinstance(lg, WandbLogger)), None)


class WandbRunId(L.Callback):
    """Stores the W&B run id in every checkpoint, so `ckpt_path=last` / `resume=auto` continue the same W&B run."""

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, ckpt: dict[str, Any]) -> None:
        logger = _wandb(trainer)
        if logger is not None:
            ckpt[KEY] = logger.version  # the run id (None on ranks other than 0, which save nothing)


def continue_run(cfg: DictConfig, ckpt_path: str | None) -> None:
    """Point the W&B logger at the run id stored in the checkpoint being resumed (if it has one)."""
    wandb_cfg = (cfg.get("logger") or {}).get("wandb")
    if not wandb_cfg or ckpt_path is None:
        return
    run_id = checkpoint.load(ckpt_path).get(KEY)
    if run_id:
        with open_dict(cfg):
            wandb_cfg.id = run_id
            wandb_cfg.resume = "allow"


def log_summary(trainer: L.Trainer, metrics: dict[str, float]) -> None:
    """Put the run's final metrics (those of metrics.json) into the W&B run summary."""
    logger = _wandb(trainer)
    if logger is not None and trainer.is_global_zero:
        logger.experiment.summary.update(metrics)
