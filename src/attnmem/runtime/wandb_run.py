"""W&B runs that survive a resume: the run id travels in the checkpoint, final metrics go to the summary."""

from __future__ import annotations

import lightning as L
from omegaconf import DictConfig, open_dict

from attnmem.callbacks.wandb_run_id import KEY, wandb_logger
from attnmem.runtime import checkpoint


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
    logger = wandb_logger(trainer)
    if logger is not None and trainer.is_global_zero:
        logger.experiment.summary.update(metrics)
