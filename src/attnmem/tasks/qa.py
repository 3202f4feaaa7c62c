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
        # per-task accuracy only when tasks are trained jointly
        per_task = self.tasks if len(self.tasks) > 1 else []
        self.metrics = nn.ModuleDict(
            {f"{s}_{m}": MeanMetric() for s in ("train", "val", "test") for m in ("loss", "acc")}
            | {f"{s}_task{t}": MeanMetric() for s in ("val", "test") for t in per_task}
        )

    def forward(self, batch: dict[str, Tensor]):
        return self.net(batch)

    def _step(self, batch: dict[str, Tensor], split: str) -> Tensor:
        logits = self.net(batch).pred  # (B, A)
        loss = F.cross_entropy(logits, batch["answer"], reduction=self.loss_reduction)
        correct = (logits.argmax(-1) == batch["answer"]).float()  # (B,)
        n = correct.numel()
        self.metrics[f"{split}_loss"].update(loss.detach() / (n if self.loss_reduction == "sum" else 1), weight=n)
        self.metrics[f"{split}_acc"].update(correct)
        if split != "train":
            for t in self.tasks if len(self.tasks) > 1 else []:
                chosen = batch["task"] == t
                if chosen.any():
                    self.metrics[f"{split}_task{t}"].update(correct[chosen])
        return loss

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._step(batch, "test")

    def _log_split(self, split: str) -> None:
        # logged once per epoch: per-step logging costs more than a step of these models
        logged = {}
        for key, metric in self.metrics.items():
            s, _, name = key.partition("_")
            if s != split or not metric.update_called:
                continue
            value = metric.compute()
            if name.startswith("task"):
                logged[f"{split}/{name}/acc"], logged[f"{split}/{name}/error"] = value, 1 - value
            else:
                logged[f"{split}/{name}"] = value
            metric.reset()
        logged[f"{split}/error"] = 1 - logged[f"{split}/acc"]
        self.log_dict(logged, prog_bar=split != "test")

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
