"""The LightningModule of the `qa` family: a story, a question, one answer class."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import QADims
from attnmem.core.errors import UserError
from attnmem.evaluation import plots
from attnmem.models.contract import AfterClipping
from attnmem.tasks.clipping import clip_per_weight, weight_matrices
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict, counted

SPLITS = ("train", "val", "test")
FIELDS = ("loss", "correct", "count")  # per bAbI task


class QAData(Protocol):
    """What the qa family's plots read of its datamodule (`attnmem.data.qa.datamodule.QADataModule`)."""

    @property
    def answers(self) -> list[str]: ...

    def words(self, ids: Tensor) -> str: ...


class QATask(FamilyModule):
    """Trains any `qa` model: cross-entropy on the answer class, accuracy and error per split.

    With several bAbI tasks trained jointly, validation and test also report each task's accuracy
    and error (`test/task3/error`). `loss_reduction="sum"` sums the loss over the batch as the
    MemN2N reference code does (its learning rates assume it); `clip_per_weight` makes
    `trainer.gradient_clip_val` clip each weight matrix by its own spectral norm, as that code does
    (`attnmem.tasks.clipping`), instead of all gradients by their joint norm.
    """

    monitor: ClassVar[str] = "val/acc"
    mode: ClassVar[str] = "max"
    task_position: Tensor  # the buffer of task number -> position in the per-task sums

    def __init__(self, net: nn.Module, *, optimizer: Callable[..., torch.optim.Optimizer],
                 scheduler: Callable[..., Any] | None = None, dims: QADims, loss_reduction: str = "mean",
                 clip_per_weight: bool = False) -> None:
        super().__init__()
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"task.loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        self.net, self.loss_reduction, self.clip_per_weight = net, loss_reduction, clip_per_weight
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        # decided once: an isinstance of a Protocol inspects the net's attributes on every call
        self._after_clipping: Callable[[], None] | None = net.after_clipping if isinstance(net, AfterClipping) else None
        self.tasks: list[int] = list(dims.tasks) or [0]
        # task number -> position in the per-task sums (a lookup, so no Python loop over tasks)
        position = torch.zeros(max(self.tasks) + 1, dtype=torch.long)
        position[self.tasks] = torch.arange(len(self.tasks))
        self.register_buffer("task_position", position, persistent=False)
        self.sums = SumsDict({f"{split}_sums": Sums(FIELDS, slices=len(self.tasks)) for split in SPLITS})

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("train", "val")

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        """Lightning's clipping; with `clip_per_weight`, each weight matrix by its own spectral norm. Then the net's
        `after_clipping()`, where it has one (MemN2N: the pad word's gradient, which the clipping measured, zeroed)."""
        if not (self.clip_per_weight and gradient_clip_val):
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)
        elif gradient_clip_algorithm == "value":
            raise UserError("task.clip_per_weight=true clips by norm: set trainer.gradient_clip_algorithm=norm")
        else:
            clip_per_weight(weight_matrices(self.net), gradient_clip_val)
        if self._after_clipping is not None:
            self._after_clipping()

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The batch's loss; its per-task sums added in one index_add (one test set: `test_set` is 0)."""
        logits = self.net(batch).pred  # (B, A)
        losses = F.cross_entropy(logits, batch["answer"], reduction="none")  # (B,)
        correct = logits.argmax(-1) == batch["answer"]  # (B,)
        stats = torch.stack([losses.detach(), correct, torch.ones_like(losses)], dim=-1)  # (B, 3)
        self.sums[f"{split}_sums"].add_rows(self.task_position[batch["task"]], stats)
        return losses.sum() if self.loss_reduction == "sum" else losses.mean()

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Loss, accuracy and error over the split; per bAbI task too at val and test when several train jointly."""
        sums = self.sums[f"{split}_sums"].read()  # (T,) per field, summed across processes
        count = sums["count"].sum()
        if not count:
            return {}
        acc = sums["correct"].sum() / count
        logged = {f"{split}/loss": sums["loss"].sum() / count, f"{split}/acc": acc, f"{split}/error": 1 - acc}
        if len(self.tasks) > 1 and split != "train":
            for task, s in counted(sums, self.tasks):
                task_acc = s["correct"] / s["count"]
                logged |= {f"{split}/task{task}/acc": task_acc, f"{split}/task{task}/error": 1 - task_acc}
        return logged

    @torch.no_grad()
    def plot_examples(self, datamodule: QAData, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the per-hop attention over the story for the first validation examples."""
        batch, out = plots.val_examples(self, datamodule, num_examples)
        story = batch["story"].shape[:2]  # (B, S)
        if not out.attention or any(a.shape != story for a in out.attention):
            return []  # no weights over the story's sentences (the DNC reader's are over its memory, word by word)
        weights = torch.stack(out.attention, dim=-1).float().cpu()  # (B, S, hops)
        paths = []
        for i in range(weights.shape[0]):
            sentences = [datamodule.words(s) for s in batch["story"][i].cpu()]
            real = [j for j, s in enumerate(sentences) if s]
            guess = int(out.pred[i].argmax())  # past the answers: a word that is no answer (a vocabulary softmax)
            title = (
                f"Q: {datamodule.words(batch['query'][i].cpu())}?   "
                f"answer: {datamodule.answers[int(batch['answer'][i])]}   "
                f"predicted: {datamodule.answers[guess] if guess < len(datamodule.answers) else '(no answer word)'}"
            )
            fig = plots.hop_attention([sentences[j] for j in real], weights[i, real], title)
            paths.append(plots.save(fig, out_dir / f"attention_{i}.png"))
        return paths
