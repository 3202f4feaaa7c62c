"""Figures of a run: attention maps, learning curves; and the callback that writes them."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import lightning as L
import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger  # noqa: E402
from lightning.pytorch.utilities import rank_zero_only  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402


def save(fig: Figure, path: Path) -> Path:
    """Write a figure as PNG under a temporary name, then rename, and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path


def hop_attention(sentences: list[str], weights: Tensor, title: str) -> Figure:
    """Story sentences as rows, hops as columns, attention weight as colour (Sukhbaatar et al., Table 1)."""
    num_sentences, hops = weights.shape  # (S, hops)
    fig, ax = plt.subplots(figsize=(3.0 + 0.9 * hops + 0.07 * max(map(len, sentences), default=10),
                                    1.0 + 0.3 * num_sentences))
    ax.imshow(weights.numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(hops), [f"hop {k + 1}" for k in range(hops)])
    ax.set_yticks(range(num_sentences), sentences, fontsize=8)
    for s in range(num_sentences):
        for k in range(hops):
            w = float(weights[s, k])
            ax.text(k, s, f"{w:.2f}", ha="center", va="center", fontsize=7, color="white" if w > 0.6 else "black")
    ax.set_title(title, fontsize=9)
    return fig


def learning_curves(history: dict[str, dict[int, float]]) -> Figure:
    """Each metric per epoch, train and validation together, one panel per metric."""
    kinds = sorted({key.split("/")[-1] for key in history})
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.5 * len(kinds), 3.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        for key, points in sorted(history.items()):
            if key.split("/")[-1] == kind and points:
                epochs, values = zip(*sorted(points.items()))
                ax.plot(epochs, values, marker="o", markersize=3, label=key.split("/")[0])
        ax.set_xlabel("epoch")
        ax.set_ylabel(kind)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


class PlotCallback(L.Callback):
    """At the end of fit, writes learning curves and the family's example plots to `<run>/plots/`.

    The family module draws its own examples through `plot_examples(datamodule, out_dir, n)`;
    every figure also goes to the TensorBoard or W&B logger when one is active.
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
            split, _, metric = key.partition("/")
            # every epoch-level scalar of train and val; per-slice keys (val/task3/acc) stay out
            if epoch >= 0 and split in ("train", "val") and metric and "/" not in metric:
                self.history[key][epoch] = float(value)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    @rank_zero_only
    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)
        out_dir = Path(trainer.default_root_dir) / self.dirname
        if self.history:
            self.written.append(save(learning_curves(self.history), out_dir / "learning_curves.png"))
        if hasattr(pl_module, "plot_examples") and trainer.datamodule is not None and self.num_examples > 0:
            self.written += pl_module.plot_examples(trainer.datamodule, out_dir, self.num_examples)
        for logger in trainer.loggers:
            _log_images(logger, self.written)


def _log_images(logger: object, paths: list[Path]) -> None:
    if not paths:
        return
    if isinstance(logger, WandbLogger):
        logger.log_image(key="plots", images=[str(p) for p in paths], caption=[p.stem for p in paths])
    elif isinstance(logger, TensorBoardLogger):
        for p in paths:
            logger.experiment.add_image(f"plots/{p.stem}", plt.imread(p)[..., :3], dataformats="HWC")
