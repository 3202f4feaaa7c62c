"""Moves an algorithmic task's curriculum (`data.curriculum`) to its next level after a training epoch."""

from __future__ import annotations

import logging
from typing import cast

import lightning as L
import torch

from attnmem.data.algorithmic import AlgorithmicDataModule
from attnmem.tasks.family import FamilyModule, datamodule_of

log = logging.getLogger(__name__)

__all__ = ["CurriculumCallback"]


class CurriculumCallback(L.Callback):
    """After each training epoch, checks the current level on fixed sequences of that level; moves on when
    their bit errors per sequence are at most the threshold. Logs `train/curriculum_level` (the number of
    levels passed; `len(levels)` = the full task) every epoch. Does nothing without `data.curriculum`."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        curriculum = getattr(datamodule_of(trainer), "curriculum", None)
        if curriculum is None:
            return
        datamodule = cast(AlgorithmicDataModule, datamodule_of(trainer))  # the one data module with a curriculum
        if datamodule.level < len(curriculum.levels):
            errors = self._bit_errors(cast(FamilyModule, pl_module), datamodule.level_check())
            pl_module.log("train/level_bit_errors", errors)
            if errors <= curriculum.threshold:
                datamodule.level += 1
                log.info("curriculum: level %d passed (%.3f bit errors per sequence <= %g): training on %s",
                         datamodule.level, errors, curriculum.threshold, _describe(datamodule))
        pl_module.log("train/curriculum_level", float(datamodule.level))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        datamodule = cast(AlgorithmicDataModule, datamodule_of(trainer))  # if it has a curriculum
        curriculum = getattr(datamodule, "curriculum", None)
        if curriculum is not None and datamodule.level < len(curriculum.levels):
            log.warning("curriculum: training ended at level %d of %d (%s), before the full task; validation and "
                        "test used the full task", datamodule.level, len(curriculum.levels), _describe(datamodule))

    @staticmethod
    @torch.no_grad()
    def _bit_errors(pl_module: FamilyModule, batches: list[dict[str, torch.Tensor]]) -> float:
        was_training = pl_module.training
        pl_module.eval()
        errors = count = 0
        for batch in batches:
            batch = {k: v.to(pl_module.device) for k, v in batch.items()}
            logits = pl_module.net(batch).pred
            wrong = ((logits > 0) != (batch["targets"] > 0.5)) & batch["mask"].unsqueeze(-1)
            errors, count = errors + int(wrong.sum()), count + len(logits)
        pl_module.train(was_training)
        return errors / count


def _describe(datamodule: AlgorithmicDataModule) -> str:
    """The sizes training draws now, e.g. `sizes 1..5 of 1..20`."""
    low, high = datamodule.training_task().sizes()
    full_low, full_high = datamodule.task.sizes()
    return f"sizes {low}..{high} of {full_low}..{full_high}"
