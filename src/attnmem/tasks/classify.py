"""The LightningModule of the `classify` family: a document of sentences, one label."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import ClassifyDims
from attnmem.evaluation import plots, text_plots
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict

SPLITS = ("train", "val", "test")
# sums of the cross-entropy, right predictions, documents; right ones whose deciding sentence is known and whose
# sentence weights the model gives, and of those the ones whose highest sentence weight is on it
FIELDS = ("loss", "correct", "count", "scored", "top")


def sentence_weights(attention: list[Tensor], sentences: int) -> Tensor | None:
    """The model's last attention over sentences, (B, S), or None when it has none (HAN: [α, β])."""
    return attention[-1] if attention and attention[-1].dim() == 2 and attention[-1].shape[1] == sentences else None


class ClassifyData(Protocol):
    """What the classify family's plots read of its datamodule (`attnmem.data.classify.datamodule`)."""

    def words(self, ids: Tensor) -> list[str]: ...


class ClassifyTask(FamilyModule):
    """Trains any `classify` model: cross-entropy on the label, accuracy and error per split.

    Where the batch knows the deciding sentence (`deciding >= 0`, generated documents) and the model attends
    over sentences, it also reports `<split>/deciding_sentence_top`: of the correctly classified documents,
    the fraction whose highest sentence weight is on the deciding sentence.
    """

    monitor: ClassVar[str] = "val/acc"
    mode: ClassVar[str] = "max"

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: ClassifyDims) -> None:
        super().__init__()
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.classes = list(dims.classes)
        self.sums = SumsDict({f"{split}_sums": Sums(FIELDS) for split in SPLITS})

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("train", "val")

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The batch's mean cross-entropy; its sums added in place."""
        out = self.net(batch)
        logits, labels = out.pred.float(), batch["label"]  # (B, C), (B,)
        losses = F.cross_entropy(logits, labels, reduction="none")  # (B,)
        correct = logits.argmax(-1) == labels  # (B,)
        weights = sentence_weights(out.attention, batch["document"].shape[1])
        scored = correct & (batch["deciding"] >= 0) & (weights is not None)  # (B,)
        top = scored & (weights.argmax(-1) == batch["deciding"]) if weights is not None else scored  # (B,)
        rows = torch.stack([losses.detach(), correct, torch.ones_like(losses), scored, top], dim=-1)  # (B, 5)
        self.sums[f"{split}_sums"].add(rows.sum(0).double())
        return losses.mean()

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, accuracy and error over the split; the deciding-sentence fraction where the model attends."""
        sums = {k: v.sum() for k, v in self.sums[f"{split}_sums"].read().items()}
        if not sums["count"]:
            return {}
        acc = sums["correct"] / sums["count"]
        logged = {f"{split}/loss": sums["loss"] / sums["count"], f"{split}/acc": acc, f"{split}/error": 1 - acc}
        if sums["scored"] and split != "train":
            logged[f"{split}/deciding_sentence_top"] = sums["top"] / sums["scored"]
        return logged

    @torch.no_grad()
    def plot_examples(self, datamodule: ClassifyData, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the first validation documents with words and sentences shaded by their attention weights."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        weights = sentence_weights(out.attention, batch["document"].shape[1])
        if weights is None:
            return []
        words = out.attention[0].float().cpu() if out.attention[0].dim() == 3 else None  # (B, S, L) or None
        paths = []
        for i in range(len(weights)):
            document = batch["document"][i].cpu()
            sentences = [datamodule.words(row) for row in document if (row != 0).any()]
            deciding = int(batch["deciding"][i])
            title = (f"{type(self.net).__name__}: label {self.classes[int(batch['label'][i])]}, predicted "
                     f"{self.classes[int(out.pred[i].argmax())]}" + (f", deciding sentence {deciding + 1}"
                                                                      if deciding >= 0 else ""))
            fig = text_plots.document_attention(
                sentences, None if words is None else words[i], weights[i].float().cpu(), title, deciding)
            paths.append(plots.save(fig, out_dir / f"document_{i}.png"))
        return paths
