"""The algorithmic tasks of Graves et al. 2014 (§4): copy, repeat copy, associative recall, priority sort.

Every task makes examples of one "size", the knob its generalisation tests turn: the number of
vectors (copy), of repeats (repeat copy), of items (associative recall), of input vectors
(priority sort). An example is `inputs (T, W_in)` and `targets (T, W_out)` over the same T steps;
the targets count only on the last `outputs` steps (the output phase, where the input is zero).
Batches are right-padded; `mask (B, T)` is True on each example's output phase.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import lightning as L
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

from attnmem.core.dims import SequenceDims
from attnmem.data.curriculum import AtLevel, Curriculum

Example = tuple[Tensor, Tensor, int]  # inputs (T, W_in), targets (T, W_out), output steps


def _bits(g: torch.Generator, *shape: int) -> Tensor:
    return torch.randint(0, 2, shape, generator=g).float()


def _uniform(g: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high + 1, (1,), generator=g))


def _check_range(name: str, low: int, high: int, least: int = 1) -> None:
    if low < least:
        raise ValueError(f"data.task.min_{name} must be >= {least}, got {low}")
    if low > high:
        raise ValueError(f"data.task.min_{name} ({low}) > data.task.max_{name} ({high})")


class Algorithm(Protocol):
    """What the datamodule needs of a task: widths, the size range, and examples of a drawn shape."""

    input_size: int
    output_size: int

    def sizes(self) -> tuple[int, int]: ...

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]: ...

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example: ...


@dataclass
class Copy:
    """Copy (§4.1): `length` random `width`-bit vectors, a delimiter (own channel), then recall them all."""

    width: int = 8
    min_length: int = 1
    max_length: int = 20

    def __post_init__(self) -> None:
        _check_range("length", self.min_length, self.max_length)
        self.input_size, self.output_size = self.width + 1, self.width

    def sizes(self) -> tuple[int, int]:
        return self.min_length, self.max_length

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]:
        return (size or _uniform(g, self.min_length, self.max_length),)

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example:
        (length,) = shape
        seq = _bits(g, length, self.width)
        inputs = torch.zeros(2 * length + 1, self.input_size)
        inputs[:length, : self.width] = seq
        inputs[length, -1] = 1.0  # delimiter
        targets = torch.zeros(2 * length + 1, self.output_size)
        targets[length + 1 :] = seq
        return inputs, targets, length


@dataclass
class RepeatCopy:
    """Repeat copy (§4.2): a sequence, then its repeat count on its own channel; output it that many times + end mark.

    The count is given as repeats / max_repeats, so counts beyond training read as values above 1.
    """

    width: int = 8
    min_length: int = 1
    max_length: int = 10
    min_repeats: int = 1
    max_repeats: int = 10

    def __post_init__(self) -> None:
        _check_range("length", self.min_length, self.max_length)
        _check_range("repeats", self.min_repeats, self.max_repeats)
        self.input_size, self.output_size = self.width + 2, self.width + 1  # + delimiter, count | + end mark

    def sizes(self) -> tuple[int, int]:
        return self.min_repeats, self.max_repeats

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]:
        return _uniform(g, self.min_length, self.max_length), size or _uniform(g, self.min_repeats, self.max_repeats)

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example:
        length, repeats = shape
        seq = _bits(g, length, self.width)
        outputs = repeats * length + 1
        inputs = torch.zeros(length + 1 + outputs, self.input_size)
        inputs[:length, : self.width] = seq
        inputs[length, -2] = 1.0  # delimiter
        inputs[length, -1] = repeats / self.max_repeats
        targets = torch.zeros(len(inputs), self.output_size)
        targets[length + 1 : -1, : self.width] = seq.repeat(repeats, 1)
        targets[-1, -1] = 1.0  # end mark
        return inputs, targets, outputs


@dataclass
class AssociativeRecall:
    """Associative recall (§4.3): items of `item_length` vectors, each after a delimiter; a query item
    between two query delimiters; the target is the item that followed the query in the list."""

    width: int = 6
    item_length: int = 3
    min_items: int = 2
    max_items: int = 6
    least_size: ClassVar[int] = 2  # a query needs an item after it

    def __post_init__(self) -> None:
        _check_range("items", self.min_items, self.max_items, least=2)
        if self.item_length < 1:
            raise ValueError(f"data.task.item_length must be >= 1, got {self.item_length}")
        self.input_size, self.output_size = self.width + 2, self.width  # + item and query delimiters

    def sizes(self) -> tuple[int, int]:
        return self.min_items, self.max_items

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]:
        return (size or _uniform(g, self.min_items, self.max_items),)

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example:
        (items,) = shape
        k = self.item_length
        seq = _bits(g, items, k, self.width)
        query = _uniform(g, 0, items - 2)
        inputs = torch.zeros(items * (k + 1) + 2 + 2 * k, self.input_size)
        listed = inputs[: items * (k + 1)].view(items, k + 1, -1)
        listed[:, 0, -2] = 1.0  # item delimiter
        listed[:, 1:, : self.width] = seq
        start = items * (k + 1)
        inputs[start, -1] = inputs[start + k + 1, -1] = 1.0  # query delimiters
        inputs[start + 1 : start + k + 1, : self.width] = seq[query]
        targets = torch.zeros(len(inputs), self.output_size)
        targets[-k:] = seq[query + 1]
        return inputs, targets, k


@dataclass
class PrioritySort:
    """Priority sort (§4.5): vectors with a priority from U[-1, 1] on an extra channel; output the
    `num_targets` highest-priority ones, highest first. A size L keeps the ratio: round(L · targets / vectors)."""

    width: int = 8
    num_vectors: int = 20
    num_targets: int = 16

    def __post_init__(self) -> None:
        if self.num_vectors < 1 or not 1 <= self.num_targets <= self.num_vectors:
            raise ValueError(f"data.task.num_targets ({self.num_targets}) must be in [1, data.task.num_vectors "
                             f"({self.num_vectors})]")
        self.input_size, self.output_size = self.width + 2, self.width  # + priority, delimiter

    def sizes(self) -> tuple[int, int]:
        return self.num_vectors, self.num_vectors

    def draw(self, g: torch.Generator, size: int | None) -> tuple[int, ...]:
        return (size or self.num_vectors,)

    def example(self, shape: tuple[int, ...], g: torch.Generator) -> Example:
        (n,) = shape
        outputs = max(1, round(n * self.num_targets / self.num_vectors))
        seq = _bits(g, n, self.width)
        priority = torch.rand(n, generator=g) * 2 - 1
        inputs = torch.zeros(n + 1 + outputs, self.input_size)
        inputs[:n, : self.width] = seq
        inputs[:n, -2] = priority
        inputs[n, -1] = 1.0  # delimiter
        targets = torch.zeros(len(inputs), self.output_size)
        targets[n + 1 :] = seq[priority.argsort(descending=True)[:outputs]]
        return inputs, targets, outputs


def make_batch(task: Algorithm, batch_size: int, g: torch.Generator, *, size: int | None = None,
               group: bool = True) -> dict[str, Tensor]:
    """A batch of examples; with `group` all share one random shape (no padding), else each draws its own."""
    shapes = [task.draw(g, size)] * batch_size if group else [task.draw(g, size) for _ in range(batch_size)]
    examples = [task.example(shape, g) for shape in shapes]
    steps = max(len(x) for x, _, _ in examples)
    inputs = torch.zeros(batch_size, steps, task.input_size)
    targets = torch.zeros(batch_size, steps, task.output_size)
    mask = torch.zeros(batch_size, steps, dtype=torch.bool)
    for i, (x, y, outputs) in enumerate(examples):
        inputs[i, : len(x)], targets[i, : len(y)] = x, y
        mask[i, len(x) - outputs : len(x)] = True
    return {"inputs": inputs, "targets": targets, "mask": mask}


def _generator(*keys: int) -> torch.Generator:
    """A generator seeded from integer keys alone (same numbers on every machine and process)."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence(list(keys)).generate_state(1)[0]))


class FreshBatches(Dataset):
    """Item i is a batch drawn from a generator seeded by (seed, i): fresh every step, reproducible."""

    def __init__(self, task: Callable[[], Algorithm], batch_size: int, seed: int, steps: int, group: bool) -> None:
        self.task, self.batch_size, self.seed, self.steps, self.group = task, batch_size, seed, steps, group

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        # the task is asked at every batch: a curriculum's level may have moved since the last one
        return make_batch(self.task(), self.batch_size, _generator(self.seed, 0, index), group=self.group)


class EpochSampler(Sampler[int]):
    """Indices epoch · steps + i, so every epoch draws new batches; Lightning calls `set_epoch`."""

    def __init__(self, steps: int) -> None:
        self.steps, self.epoch = steps, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[int]:
        # a generator reads the epoch at the first batch: a resumed run makes its first iterator before set_epoch
        yield from range(self.epoch * self.steps, (self.epoch + 1) * self.steps)


class AlgorithmicDataModule(L.LightningDataModule):
    """Training batches drawn fresh each step (one size per batch with `group_lengths`); fixed, seeded
    validation and test sets of mixed sizes; one extra test set per size in `test_lengths`
    (reported as `test/len{L}/...`). With a `curriculum`, training batches are capped at its current
    level (`level`, saved in checkpoints; `len(levels)` is the full task); validation and test are not."""

    family: ClassVar[str] = "sequence"
    family_module: ClassVar[str] = "attnmem.tasks.sequence.SequenceTask"

    def __init__(self, *, task: Algorithm, batch_size: int = 16, steps_per_epoch: int = 500, num_val: int = 256,
                 num_test: int = 256, test_lengths: list[int] | tuple[int, ...] = (), group_lengths: bool = True,
                 seed: int = 0, curriculum: Curriculum | Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for name, value in {"batch_size": batch_size, "steps_per_epoch": steps_per_epoch, "num_val": num_val,
                            "num_test": num_test}.items():
            if value < 1:
                raise ValueError(f"data.{name} must be >= 1, got {value}")
        low = 2 if isinstance(task, AssociativeRecall) else 1
        if any(length < low for length in test_lengths):
            raise ValueError(f"data.test_lengths must all be >= {low}, got {list(test_lengths)}")
        self.task, self.batch_size, self.steps_per_epoch = task, batch_size, steps_per_epoch
        self.num_val, self.num_test, self.test_lengths = num_val, num_test, [int(n) for n in test_lengths]
        self.group_lengths, self.seed = group_lengths, seed
        if curriculum is not None and not isinstance(curriculum, Curriculum):
            curriculum = Curriculum.from_options(curriculum)
        if curriculum is not None:
            curriculum.check_task(task)
        self.curriculum, self.level = curriculum, 0
        self.data_files: list = []  # generated: nothing to hash
        self.val: list[dict[str, Tensor]] = []
        self.test: list[list[dict[str, Tensor]]] = []

    def _fixed(self, split: int, count: int, size: int | None) -> list[dict[str, Tensor]]:
        g = _generator(self.seed, split)
        # each sequence draws its own size, so a fixed set covers the range evenly (padded and masked)
        batches = [make_batch(self.task, self.batch_size, g, size=size, group=False)
                   for _ in range(math.ceil(count / self.batch_size))]
        return [{k: v[: count - i * self.batch_size] for k, v in b.items()} for i, b in enumerate(batches)]

    def setup(self, stage: str | None = None) -> None:
        if self.val:
            return
        self.val = self._fixed(1, self.num_val, None)
        self.test = [self._fixed(2, self.num_test, None)]
        self.test += [self._fixed(3 + k, self.num_test, size) for k, size in enumerate(self.test_lengths)]

    def training_task(self) -> Algorithm:
        """The task training draws from now: capped at the curriculum's level, or the full task."""
        levels = self.curriculum.levels if self.curriculum else []
        return AtLevel(self.task, levels[self.level]) if self.level < len(levels) else self.task

    def level_check(self) -> list[dict[str, Tensor]]:
        """Fixed sequences of the current level, on which the curriculum decides to move on."""
        if self.curriculum is None:
            raise RuntimeError("level_check: no data.curriculum (the curriculum callback calls it only with one)")
        g, count = _generator(self.seed, 100 + self.level), self.curriculum.num_check
        return [make_batch(self.training_task(), count, g, group=False)]

    def state_dict(self) -> dict[str, int]:
        return {"curriculum_level": self.level}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.level = state.get("curriculum_level", 0)

    @property
    def dims(self) -> SequenceDims:
        return SequenceDims(self.task.input_size, self.task.output_size, list(self.test_lengths))

    @property
    def has_test(self) -> bool:
        return True

    def train_dataloader(self) -> DataLoader:
        data = FreshBatches(self.training_task, self.batch_size, self.seed, self.steps_per_epoch, self.group_lengths)
        return DataLoader(data, batch_size=None, sampler=EpochSampler(self.steps_per_epoch))

    def val_dataloader(self) -> DataLoader:
        # a list is a map-style dataset (__getitem__, __len__); torch's hint asks for a Dataset subclass
        return DataLoader(self.val, batch_size=None)  # type: ignore[arg-type]

    def test_dataloader(self) -> list[DataLoader]:
        return [DataLoader(batches, batch_size=None) for batches in self.test]  # type: ignore[arg-type]  # as above
