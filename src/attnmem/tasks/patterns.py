"""The LightningModule of the `patterns` family: store patterns, retrieve them from probes, measure overlap."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import PatternsDims
from attnmem.evaluation import plots
from attnmem.models.contract import RecallsPairs, StoresPatterns
from attnmem.tasks import optim
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict

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


SPLITS = ("train", "val", "test")
# per split: sums of overlap, exact recalls, update steps, monotone energies (of the probes with energies), loss,
# probes; the smallest overlap
FIELDS = ("overlap", "recalled", "steps", "monotone", "energies", "loss", "count")


class PatternsTask(FamilyModule):
    """Runs any `patterns` model: stores the training patterns, evaluates retrieval from probes.

    Each training batch first stores `batch["patterns"]` (`net.store`: exact, no gradient). A
    net with trainable parameters (a learned similarity in a modern Hopfield net) also learns
    from the training probes: the loss is the cross-entropy of its retrieval scores (`out.scores`,
    logits over the K patterns) against the probe's pattern; a saturated softmax would give a
    state-space loss no gradient. A net with none needs one epoch, so fitting stops after it. Validation and
    test report the overlap m = sᵀξ/N (mean and min), exact recall, update steps and the fraction
    of probes whose energy never rose. A hetero-associative net (`recalls = "pairs"`) stores the
    pairs (`store(patterns, pairs)`) and is scored on the partner y it recalls from a probe of x,
    with its bit accuracy (1 + m)/2 as well.
    """

    monitor: ClassVar[str] = "val/overlap"
    mode: ClassVar[str] = "max"

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: PatternsDims) -> None:
        super().__init__()
        if not isinstance(net, (StoresPatterns, RecallsPairs)):
            raise TypeError(f"a patterns model needs a store(patterns) method; {type(net).__name__} has none")
        self.net = net
        self.recalls = net.recalls if isinstance(net, RecallsPairs) else "patterns"  # the batch key it recalls
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS, minima=["overlap_min"]) for s in SPLITS})

    @property
    def trainable(self) -> bool:
        """Whether the net has parameters to learn (a learned score); otherwise storing is all of training."""
        return any(p.requires_grad for p in self.net.parameters())

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor | None:
        """The retrieval loss when the net learns a score; overlap, recall, steps and energy summed in place."""
        out = self.net(batch)
        losses = None
        if self.trainable:
            if out.scores is None:
                raise ValueError(f"{type(self.net).__name__} has parameters to train but returns no retrieval scores")
            losses = F.cross_entropy(out.scores, batch["targets"], reduction="none")  # (B,)
        overlap = overlaps(out.pred.detach(), batch[self.recalls][batch["targets"]])  # (B,)
        loss_sum = losses.detach().sum() if losses is not None else overlap.new_zeros(())
        recalled = overlap >= 1 - 1e-6
        # a net may skip its energies while it trains: then the split logs no energy_monotone
        monotone = energy_monotone(out.energy.detach()) if out.energy is not None else overlap.new_zeros(0)
        sums = self.sums[f"{split}_sums"]
        sums.add(torch.stack([overlap.double().sum(), recalled.sum(), out.steps.sum(), monotone.sum(),
                              overlap.new_tensor(len(monotone)), loss_sum, overlap.new_tensor(len(overlap))]))
        sums.lower("overlap_min", overlap.min().double())
        return losses.mean() if losses is not None else None

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        if self.recalls == "pairs":  # the net is one of the two kinds `__init__` accepts
            cast(RecallsPairs, self.net).store(batch["patterns"], batch["pairs"])
        else:
            cast(StoresPatterns, self.net).store(batch["patterns"])
        return self.shared_step(batch, "train") if self.trainable else None  # storing was all of it

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Mean and min overlap, recall, steps and monotone energies per probe; the loss when the net learns."""
        sums = {k: v.sum() for k, v in self.sums[f"{split}_sums"].read().items()}  # one slice
        count = sums["count"]
        if not count:
            return {}
        logged = {"overlap": sums["overlap"] / count, "overlap_min": sums["overlap_min"],
                  "recall": sums["recalled"] / count, "steps": sums["steps"] / count,
                  "energy_monotone": sums["monotone"] / sums["energies"].clamp_min(1), "loss": sums["loss"] / count}
        if self.recalls == "pairs":
            logged["bit_accuracy"] = (1 + logged["overlap"]) / 2
        if not self.trainable:
            del logged["loss"]
        if not sums["energies"]:  # a net that skips its energies while it trains
            del logged["energy_monotone"]
        return {f"{split}/{k}": v for k, v in logged.items()}

    def on_train_epoch_end(self) -> None:
        super().on_train_epoch_end()
        if not self.trainable:
            self.trainer.should_stop = True

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
        stored = batch[self.recalls][batch["targets"]].cpu()
        recalled = binarize(out.pred).cpu()
        overlap = overlaps(out.pred, batch[self.recalls][batch["targets"]]).cpu()
        name = type(self.net).__name__
        paths = [plots.save(plots.pattern_images(stored, batch["probes"].cpu(), recalled, overlap),
                            out_dir / "patterns.png")]
        if out.energy is not None:  # a one-step read has no energy to draw
            paths.insert(0, plots.save(plots.energy_curves(out.energy.float().cpu(), f"{name}: energy per update step"),
                                       out_dir / "energy.png"))
        return paths
