"""`FamilyModule`: the base class of the nine family modules (`QATask`, `SequenceTask`, ... in `attnmem.tasks`).

Lightning's steps, epoch ends, `configure_optimizers` and checkpoint hooks are written here once, as ordinary
methods with Lightning's signatures; a family provides what they call: `shared_step` (the loss of one batch, its
sums added in place), `epoch_metrics` (the logged values of one split, from those sums), `prog_bar_splits`,
`monitor` and `mode`, its `net` and the config's `optimizer_factory` / `scheduler_factory`. A family overrides a
hook where it does more (patterns' and sequence's training steps), calling `super()` for the shared part.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

import lightning as L
import torch
from torch import Tensor, nn

from attnmem.tasks import hooks, optim


@runtime_checkable
class RunModule(Protocol):
    """What the callbacks ask of the LightningModule a run trains: a `FamilyModule`, or the `Replicas` of
    `attnmem.replicas` (R family modules side by side)."""

    def family_modules(self) -> Sequence[FamilyModule]:
        """The family modules it trains."""

    def curves_prefix(self) -> str:
        """The prefix of the logged keys its learning curves draw."""


@runtime_checkable
class PlotsExamples(Protocol):
    """Asked by the `PlotCallback`: `plot_examples(datamodule, out_dir, n)` draws n examples of the
    model's predictions and returns the files written. Every family module but `EmbeddingsTask`, and `Replicas`."""

    def plot_examples(self, datamodule: Any, out_dir: Path, num_examples: int) -> list[Path]:
        """The figures of `num_examples` examples, written under `out_dir`."""


def datamodule_of(trainer: L.Trainer) -> L.LightningDataModule | None:
    """`trainer.datamodule`: an attribute that Lightning's data connector sets but `Trainer` does not declare."""
    return cast(Any, trainer).datamodule


def callbacks_of(trainer: L.Trainer) -> list[L.Callback]:
    """`trainer.callbacks`: an attribute that Lightning's callback connector sets but `Trainer` does not declare."""
    return cast(list[L.Callback], cast(Any, trainer).callbacks)


class FamilyModule(L.LightningModule, metaclass=abc.ABCMeta):
    """A family's LightningModule: Lightning's hooks over the family's `shared_step` and `epoch_metrics`.

    A subclass sets `net`, `optimizer_factory` and `scheduler_factory` in its constructor (after
    `super().__init__()`), declares `monitor`, `mode` and `prog_bar_splits`, and writes `shared_step` and
    `epoch_metrics`; one that lacks either cannot be instantiated.
    """

    monitor: ClassVar[str]  # the metric the best checkpoint and early stopping follow, e.g. "val/acc"
    mode: ClassVar[str]  # "max" or "min": which way `monitor` improves
    prog_bar_splits: ClassVar[tuple[str, ...]]  # the splits whose epoch metrics the progress bar shows
    net: nn.Module  # the model the family trains (a `conf/model` yaml's)
    optimizer_factory: Callable[..., torch.optim.Optimizer]  # the config's partial: `optimizer(params=...)`
    scheduler_factory: Callable[..., Any] | None  # the config's partial: `scheduler(optimizer=...)`, or None

    def family_modules(self) -> Sequence[FamilyModule]:
        """The family modules this LightningModule trains: itself."""
        return [self]

    def curves_prefix(self) -> str:
        """The prefix of the logged keys its learning curves draw: none (its keys are the run's)."""
        return ""

    @abc.abstractmethod
    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor | None:
        """The loss of one batch of `split` ("train", "val" or "test"; None: nothing to optimise), its sums added in
        place; `test_set` is the dataloader index (a family with several test sets logs each as its own slice)."""

    @abc.abstractmethod
    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """The split's logged values (`<split>/<metric>`) from its sums, which reading resets; empty: nothing seen."""

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        return self.shared_step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor | None:
        return self.shared_step(batch, "val", dataloader_idx)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> Tensor | None:
        return self.shared_step(batch, "test", dataloader_idx)

    def log_epoch(self, split: str) -> None:
        """Log the split's epoch metrics once, as float32; in the progress bar for the module's `prog_bar_splits`."""
        logged = self.epoch_metrics(split)
        if logged:
            prog_bar = split in self.prog_bar_splits
            self.log_dict({k: v.float() for k, v in logged.items()}, prog_bar=prog_bar, add_dataloader_idx=False)

    def on_train_epoch_end(self) -> None:
        self.log_epoch("train")

    def on_validation_epoch_end(self) -> None:
        self.log_epoch("val")

    def on_test_epoch_end(self) -> None:
        self.log_epoch("test")

    def configure_optimizers(self) -> Any:
        """The optimizer over all the module's parameters, and its scheduler, from the config's partials."""
        return optim.configure(self.parameters(), self.optimizer_factory, self.scheduler_factory)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Record the model's class (evaluating with another model's config names both), the running sums of the
        epoch under way and the last logged `train/` metrics (what a run resumed with nothing left to train
        reports)."""
        hooks.record_model(self.net, checkpoint, datamodule_of(self.trainer))
        checkpoint[hooks.SUMS_KEY] = hooks.sums_state(self, synced=True)
        checkpoint[hooks.TRAIN_KEY] = {k: float(v) for k, v in self.trainer.callback_metrics.items()
                                       if k.startswith("train/")}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Continue the running sums the checkpoint recorded (none in one written before that record)."""
        if self.global_rank == 0:  # the recorded sums are all processes'; the others start from zero
            hooks.load_sums(self, checkpoint.get(hooks.SUMS_KEY, {}))
