"""The graph family module: exact per-split loss and accuracy, and end-to-end learning with its figures."""

from __future__ import annotations

import json
import math

import torch
from conftest import FAST
from torch import nn

from attnmem.blocks.output import Output
from attnmem.core.dims import GraphDims
from attnmem.runtime import run
from attnmem.tasks.graph import GraphTask


class _Fixed(nn.Module):
    """Logits given in advance, whatever the batch."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, batch: dict[str, torch.Tensor]) -> Output:
        return Output(pred=self.logits)


def test_loss_and_accuracy_are_over_the_split_nodes_only():
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0], [0.0, 1.0], [5.0, 0.0]])
    dims = GraphDims(num_features=1, num_classes=2, num_nodes=4, classes=["a", "b"])
    task = GraphTask(_Fixed(logits), optimizer=torch.optim.SGD, dims=dims)
    masks = {
        "train_mask": torch.tensor([True, True, False, False]),
        "val_mask": torch.tensor([False, False, True, True]),
        "test_mask": torch.zeros(4, dtype=torch.bool),
    }
    batch = {"features": torch.zeros(4, 1), "labels": torch.tensor([0, 1, 1, 1]), **masks}
    loss = task.shared_step(batch, "train")
    ce = [math.log(1 + math.exp(-2)), math.log(2)]  # node 0 right, node 1 a tie (argmax 0: wrong)
    assert math.isclose(loss.item(), sum(ce) / 2, rel_tol=1e-6)
    task.shared_step(batch, "val")
    task.shared_step(batch, "val")  # two steps of one epoch: the means stay the same
    val = task.epoch_metrics("val")
    assert math.isclose(
        val["val/loss"].item(), (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(5))) / 2, rel_tol=1e-6
    )
    assert val["val/acc"].item() == 0.5
    assert task.epoch_metrics("test") == {}  # no node, no metric


def test_gcn_learns_the_karate_club_and_gat_draws_its_attention(compose_cfg, tmp_path):
    cfg = compose_cfg("model=gcn", "trainer.max_epochs=8", "callbacks.plots.num_examples=1", *FAST)
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test/acc"] >= 0.9 and metrics["global_step"] == 80, metrics
    assert (tmp_path / "run" / "plots" / "graph.png").stat().st_size > 0
    gat = tmp_path / "gat"
    run.train(compose_cfg("model=gat", "trainer.max_epochs=1", "data.steps_per_epoch=2", *FAST, run_dir=gat))
    assert {"graph.png", "attention.png"} <= {p.name for p in (gat / "plots").iterdir()}
