"""ClassifyTask's sums by hand: accuracy, and the deciding-sentence fraction over the correctly classified documents."""

from __future__ import annotations

import torch
from torch import nn

from attnmem.blocks.output import Output
from attnmem.core.dims import ClassifyDims
from attnmem.tasks.classify import ClassifyTask


class _Fixed(nn.Module):
    """Returns the logits and sentence weights it was given."""

    def __init__(self, logits: torch.Tensor, weights: list[torch.Tensor]) -> None:
        super().__init__()
        self.logits, self.weights, self.scale = logits, weights, nn.Parameter(torch.ones(()))

    def forward(self, batch: dict[str, torch.Tensor]) -> Output:
        return Output(pred=self.logits * self.scale, attention=self.weights)


def _task(weights: list[torch.Tensor]) -> ClassifyTask:
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])  # predicts 0, 1, 0, 1
    dims = ClassifyDims(vocab_size=5, num_classes=2, classes=["a", "b"])
    return ClassifyTask(_Fixed(logits, weights), optimizer=torch.optim.SGD, dims=dims)


BATCH = {"document": torch.ones(4, 3, 2, dtype=torch.long), "label": torch.tensor([0, 1, 1, 1]),
         "deciding": torch.tensor([2, 0, 1, -1])}
BETA = torch.tensor([[0.1, 0.2, 0.7], [0.3, 0.6, 0.1], [0.5, 0.4, 0.1], [1.0, 0.0, 0.0]])  # tops 2, 1, 0, 0


def test_accuracy_and_the_deciding_sentence_fraction_by_hand():
    task = _task([torch.rand(4, 3, 2), BETA])  # HAN's [α, β]
    loss = task.shared_step(BATCH, "test")
    expected = torch.nn.functional.cross_entropy(torch.tensor([[2.0, 0], [0, 2], [2, 0], [0, 2]]), BATCH["label"])
    assert torch.isclose(loss, expected)
    logged = task.epoch_metrics("test")
    # right: documents 0, 1, 3 (3/4); of those with a known deciding sentence (0, 1), only 0's top is on it
    assert logged["test/acc"] == 0.75 and logged["test/error"] == 0.25
    assert logged["test/deciding_sentence_top"] == 0.5


def test_no_sentence_weights_no_deciding_metric_and_none_for_training():
    task = _task([])
    task.shared_step(BATCH, "val")
    assert "val/deciding_sentence_top" not in task.epoch_metrics("val")
    task = _task([BETA])
    task.shared_step(BATCH, "train")
    assert set(task.epoch_metrics("train")) == {"train/loss", "train/acc", "train/error"}
