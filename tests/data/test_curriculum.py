"""Curriculum learning: levels cap the training sizes, move on past the threshold, survive a checkpoint, never
touch validation or test; bad curricula are refused naming the option."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAST

from attnmem.data.algorithmic import AlgorithmicDataModule, AssociativeRecall, Copy, PrioritySort, RepeatCopy
from attnmem.data.curriculum import Curriculum
from attnmem.runtime import run

TINY = [*FAST, "model=rnn_sequence", "model.hidden_size=8", "data.batch_size=4", "data.steps_per_epoch=2",
        "data.num_val=4", "data.num_test=4", "data.task.max_length=4", "data.test_lengths=[]"]


def lengths(dm: AlgorithmicDataModule, batches: int = 30) -> set[int]:
    """The copy lengths of the first training batches (inputs are 2·length + 1 steps)."""
    loader = dm.train_dataloader()
    return {(b["inputs"].shape[1] - 1) // 2 for b, _ in zip(loader, range(batches), strict=False)}


def test_levels_cap_training_sizes_and_the_full_task_follows_the_last():
    dm = AlgorithmicDataModule(task=Copy(max_length=6), curriculum={"levels": [1, 3]}, group_lengths=True)
    assert lengths(dm) == {1}
    dm.level = 1
    assert lengths(dm) == {1, 2, 3}
    dm.level = 2  # past the last level: the full task
    assert lengths(dm, 60) == set(range(1, 7))


def test_a_one_size_task_is_capped_at_exactly_its_level():
    dm = AlgorithmicDataModule(task=PrioritySort(num_vectors=6, num_targets=4), curriculum={"levels": [2, 4]})
    batch = next(iter(dm.train_dataloader()))
    assert batch["inputs"].shape[1] == 2 + 1 + round(2 * 4 / 6)  # 2 vectors, the delimiter, 1 output


def test_validation_and_test_ignore_the_level():
    plain = AlgorithmicDataModule(task=Copy(max_length=6), num_val=8, num_test=8)
    staged = AlgorithmicDataModule(task=Copy(max_length=6), num_val=8, num_test=8, curriculum={"levels": [1]})
    plain.setup(), staged.setup()
    for a, b in zip([*plain.val, *plain.test[0]], [*staged.val, *staged.test[0]], strict=True):
        torch.testing.assert_close(a["inputs"], b["inputs"])


def test_the_level_is_saved_and_restored_with_the_same_batches():
    dm = AlgorithmicDataModule(task=Copy(max_length=6), curriculum={"levels": [2, 4]})
    dm.level = 1
    again = AlgorithmicDataModule(task=Copy(max_length=6), curriculum={"levels": [2, 4]})
    again.load_state_dict(dm.state_dict())
    assert again.level == 1
    torch.testing.assert_close(next(iter(again.train_dataloader()))["inputs"],
                               next(iter(dm.train_dataloader()))["inputs"])


def test_training_moves_through_every_level_when_each_passes(compose_cfg, tmp_path):
    cfg = compose_cfg(*TINY, "trainer.max_epochs=3", "+data.curriculum={levels:[1,2],threshold:1000}")
    run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["train/curriculum_level"] == 2.0  # two levels passed: the full task in epoch 3
    rows = (tmp_path / "run" / "csv" / "metrics.csv").read_text()
    assert "train/curriculum_level" in rows.splitlines()[0]


def test_a_level_that_never_passes_keeps_training_there_and_says_so(compose_cfg, tmp_path, caplog):
    cfg = compose_cfg(*TINY, "trainer.max_epochs=2", "+data.curriculum={levels:[2],threshold:0}")
    with caplog.at_level("WARNING"):
        run.train(cfg)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["train/curriculum_level"] == 0.0 and metrics["train/level_bit_errors"] > 0
    assert "training ended at level 0 of 1 (sizes 1..2 of 1..4)" in caplog.text


@pytest.mark.parametrize(
    ("task", "options", "message"),
    [
        (Copy(max_length=10), {"levels": [5, 3]}, "levels must be increasing"),
        (Copy(max_length=10), {"levels": [2, 2]}, "levels must be increasing"),
        (Copy(max_length=10), {"levels": []}, "levels must name at least one level"),
        (Copy(max_length=10), {"levels": [2], "threshold": -1}, "threshold must be a number of bit errors >= 0"),
        (Copy(max_length=10), {"levels": [2], "num_check": 0}, "num_check must be >= 1"),
        (Copy(max_length=10), {"levels": [2], "patience": 3}, "unknown option(s) ['patience']"),
        (Copy(max_length=10), {"levels": [5, 10]}, "levels must lie in [1, 9] for Copy"),
        (RepeatCopy(min_repeats=2, max_repeats=5), {"levels": [1, 3]}, "levels must lie in [2, 4] for RepeatCopy"),
        (AssociativeRecall(min_items=2, max_items=2), {"levels": [2]}, "AssociativeRecall has no difficulty knob"),
    ],
)
def test_bad_curricula_name_the_option(task, options, message):
    with pytest.raises(ValueError, match="data.curriculum") as error:
        AlgorithmicDataModule(task=task, curriculum=options)
    assert message in str(error.value)


def test_a_curriculum_object_is_accepted_as_built_by_hydra():
    dm = AlgorithmicDataModule(task=Copy(max_length=6), curriculum=Curriculum(levels=[2]))
    assert dm.curriculum.levels == [2] and dm.training_task().sizes() == (1, 2)
