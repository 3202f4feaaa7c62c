"""The callback that writes a run's figures: learning curves and the family's example plots."""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from attnmem.callbacks.csv_logger import logged_history
from attnmem.evaluation.plots import learning_curves, save
from attnmem.tasks.family import PlotsExamples, RunModule, datamodule_of

log = logging.getLogger(__name__)


class PlotCallback(L.Callback):
    """At the end of fit, writes learning curves and the family's example plots to `<run>/plots/`.

    The family module draws its own examples through `plot_examples(datamodule, out_dir, n)`;
    every figure also goes to the TensorBoard or W&B logger when one is active. With the CSV logger the curves
    are read from its `metrics.csv`, so a resumed run draws the epochs before its interruption too. A figure that fails
    (a diverged run's NaN weights, say) is logged in one line and skipped: it never costs the run its metrics.
    """

    def __init__(self, num_examples: int = 4, dirname: str = "plots") -> None:
        super().__init__()
        self.num_examples, self.dirname = num_examples, dirname
        self.history: dict[str, dict[int, float]] = defaultdict(dict)
        self.written: list[Path] = []

    def _record(self, trainer: L.Trainer) -> None:
        # epoch-level metrics of the epoch that just ended are complete only once the next starts
        epoch = trainer.current_epoch - 1
        for key, value in trainer.callback_metrics.items():
            if epoch >= 0:  # each curve is picked at the end (`curves`)
                self.history[key][epoch] = float(value)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    @rank_zero_only
    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)
        out_dir = Path(trainer.default_root_dir) / self.dirname
        # the logged keys of what the run reports (`RunModule.curves_prefix`)
        prefix = pl_module.curves_prefix() if isinstance(pl_module, RunModule) else ""
        history = curves(logged_history(trainer) or self.history, prefix)
        if history:
            path = out_dir / "learning_curves.png"
            self._draw("learning_curves", lambda: [save(learning_curves(history), path)])
        datamodule = datamodule_of(trainer)
        if isinstance(pl_module, PlotsExamples) and datamodule is not None and self.num_examples > 0:
            examples: PlotsExamples = pl_module
            self._draw(
                f"{type(pl_module).__name__}.plot_examples",
                lambda: examples.plot_examples(datamodule, out_dir, self.num_examples),
            )
        for logger in trainer.loggers:
            self._draw(f"{type(logger).__name__} images", functools.partial(_log_images, logger, self.written))

    def _draw(self, name: str, draw: Callable[[], list[Path] | None]) -> None:
        try:
            self.written += draw() or []
        except Exception as err:  # noqa: BLE001 - a figure is never worth the run's metrics
            log.warning("plot %s skipped: %s: %s", name, type(err).__name__, " ".join(str(err).split()))


def curves(history: dict[str, dict[int, float]], prefix: str = "") -> dict[str, dict[int, float]]:
    """The learning curves among logged series: every epoch-level train and val scalar (`val/acc`, not the slice
    `val/task3/acc`); with `prefix` (`replicas/<r>/`), that replica's, named as a single run names them."""
    picked = {}
    for key, series in history.items():
        if prefix and not key.startswith(prefix):
            continue
        name = key.removeprefix(prefix)
        split, _, metric = name.partition("/")
        if split in ("train", "val") and metric and "/" not in metric:
            picked[name] = series
    return picked


def _log_images(logger: object, paths: list[Path]) -> None:
    if not paths:
        return
    if isinstance(logger, WandbLogger):
        logger.log_image(key="plots", images=[str(p) for p in paths], caption=[p.stem for p in paths])
    elif isinstance(logger, TensorBoardLogger):
        for p in paths:
            logger.experiment.add_image(f"plots/{p.stem}", plt.imread(p)[..., :3], dataformats="HWC")
