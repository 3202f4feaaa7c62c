"""The LightningModule of the `qa` family: a story, a question, one answer class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import Metric

from attnmem.core.dims import QADims
from attnmem.evaluation import plots
from attnmem.tasks import optim

SPLITS = ("train", "val", "test")


class Totals(Metric):
    """Running sums of a fixed-length vector, summed across processes."""

    full_state_update = False

    def __init__(self, size: int) -> None:
        super().__init__()
        self.add_state("total", torch.zeros(size, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, values: Tensor) -> None:
        self.total += values

    def compute(self) -> Tensor:
        return self.total


class QATask(L.LightningModule):
    """Trains any `qa` model: cross-entropy on the answer class, accuracy and error per split.

    With several bAbI tasks trained jointly, validation and test also report each task's accuracy
    and error (`test/task3/error`). `loss_reduction="sum"` sums the loss over the batch as the
    MemN2N reference code does (its learning rates assume it).
    """

    monitor: ClassVar[str] = "val/acc"
    mode: ClassVar[str] = "max"

    def __init__(
        self,
        net: nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        dims: QADims,
        loss_reduction: str = "mean",
    ) -> None:
        super().__init__()
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"task.loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.loss_reduction = loss_reduction
        self.tasks: list[int] = list(dims.tasks) or [0]
        # task number -> position in the per-task totals (a lookup, so no Python loop over tasks)
        position = torch.zeros(max(self.tasks) + 1, dtype=torch.long)
        position[self.tasks] = torch.arange(len(self.tasks))
        self.register_buffer("task_position", position, persistent=False)
        # per task: loss sum, correct, count; summed in place each step, reduced across processes per epoch
        for split in SPLITS:
            running = torch.zeros(len(self.tasks), 3, dtype=torch.float64)  # (T, 3)
            self.register_buffer(f"{split}_running", running, persistent=False)
        self.totals = nn.ModuleDict({f"{split}_totals": Totals(3 * len(self.tasks)) for split in SPLITS})

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _step(self, batch: dict[str, Tensor], split: str) -> Tensor:
        logits = self.net(batch).pred  # (B, A)
        losses = F.cross_entropy(logits, batch["answer"], reduction="none")  # (B,)
        correct = logits.argmax(-1) == batch["answer"]  # (B,)
        stats = torch.stack([losses.detach(), correct, torch.ones_like(losses)], dim=-1)  # (B, 3)
        getattr(self, f"{split}_running").index_add_(0, self.task_position[batch["task"]], stats.double())
        return losses.sum() if self.loss_reduction == "sum" else losses.mean()

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def _log_split(self, split: str) -> None:
        # logged once per epoch: per-step logging costs more than a step of these models
        running, totals = getattr(self, f"{split}_running"), self.totals[f"{split}_totals"]
        if not running[:, 2].any():
            return
        totals.update(running.flatten())
        per_task = totals.compute().view(-1, 3)  # (T, 3) summed across processes
        totals.reset()
        running.zero_()
        loss_sum, correct, count = per_task.sum(0)
        acc = correct / count
        logged = {f"{split}/loss": loss_sum / count, f"{split}/acc": acc, f"{split}/error": 1 - acc}
        for task, (_, right, total) in zip(self.tasks, per_task):
            if len(self.tasks) > 1 and split != "train" and total > 0:
                logged[f"{split}/task{task}/acc"] = right / total
                logged[f"{split}/task{task}/error"] = 1 - right / total
        self.log_dict({k: v.float() for k, v in logged.items()}, prog_bar=split != "test")

    def on_train_epoch_end(self) -> None:
        self._log_split("train")

    def on_validation_epoch_end(self) -> None:
        self._log_split("val")

    def on_test_epoch_end(self) -> None:
        self._log_split("test")

    def configure_optimizers(self) -> Any:
        return optim.configure(self.parameters(), self.optimizer_factory, self.scheduler_factory)

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the per-hop attention over the story for the first validation examples."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        if not out.attention:
            return []
        weights = torch.stack(out.attention, dim=-1).float().cpu()  # (B, S, hops)
        paths = []
        for i in range(weights.shape[0]):
            sentences = [datamodule.words(s) for s in batch["story"][i].cpu()]
            real = [j for j, s in enumerate(sentences) if s]
            title = (
                f"Q: {datamodule.words(batch['query'][i].cpu())}?   "
                f"answer: {datamodule.answers[int(batch['answer'][i])]}   "
                f"predicted: {datamodule.answers[int(out.pred[i].argmax())]}"
            )
            fig = plots.hop_attention([sentences[j] for j in real], weights[i, real], title)
            paths.append(plots.save(fig, out_dir / f"attention_{i}.png"))
        return paths
