"""RecallTask: loss and accuracy over the scored positions only, by hand; the extra test sets' slices; a tiny
stand-in net learns (its loss goes down) on MQAR batches."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnmem.core.dims import RecallDims
from attnmem.data.recall.datamodule import RecallDataModule
from attnmem.data.recall.mqar import MQAR
from attnmem.models.contract import LogitsAt, StateSized
from attnmem.tasks.recall import RecallTask


class _Fixed(nn.Module):
    """Returns the logits it was given, whatever the inputs."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits, self.scale = logits, nn.Parameter(torch.ones(()))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.logits * self.scale


class _Bigram(nn.Module):
    """A token's embedding mapped to logits: no memory, only what the token itself says."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed, self.out = nn.Embedding(vocab_size, 16), nn.Linear(16, vocab_size)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(inputs))  # (B, T, V)


# 2 sequences of 4 positions over 3 tokens; the argmax of each position: [[0, 1, 2, 0], [1, 1, 0, 2]]
LOGITS = torch.tensor([[[3.0, 0, 0], [0, 3, 0], [0, 0, 3], [3, 0, 0]], [[0, 3, 0], [0, 3, 0], [3, 0, 0], [0, 0, 3]]])
# scored: (0, 1) right, (0, 3) wrong, (1, 0) right, (1, 2) right, (1, 3) wrong; the rest -100 (argmax wrong there)
TARGETS = torch.tensor([[-100, 1, -100, 2], [1, -100, 0, 1]])
BATCH = {"inputs": torch.zeros(2, 4, dtype=torch.long), "targets": TARGETS}


def test_loss_and_accuracy_count_only_scored_positions():
    task = RecallTask(_Fixed(LOGITS), optimizer=torch.optim.SGD, dims=RecallDims(vocab_size=3, seq_len=4))
    loss = task.shared_step(BATCH, "val")
    scored = TARGETS != -100
    assert torch.isclose(loss, F.cross_entropy(LOGITS[scored], TARGETS[scored]))
    logged = task.epoch_metrics("val")
    assert logged["val/acc"] == 3 / 5 and logged["val/exact_match"] == 0.0
    assert torch.isclose(logged["val/loss"], loss.double())
    assert task.epoch_metrics("val") == {}  # read once: the next epoch starts from zero
    task.shared_step({"inputs": BATCH["inputs"], "targets": torch.tensor([[-100, 1, -100, -100], [1] + [-100] * 3])},
                     "train")
    assert task.epoch_metrics("train")["train/exact_match"] == 1.0


class _FixedAt(_Fixed, LogitsAt):
    """_Fixed with the `LogitsAt` capability: records the positions it was asked for."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        raise AssertionError("a LogitsAt net is asked for its scored positions only")

    def logits_at(self, tokens: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        self.asked = where
        return (self.logits * self.scale)[where]


def test_a_logits_at_net_is_asked_for_the_scored_positions_only_and_scores_the_same():
    net = _FixedAt(LOGITS)
    task = RecallTask(net, optimizer=torch.optim.SGD, dims=RecallDims(vocab_size=3, seq_len=4))
    loss = task.shared_step(BATCH, "val")
    assert torch.equal(net.asked, TARGETS != -100)
    assert torch.isclose(loss, F.cross_entropy(LOGITS[TARGETS != -100], TARGETS[TARGETS != -100]))
    logged = task.epoch_metrics("val")
    assert logged["val/acc"] == 3 / 5 and logged["val/exact_match"] == 0.0
    # sequence 0 right at both of its scored positions, sequence 1 wrong at one: exact match 1/2
    task.shared_step({"inputs": BATCH["inputs"], "targets": torch.tensor([[-100, 1, 2, -100], [1, -100, 0, 1]])},
                     "train")
    assert task.epoch_metrics("train")["train/exact_match"] == 0.5


def test_extra_test_sets_are_their_own_slices():
    dims = RecallDims(vocab_size=3, seq_len=4, test_sets=["len8"])
    task = RecallTask(_Fixed(LOGITS), optimizer=torch.optim.SGD, dims=dims)
    task.shared_step(BATCH, "test", 0)
    task.shared_step({"inputs": BATCH["inputs"], "targets": torch.tensor([[0, -100, -100, -100]] * 2)}, "test", 1)
    logged = task.epoch_metrics("test")
    assert logged["test/acc"] == 3 / 5 and logged["test/len8/acc"] == 0.5
    expected = {f"test{s}/{m}" for s in ("", "/len8") for m in ("loss", "acc", "exact_match")}
    assert set(logged) == expected | {"model/params"}  # _Fixed declares no state size
    assert logged["model/params"] == 1


def test_a_state_sized_model_reports_its_state_size_with_the_test_metrics():
    class Sized(_Fixed, StateSized):
        state_size = 96

    task = RecallTask(Sized(LOGITS), optimizer=torch.optim.SGD, dims=RecallDims(vocab_size=3, seq_len=4))
    task.shared_step(BATCH, "val")
    task.shared_step(BATCH, "test")
    assert "model/state_size" not in task.epoch_metrics("val")
    logged = task.epoch_metrics("test")
    assert (logged["model/state_size"], logged["model/params"]) == (96, 1)


def test_a_batch_without_scored_positions_has_zero_loss():
    task = RecallTask(_Fixed(LOGITS), optimizer=torch.optim.SGD, dims=RecallDims(vocab_size=3, seq_len=4))
    loss = task.shared_step({"inputs": BATCH["inputs"], "targets": torch.full((2, 4), -100)}, "train")
    assert loss == 0 and task.epoch_metrics("train") == {}


def test_a_tiny_net_learns_on_mqar():
    torch.manual_seed(0)
    dm = RecallDataModule(source=MQAR(vocab_size=32, seq_len=16, num_kv_pairs=2), num_train=64, batch_size=64)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    task = RecallTask(_Bigram(32), optimizer=torch.optim.Adam, dims=dm.dims)
    optimizer = torch.optim.Adam(task.parameters(), lr=0.05)
    losses = []
    for _ in range(20):
        loss = task.shared_step(batch, "train")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.8 * losses[0]  # it learns the value half of the vocabulary, if not which value
    assert task.epoch_metrics("train")["train/acc"] <= 1.0


class _Data:
    """A datamodule whose validation set is BATCH twice (two batches)."""

    def val_dataloader(self) -> list[dict[str, torch.Tensor]]:
        return [BATCH, BATCH]


def test_plots_show_the_answers_and_the_accuracy_at_each_position(tmp_path, monkeypatch):
    from attnmem.evaluation import recall_plots

    drawn = {}
    for name in ("recall_examples", "accuracy_by_position"):
        real = getattr(recall_plots, name)
        monkeypatch.setattr(recall_plots, name, lambda *a, real=real, name=name: drawn.setdefault(name, a) and real(*a))
    task = RecallTask(_Fixed(LOGITS), optimizer=torch.optim.SGD, dims=RecallDims(vocab_size=3, seq_len=4))
    paths = task.plot_examples(_Data(), tmp_path, num_examples=1)
    assert [p.name for p in paths] == ["examples.png", "accuracy_by_position.png"] and all(p.is_file() for p in paths)
    inputs, targets, predicted, scored = drawn["recall_examples"]
    assert predicted.tolist() == [[0, 1, 2, 0]] and scored.tolist() == [[False, True, False, True]]
    correct, count = drawn["accuracy_by_position"]  # by hand from LOGITS / TARGETS, over both batches
    assert correct.tolist() == [2, 2, 2, 0] and count.tolist() == [2, 2, 2, 4]
    assert task.net.training  # its mode restored


def test_the_examples_colour_right_and_wrong_answers():
    from attnmem.evaluation import recall_plots

    fig = recall_plots.recall_examples(BATCH["inputs"], TARGETS, LOGITS.argmax(-1), TARGETS != -100)
    cells = fig.axes[0].images[0].get_array()
    assert cells.tolist() == [[0, 1, 0, 2], [1, 0, 1, 2]]  # 0 not scored, 1 right, 2 wrong
    assert "3 of 5 right" in fig.axes[0].get_title()
    answers = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("→")]
    assert answers == ["→0", "→2"]  # the model's answers under the two wrong cells, (0, 3) and (1, 3)
    bars = recall_plots.accuracy_by_position(torch.tensor([2, 0, 1]), torch.tensor([2, 0, 4])).axes[0].patches
    assert [(b.get_x() + b.get_width() / 2, b.get_height()) for b in bars] == [(0.0, 1.0), (2.0, 0.25)]
