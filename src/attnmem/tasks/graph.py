"""The LightningModule of the `graph` family: node classification on one graph, scored per split on its nodes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmem.core.dims import GraphDims
from attnmem.evaluation import graph_plots, plots
from attnmem.tasks.family import FamilyModule
from attnmem.tasks.metrics import Sums, SumsDict

SPLITS = ("train", "val", "test")
FIELDS = ("loss", "correct", "count")  # per split: sums of the nodes' cross-entropy, right predictions, nodes


class Batches(Protocol):
    """A graph as the plots read it (`attnmem.data.graph.graph.Graph`)."""

    def batch(self) -> dict[str, Tensor]: ...


class GraphData(Protocol):
    """What the graph family's plots read of its datamodule (`attnmem.data.graph.datamodule.GraphDataModule`)."""

    @property
    def graph(self) -> Batches: ...


class GraphTask(FamilyModule):
    """Runs any `graph` model: cross-entropy on the training nodes, loss and accuracy per split on its nodes.

    Every batch is the whole graph; `{split}_mask` says which nodes a split scores. The monitored metric is
    `val/loss` (min): Kipf & Welling and Veličković et al. stop on the validation loss, and it stays defined
    where the validation nodes are the training nodes (the karate club's two labelled members).
    """

    monitor: ClassVar[str] = "val/loss"
    mode: ClassVar[str] = "min"

    def __init__(
        self,
        net: nn.Module,
        *,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        dims: GraphDims,
    ) -> None:
        super().__init__()
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.classes = list(dims.classes)
        self.sums = SumsDict({f"{s}_sums": Sums(FIELDS) for s in SPLITS})

    prog_bar_splits: ClassVar[tuple[str, ...]] = ("val",)

    def shared_step(self, batch: dict[str, Tensor], split: str, test_set: int = 0) -> Tensor:
        """The mean cross-entropy over the split's nodes; its sums and right predictions added in place."""
        out = self.net(batch)
        mask = batch[f"{split}_mask"]
        logits, labels = out.pred[mask].float(), batch["labels"][mask]  # (n, C), (n,)
        losses = F.cross_entropy(logits, labels, reduction="none")  # (n,)
        correct = (logits.argmax(-1) == labels).sum()
        self.sums[f"{split}_sums"].add(
            torch.stack(
                [losses.detach().sum().double(), correct.double(), losses.new_tensor(len(labels), dtype=torch.float64)]
            )
        )
        return losses.mean()

    def epoch_metrics(self, split: str) -> dict[str, Tensor]:
        """Mean cross-entropy and accuracy over the split's nodes (summed over the epoch's steps)."""
        sums = {k: v.sum() for k, v in self.sums[f"{split}_sums"].read().items()}
        if not sums["count"]:
            return {}
        return {f"{split}/loss": sums["loss"] / sums["count"], f"{split}/acc": sums["correct"] / sums["count"]}

    @torch.no_grad()
    def plot_examples(self, datamodule: GraphData, out_dir: Path, num_examples: int) -> list[Path]:
        """Write the graph coloured by prediction and, for a model with attention, its first layer's on the edges
        (one graph: `num_examples` does not apply)."""
        batch = {k: v.to(self.device) for k, v in datamodule.graph.batch().items()}
        out = plots.eval_outputs(self.net, batch)
        pred, edges = out.pred.argmax(-1).cpu(), batch["edge_index"].cpu()
        name = type(self.net).__name__
        test = batch["test_mask"].cpu()
        acc = (pred[test] == batch["labels"].cpu()[test]).float().mean().item() if test.any() else float("nan")
        figures = [
            plots.save(
                graph_plots.predictions(
                    edges,
                    pred,
                    batch["labels"].cpu(),
                    batch["train_mask"].cpu(),
                    self.classes,
                    f"{name}: predicted class (test acc {acc:.1%})",
                ),
                out_dir / "graph.png",
            )
        ]
        if out.attention:
            first = out.attention[0].float()  # (K, N, N) the first layer's, sparse
            alpha = (torch.sparse.sum(first, 0).to_dense() / first.shape[0]).cpu()  # (N, N) the mean over heads
            figures.append(
                plots.save(
                    graph_plots.edge_attention(edges, alpha, pred, f"{name}: layer 1 attention"),
                    out_dir / "attention.png",
                )
            )
        return figures
