"""Algorithmic tasks: layouts by hand, masks, padding, seeding, fresh training batches, bad options."""

from __future__ import annotations

import pytest
import torch

from attnmem.core.dims import SequenceDims
from attnmem.data.algorithmic import (
    AlgorithmicDataModule,
    AssociativeRecall,
    Copy,
    PrioritySort,
    RepeatCopy,
    make_batch,
)


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_copy_layout():
    inputs, targets, outputs = Copy(width=3).example((2,), g())
    assert inputs.shape == (5, 4) and targets.shape == (5, 3) and outputs == 2
    assert torch.equal(inputs[2], torch.tensor([0.0, 0.0, 0.0, 1.0]))  # the delimiter, alone
    assert torch.equal(inputs[3:], torch.zeros(2, 4))  # output phase: no input
    assert torch.equal(targets[3:], inputs[:2, :3]) and torch.equal(targets[:3], torch.zeros(3, 3))
    assert torch.all(inputs[:2, 3] == 0)


def test_repeat_copy_layout():
    inputs, targets, outputs = RepeatCopy(width=2, max_repeats=4).example((2, 3), g())
    assert inputs.shape == (2 + 1 + 7, 4) and targets.shape == (10, 3) and outputs == 3 * 2 + 1
    assert torch.equal(inputs[2], torch.tensor([0.0, 0.0, 1.0, 0.75]))  # delimiter, repeats / max_repeats
    assert torch.equal(targets[3:9, :2], inputs[:2, :2].repeat(3, 1))
    assert torch.equal(targets[-1], torch.tensor([0.0, 0.0, 1.0]))  # end mark
    assert targets[:9, 2].sum() == 0


def test_associative_recall_layout():
    task = AssociativeRecall(width=2, item_length=2)
    inputs, targets, outputs = task.example((3,), g(1))
    assert inputs.shape == (3 * 3 + 2 + 2 * 2, 4) and outputs == 2
    items = inputs[:9].view(3, 3, 4)
    assert torch.all(items[:, 0, 2] == 1) and torch.all(items[:, 1:, 2:] == 0)
    assert inputs[9, 3] == 1 and inputs[12, 3] == 1  # query delimiters around the query
    query = inputs[10:12, :2]
    position = next(i for i in range(3) if torch.equal(items[i, 1:, :2], query))
    assert position < 2 and torch.equal(targets[-2:], items[position + 1, 1:, :2])


def test_priority_sort_layout():
    inputs, targets, outputs = PrioritySort(width=3, num_vectors=5, num_targets=3).example((5,), g())
    assert inputs.shape == (5 + 1 + 3, 5) and outputs == 3
    order = inputs[:5, 3].argsort(descending=True)[:3]
    assert torch.equal(targets[6:], inputs[order, :3])
    assert inputs[:5, 3].abs().max() <= 1 and inputs[5, 4] == 1
    assert PrioritySort(num_vectors=20, num_targets=16).example((30,), g())[2] == 24  # the 16/20 ratio kept


@pytest.mark.parametrize("task", [Copy(), RepeatCopy(), AssociativeRecall(), PrioritySort()], ids=lambda t: type(t).__name__)
def test_mixed_lengths_are_padded_and_masked_on_each_output_phase(task):
    batch = make_batch(task, 8, g(), group=False)
    inputs, targets, mask = batch["inputs"], batch["targets"], batch["mask"]
    assert inputs.shape[:2] == targets.shape[:2] == mask.shape and inputs.shape[-1] == task.input_size
    assert torch.all(targets[~mask] == 0)
    last = mask.long().cumsum(1).argmax(1)  # each sequence's last output step
    assert torch.all(inputs[mask] == 0)  # no input during the output phase
    assert torch.all(inputs[torch.arange(inputs.shape[1])[None] > last[:, None]] == 0)  # padding


def test_grouped_batches_share_one_length():
    batch = make_batch(Copy(), 8, g(3), group=True)
    assert torch.all(batch["mask"].sum(1) == batch["mask"].sum(1)[0])
    assert batch["mask"][:, -1].all()  # no padding


def test_training_batches_are_fresh_each_step_and_epoch_but_seeded():
    dm = AlgorithmicDataModule(task=Copy(), batch_size=4, steps_per_epoch=3, num_val=6, num_test=5, test_lengths=[7],
                               seed=1)
    dm.setup("fit")
    loader = dm.train_dataloader()
    first = [b["inputs"] for b in loader]
    assert len(first) == 3 and not torch.equal(first[0][:, :2], first[1][:, :2])
    loader.sampler.set_epoch(1)
    second = [b["inputs"] for b in loader]
    assert all(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(first, second))
    loader.sampler.set_epoch(0)
    assert all(torch.equal(a, b) for a, b in zip(first, (b["inputs"] for b in loader)))
    again = AlgorithmicDataModule(task=Copy(), batch_size=4, steps_per_epoch=3, num_val=6, num_test=5,
                                  test_lengths=[7], seed=1)
    again.setup("fit")
    assert torch.equal(next(iter(again.train_dataloader()))["inputs"], first[0])
    assert all(torch.equal(a["inputs"], b["inputs"]) for a, b in zip(dm.val, again.val))


def test_fixed_splits_sizes_and_generalisation_sets():
    dm = AlgorithmicDataModule(task=Copy(max_length=5), batch_size=4, num_val=6, num_test=5, test_lengths=[7, 9])
    dm.setup("fit")
    assert [len(b["inputs"]) for b in dm.val] == [4, 2]
    loaders = dm.test_dataloader()
    assert len(loaders) == 3 and sum(len(b["inputs"]) for b in loaders[0]) == 5
    assert all(b["mask"].sum(1).eq(9).all() for b in loaders[2])
    assert dm.dims == SequenceDims(input_size=9, output_size=8, test_lengths=[7, 9])
    assert AlgorithmicDataModule.family == "sequence"


@pytest.mark.parametrize(
    ("make", "option"),
    [(lambda: Copy(min_length=5, max_length=3), "min_length"), (lambda: Copy(min_length=0), "min_length"),
     (lambda: RepeatCopy(min_repeats=4, max_repeats=2), "min_repeats"),
     (lambda: AssociativeRecall(min_items=1), "min_items"),
     (lambda: PrioritySort(num_vectors=4, num_targets=5), "num_targets"),
     (lambda: AlgorithmicDataModule(task=Copy(), batch_size=0), "batch_size"),
     (lambda: AlgorithmicDataModule(task=Copy(), test_lengths=[0]), "test_lengths")],
)
def test_bad_options_name_the_option(make, option):
    with pytest.raises(ValueError, match=option):
        make()
