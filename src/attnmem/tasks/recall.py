"""The LightningModule of the `recall` family: token ids in, a token predicted at each scored position."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, cast

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import RecallDims
from attnmem.evaluation import plots, recall_plots
from attnmem.models.contract import LogitsAt, StateSized
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict, counted

IGNORE = -100  # the target of a position that is not scored
# cross-entropy summed over the scored positions, the right ones, the scored positions; sequences, and those with
# every scored position right
FIELDS = ("loss", "correct", "count", "sequences", "exact")


def scored_sums(logits: Tensor, targets: Tensor, where: Tensor) -> tuple[Tensor, Tensor]:
    """The summed cross-entropy over the scored positions, and the sums of `FIELDS`, (5,).

    Shapes:
        logits: (K, V) at the scored positions; targets: (K,) theirs; where: (B, T), the K scored positions (True)
    """
    nats = F.cross_entropy(logits, targets, reduction="sum")
    wrong = logits.argmax(-1) != targets  # (K,)
    wrong_at = torch.zeros_like(where).masked_scatter_(where, wrong)  # (B, T): wrong where scored and wrong
    sums = torch.stack([nats.detach(), (~wrong).sum(), nats.new_tensor(len(wrong)), nats.new_tensor(len(where)),
                        (~wrong_at.any(1)).sum()])
    return nats, sums.double()


class RecallTask(FamilyModule):
    """Trains any `recall` model, `net(inputs (B, T)) -> logits (B, T, V)`: cross-entropy on the scored positions
    (target != -100) only. A `LogitsAt` model (MixerLM) computes its head at those positions alone.

    Metrics per split: `acc` (the fraction of scored positions whose argmax is the target), `loss` (cross-entropy
    per scored position, in nats), `exact_match` (the fraction of sequences with every scored position right). Test
    dataloader k > 0 is the extra test set `dims.test_sets[k - 1]`, logged as `test/<name>/...`. With the test
    metrics, the model's size: `model/params` and, for a `StateSized` model, `model/state_size`.
    """

    monitor: ClassVar[str] = "val/acc"
    mode: ClassVar[str] = "max"
    prog_bar_splits: ClassVar[tuple[str, ...]] = ("train", "val")

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: RecallDims) -> None:
        super().__init__()
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.test_names = ["test", *(f"test/{name}" for name in dims.test_sets)]
        slices = {"train": 1, "val": 1, "test": len(self.test_names)}
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS, slices=n) for s, n in slices.items()})
        self.sizes = {"model/params": sum(p.numel() for p in net.parameters())}
        self.sizes |= {"model/state_size": net.state_size} if isinstance(net, StateSized) else {}
        self.selects = isinstance(net, LogitsAt)  # decided once: a Protocol's isinstance inspects attributes

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The mean cross-entropy per scored position; the batch's sums added to its test set's slice."""
        inputs, targets = batch["inputs"], batch["targets"]
        where = targets != IGNORE  # (B, T): the K scored positions
        net = self.net
        logits = cast(LogitsAt, net).logits_at(inputs, where) if self.selects else net(inputs)[where]  # (K, V)
        nats, sums = scored_sums(logits.float(), targets[where], where)
        self.sums[f"{split}_sums"].add(sums, test_set)
        return nats / sums[2].clamp(min=1).to(nats.dtype)

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, accuracy and exact match of each of the split's sets that saw a scored position."""
        logged: dict[str, Tensor] = {}
        for name, s in counted(self.sums[f"{split}_sums"].read(), self.test_names if split == "test" else [split]):
            logged |= {f"{name}/loss": s["loss"] / s["count"], f"{name}/acc": s["correct"] / s["count"],
                       f"{name}/exact_match": s["exact"] / s["sequences"]}
        if split == "test" and logged:  # constants, logged once so that metrics.json holds them
            logged |= {k: torch.tensor(float(v), device=self.device) for k, v in self.sizes.items()}
        return logged

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """The first validation examples with the model's answers at the scored positions, and the accuracy at each
        position over the whole validation set (eval mode)."""
        was_training, sums, first = self.net.training, torch.zeros(2, 1, dtype=torch.long), None
        self.net.eval()
        for batch in datamodule.val_dataloader():
            inputs, targets = batch["inputs"].to(self.device), batch["targets"].to(self.device)
            predicted, scored = self.net(inputs).argmax(-1), targets != IGNORE  # (B, T) each
            sums = sums + torch.stack([((predicted == targets) & scored).sum(0), scored.sum(0)]).cpu()  # (2, T)
            first = first or [t[:num_examples].cpu() for t in (inputs, targets, predicted, scored)]
        self.net.train(was_training)
        if first is None:
            return []
        return [plots.save(recall_plots.recall_examples(*first), out_dir / "examples.png"),
                plots.save(recall_plots.accuracy_by_position(*sums), out_dir / "accuracy_by_position.png")]
