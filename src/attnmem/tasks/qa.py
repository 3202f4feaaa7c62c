"""The LightningModule of the `qa` family: a story, a question, one answer class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric

from attnmem import plots


class Task(L.LightningModule):
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
        dims: dict[str, Any],
        loss_reduction: str = "mean",
    ) -> None:
        super().__init__()
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"task.loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.loss_reduction = loss_reduction
        self.tasks: list[int] = list(dims.get("tasks", []))
        splits = ("train", "val", "test")
        self.loss = nn.ModuleDict({s: MeanMetric() for s in splits})
        self.acc = nn.ModuleDict({s: MeanMetric() for s in splits})
        # per-task accuracy only when tasks are trained jointly
        per_task = self.tasks if len(self.tasks) > 1 else []
        self.task_acc = nn.ModuleDict({f"{s}_{t}": MeanMetric() for s in ("val", "test") for t in per_task})

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _step(self, batch: dict[str, Tensor], split: str) -> Tensor:
        logits = self.net(batch).pred  # (B, A)
        loss = F.cross_entropy(logits, batch["answer"], reduction=self.loss_reduction)
        correct = (logits.argmax(-1) == batch["answer"]).float()  # (B,)
        n = correct.numel()
        self.loss[split].update(loss.detach() / (n if self.loss_reduction == "sum" else 1), weight=n)
        self.acc[split].update(correct)
        if split != "train":
            for t in self.tasks if len(self.tasks) > 1 else []:
                chosen = batch["task"] == t
                if chosen.any():
                    self.task_acc[f"{split}_{t}"].update(correct[chosen])
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def _log_split(self, split: str) -> None:
        # logged once per epoch: per-step logging costs more than a step of these models
        acc = self.acc[split].compute()
        metrics = {f"{split}/loss": self.loss[split].compute(), f"{split}/acc": acc, f"{split}/error": 1 - acc}
        for key, metric in self.task_acc.items():
            s, t = key.split("_")
            if s == split and metric.update_called:
                task_acc = metric.compute()
                metrics[f"{split}/task{t}/acc"] = task_acc
                metrics[f"{split}/task{t}/error"] = 1 - task_acc
        self.log_dict(metrics, prog_bar=split != "test", sync_dist=False)
        self.loss[split].reset()
        self.acc[split].reset()
        for key, metric in self.task_acc.items():
            if key.startswith(split):
                metric.reset()

    def on_train_epoch_end(self) -> None:
        self._log_split("train")

    def on_validation_epoch_end(self) -> None:
        self._log_split("val")

    def on_test_epoch_end(self) -> None:
        self._log_split("test")

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer=optimizer)}}

    @torch.no_grad()
    def plot_examples(self, datamodule: L.LightningDataModule, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the per-hop attention over the story for the first validation examples."""
        batch = next(iter(datamodule.val_dataloader()))
        batch = {k: v[:num_examples].to(self.device) for k, v in batch.items()}
        was_training = self.net.training
        self.net.eval()
        out = self.net(batch)
        self.net.train(was_training)
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
