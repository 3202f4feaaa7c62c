"""The LightningModule of the `patterns` family: store patterns, retrieve them from probes, measure overlap."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import Metric

from attnmem.core.dims import PatternsDims
from attnmem.evaluation import plots
from attnmem.tasks import optim

# a network that stores without gradients fits with no optimizer, on purpose
warnings.filterwarnings("ignore", message=".*configure_optimizers.*returned `None`.*")
warnings.filterwarnings("ignore", message=".*`training_step` returned `None`.*")

# energies are sums of N products: a rise below this is rounding, not a rise
ENERGY_TOLERANCE = 1e-4


def binarize(states: Tensor) -> Tensor:
    """±1 states: +1 where the state is >= 0 (a continuous state, or an unset unit at 0, takes a side)."""
    return torch.where(states >= 0, 1.0, -1.0).to(states.dtype)


def overlaps(states: Tensor, targets: Tensor) -> Tensor:
    """Overlap m = sᵀξ/N of binarised `states (B, N)` with the target patterns `targets (B, N)`: (B,)."""
    return (binarize(states) * targets).sum(-1) / states.shape[-1]


def energy_monotone(energy: Tensor) -> Tensor:
    """True for each probe whose `energy (B, T+1)` never rose from one step to the next: (B,)."""
    scale = energy.abs().amax(-1).clamp_min(1.0)  # (B,)
    return (energy.diff(dim=-1) <= ENERGY_TOLERANCE * scale.unsqueeze(-1)).all(-1)


class RetrievalTotals(Metric):
    """Sums of overlap, exact recalls, steps, monotone energies and loss, and the smallest overlap."""

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("total", torch.zeros(6, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("overlap_min", torch.tensor(float("inf"), dtype=torch.float64), dist_reduce_fx="min")

    def update(self, overlap: Tensor, steps: Tensor, monotone: Tensor, loss_sum: Tensor) -> None:
        recalled = (overlap >= 1 - 1e-6).double()
        self.total += torch.stack([overlap.double().sum(), recalled.sum(), steps.double().sum(),
                                   monotone.double().sum(), loss_sum.double(), torch.tensor(float(len(overlap)))])
        self.overlap_min = torch.minimum(self.overlap_min, overlap.double().min())

    def compute(self) -> dict[str, Tensor]:
        overlap, recalled, steps, monotone, loss, count = self.total
        return {"overlap": overlap / count, "overlap_min": self.overlap_min, "recall": recalled / count,
                "steps": steps / count, "energy_monotone": monotone / count, "loss": loss / count}


class PatternsTask(L.LightningModule):
    """Runs any `patterns` model: stores the training patterns, evaluates retrieval from probes.

    Each training batch first stores `batch["patterns"]` (`net.store`: exact, no gradient). A
    net with trainable parameters (a learned similarity in a modern Hopfield net) also learns
    from the training probes: the loss is the cross-entropy of its retrieval scores (`out.scores`,
    logits over the K patterns) against the probe's pattern; a saturated softmax would give a
    state-space loss no gradient. A net with none needs one epoch, so fitting stops after it. Validation and
    test report the overlap m = sᵀξ/N (mean and min), exact recall, update steps and the fraction
    of probes whose energy never rose.
    """

    monitor: ClassVar[str] = "val/overlap"
    mode: ClassVar[str] = "max"

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: PatternsDims) -> None:
        super().__init__()
        if not callable(getattr(net, "store", None)):
            raise TypeError(f"a patterns model needs a store(patterns) method; {type(net).__name__} has none")
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.metrics = nn.ModuleDict({f"{s}_totals": RetrievalTotals() for s in ("train", "val", "test")})

    @property
    def trainable(self) -> bool:
        """Whether the net has parameters to learn (a learned score); otherwise storing is all of training."""
        return any(p.requires_grad for p in self.net.parameters())

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _step(self, batch: dict[str, Tensor], split: str) -> Tensor | None:
        out = self.net(batch)
        losses = None
        if self.trainable:
            if out.scores is None:
                raise ValueError(f"{type(self.net).__name__} has parameters to train but returns no retrieval scores")
            losses = F.cross_entropy(out.scores, batch["targets"], reduction="none")  # (B,)
        overlap = overlaps(out.pred.detach(), batch["patterns"][batch["targets"]])  # (B,)
        loss_sum = losses.detach().sum() if losses is not None else torch.zeros(())
        self.metrics[f"{split}_totals"].update(overlap, out.steps, energy_monotone(out.energy.detach()), loss_sum)
        return losses.mean() if losses is not None else None

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        self.net.store(batch["patterns"])
        return self._step(batch, "train") if self.trainable else None  # storing was all of it

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def _log_split(self, split: str) -> None:
        # logged once per epoch, from sums over the split (synced across processes)
        metric = self.metrics[f"{split}_totals"]
        if not metric.update_called:
            return
        values = metric.compute()
        metric.reset()
        if not self.trainable:
            del values["loss"]
        self.log_dict({f"{split}/{k}": v.float() for k, v in values.items()}, prog_bar=split == "val")

    def on_train_epoch_end(self) -> None:
        self._log_split("train")
        if not self.trainable:
            self.trainer.should_stop = True

    def on_validation_epoch_end(self) -> None:
        self._log_split("val")

    def on_test_epoch_end(self) -> None:
        self._log_split("test")

    def configure_optimizers(self) -> Any:
        if not self.trainable:
            return None
        params = [p for p in self.parameters() if p.requires_grad]
        return optim.configure(params, self.optimizer_factory, self.scheduler_factory)

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the energy per update step and the stored / probe / recalled patterns of the first val probes."""
        batch = next(iter(datamodule.val_dataloader()))
        batch = {k: v.to(self.device) for k, v in batch.items()}
        batch["probes"], batch["targets"] = batch["probes"][:num_examples], batch["targets"][:num_examples]
        out = plots.eval_outputs(self.net, batch)
        stored = batch["patterns"][batch["targets"]].cpu()
        recalled = binarize(out.pred).cpu()
        overlap = overlaps(out.pred, batch["patterns"][batch["targets"]]).cpu()
        name = type(self.net).__name__
        return [
            plots.save(plots.energy_curves(out.energy.float().cpu(), f"{name}: energy per update step"),
                       out_dir / "energy.png"),
            plots.save(plots.pattern_images(stored, batch["probes"].cpu(), recalled, overlap),
                       out_dir / "patterns.png"),
        ]
