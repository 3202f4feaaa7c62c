"""The recall family's one datamodule: sequences of a seeded recall source, split by seed, batched.

A source (`MQAR`, `SelectiveCopy`, `InductionHeads`, or any class with the `RecallSource` members) generates
`(inputs, targets)` for a number of examples and a seed; this module draws each split from its own seed and serves
`{"inputs": (B, T), "targets": (B, T)}` batches (targets -100 where a position is not scored). `test_sets` adds
test sets of the same source with some options changed (longer sequences, more pairs), test dataloader k > 0,
logged as `test/<name>/...`.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.core.dims import RecallDims

NAME = re.compile(r"[A-Za-z0-9_-]+")


class RecallSource(Protocol):
    """Where a recall datamodule's sequences come from (`data.source`): a frozen dataclass of its options."""

    vocab_size: int
    seq_len: int

    def check(self) -> None:
        """A one-line `ValueError` naming an option out of its range."""

    def generate(self, num_examples: int, seed: int) -> tuple[Tensor, Tensor]:
        """`inputs (N, seq_len)` token ids and `targets (N, seq_len)`, -100 where not scored, from `seed` alone."""


def split_seed(seed: int, split: str) -> int:
    """The seed of one split: a hash of the data's seed and the split's name (no split shares another's draws, nor
    another data seed's)."""
    return zlib.crc32(f"{seed}/{split}".encode())


def changed_source(source: RecallSource, name: str, options: Mapping[str, Any]) -> RecallSource:
    """The source of test set `name`: `source` with `options` changed; one line for a bad name or option."""
    where = f"data.test_sets.{name}"
    if not NAME.fullmatch(name):
        raise ValueError(f"{where}: a test set's name is letters, digits, _ and - (it names test/<name>/acc)")
    fields: list[str] = [f.name for f in dataclasses.fields(source)] if dataclasses.is_dataclass(source) else []
    for key in options:
        if key == "vocab_size":
            raise ValueError(f"{where}.vocab_size: a test set keeps the training vocabulary (data.source.vocab_size)")
        if key not in fields:
            raise ValueError(f"{where}.{key}: no such option of {type(source).__name__}; choose from "
                             f"{', '.join(f for f in fields if f != 'vocab_size')}")
    changed: RecallSource = dataclasses.replace(source, **dict(options))  # type: ignore[type-var]  # a dataclass
    try:
        changed.check()
    except ValueError as err:
        raise ValueError(f"{where} ({', '.join(f'{k}={v}' for k, v in options.items())}): {err}") from None
    return changed


class Sequences(Dataset):
    """Rows of `inputs`/`targets`; a batch of indices comes back as one dict."""

    def __init__(self, data: dict[str, Tensor]) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data["inputs"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        return {k: v[indices] for k, v in self.data.items()}


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _as_is(batch: _Batch) -> _Batch:
    return batch


class RecallDataModule(L.LightningDataModule):
    """Recall sequences of `source`: `num_train`, `num_val`, `num_test` examples, each split from its own seed."""

    family: ClassVar[str] = "recall"
    family_module: ClassVar[str] = "attnmem.tasks.recall.RecallTask"
    data_files: list[Path]  # what the run's manifest hashes: none, the data are generated

    def __init__(self, *, source: RecallSource, num_train: int = 2000, num_val: int = 256, num_test: int = 256,
                 test_sets: Mapping[str, Mapping[str, Any]] | None = None, batch_size: int = 32,
                 seed: int = 0) -> None:
        super().__init__()
        self.source, self.batch_size, self.seed = source, batch_size, seed
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.test_options = {str(name): dict(options) for name, options in (test_sets or {}).items()}
        self.test_sources: dict[str, RecallSource] = {}
        self.data_files = []
        self.splits: dict[str, dict[str, Tensor]] = {}

    def check(self) -> None:
        """One line naming the first option out of its range, and the test sets' sources built. At setup, not in
        `__init__`: Hydra's instantiation would wrap the error in a traceback."""
        for option, value in ({f"num_{split}": n for split, n in self.sizes.items()} | {"batch_size": self.batch_size}
                              ).items():
            if value < 1:
                raise ValueError(f"data.{option}={value} is out of range: it must be >= 1")
        self.source.check()
        self.test_sources = {name: changed_source(self.source, name, o) for name, o in self.test_options.items()}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        self.check()
        plan = [(split, self.source, n) for split, n in self.sizes.items()]
        plan += [(f"test/{name}", source, self.sizes["test"]) for name, source in self.test_sources.items()]
        for split, source, n in plan:
            inputs, targets = source.generate(n, split_seed(self.seed, split))
            self.splits[split] = {"inputs": inputs, "targets": targets}

    @property
    def dims(self) -> RecallDims:
        """The vocabulary, the longest sequence of any split (a model with a table of positions covers every test
        set) and the names of the extra test sets."""
        if len(self.test_sources) != len(self.test_options):
            self.check()
        return RecallDims(vocab_size=self.source.vocab_size,
                          seq_len=max([self.source.seq_len, *(s.seq_len for s in self.test_sources.values())]),
                          test_sets=list(self.test_sources))

    @property
    def has_test(self) -> bool:
        return True

    def loader(self, split: str, *, shuffle: bool) -> DataLoader:
        """The batches of one split (set up first), shuffled from torch's RNG for training."""
        return DataLoader(Sequences(self.splits[split]), batch_size=self.batch_size, shuffle=shuffle,
                          collate_fn=_as_is)

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("val", shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        return [self.loader(split, shuffle=False) for split in ["test", *(f"test/{n}" for n in self.test_sources)]]
