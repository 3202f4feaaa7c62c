"""The qa family's one datamodule: stories, questions and answer classes from a pluggable source."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import QADims
from attnmem.core.glove import Vectors
from attnmem.data.qa.tensors import QAData

__all__ = ["SAMPLERS", "QADataModule", "QASource", "parse_tasks"]

SAMPLERS = ("shuffle", "replacement")  # an epoch: a shuffle of every training example | batches drawn with replacement


class QASource(Protocol):
    """Where a qa datamodule's examples come from (`BabiFiles`, `BabiGenerator`): built by Hydra as `data.source`."""

    supported_tasks: Sequence[int]  # the bAbI task numbers it can serve
    data_files: list[Path]  # the files the last `load` read, for the run's manifest

    def prepare(self) -> None:
        """Fetch what `load` needs (called once, on the first process)."""

    def load(self, tasks: list[int], memory_size: int, *, fit_memory: bool = False) -> QAData:
        """The tasks' vectorised splits ("train", "val", optionally "test") and their vocabularies; `fit_memory`:
        min(`memory_size`, the longest training story) slots."""

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """Pretrained vectors of those `words` that have one (`data.source.embeddings`), or None."""


def parse_tasks(tasks: Sequence[int] | int | str, allowed: Sequence[int]) -> list[int]:
    """Task numbers from the `tasks` option (a list, one number, or "all"), checked against `allowed`."""
    if isinstance(tasks, str) and tasks.strip().lower() == "all":
        return list(allowed)
    error = ValueError(f"data.tasks must be 'all' or numbers among {list(allowed)}, got {tasks!r}")
    try:
        numbers = [int(t) for t in ([tasks] if isinstance(tasks, (int, str)) else tasks)]
    except (TypeError, ValueError):
        raise error from None
    if not numbers or any(t not in allowed for t in numbers):
        raise error
    return sorted(set(numbers))


class QADataModule(L.LightningDataModule):
    """bAbI-style question answering (Weston et al. 2015): the `tasks` of `source`, trained jointly.

    The source gives the vectorised splits and vocabularies; this class serves them as batches of `story`
    (B, S, L), `query` (B, Lq), `answer` (B,) and `task` (B,), tells the model its sizes (`dims`) and keeps
    the vocabularies in checkpoints, so a trained model reads other data with the ids it knows. `sampler`:
    each training epoch a shuffle of every example ("shuffle"), or ⌊N / batch_size⌋ batches each drawn
    uniformly with replacement ("replacement", as the MemN2N reference code's train.m).
    """

    family: ClassVar[str] = "qa"
    family_module: ClassVar[str] = "attnmem.tasks.qa.QATask"

    def __init__(self, *, source: QASource, tasks: Sequence[int] | int | str = (1,), memory_size: int = 50,
                 fit_memory: bool = False, batch_size: int = 32, sampler: str = "shuffle",
                 num_workers: int = 0) -> None:
        super().__init__()
        if sampler not in SAMPLERS:
            raise ValueError(f"data.sampler must be one of {list(SAMPLERS)}, got {sampler!r}")
        for name, value, low in (("memory_size", memory_size, 1), ("batch_size", batch_size, 1),
                                 ("num_workers", num_workers, 0)):
            if value < low:
                raise ValueError(f"data.{name} must be in [{low}, inf], got {value}")
        self.source, self.tasks = source, parse_tasks(tasks, source.supported_tasks)
        self.memory_size, self.fit_memory = memory_size, fit_memory
        self.batch_size, self.sampler, self.num_workers = batch_size, sampler, num_workers
        self._qa: QAData | None = None
        self._state: dict[str, Any] | None = None  # a checkpoint's vocabularies, applied once data is built
        self._embeddings: Tensor | None = None  # (V, D), empty without an embeddings file; read once

    def prepare_data(self) -> None:
        self.source.prepare()

    def setup(self, stage: str | None = None) -> None:
        if self._qa is not None:
            return
        self._qa = self.source.load(self.tasks, self.memory_size, fit_memory=self.fit_memory)
        if self._state is not None:
            self._qa = self._qa.adopt(self._state)

    @property
    def qa(self) -> QAData:
        """The built data; `setup()` must have run."""
        if self._qa is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return self._qa

    @property
    def data_files(self) -> list[Path]:
        """The files the source read (none for generated data), for the run's manifest."""
        return self.source.data_files

    @property
    def dims(self) -> QADims:
        """The sizes, and the source's pretrained vectors in vocabulary order when it has an embeddings file."""
        if self._embeddings is None:
            vectors = self.source.vectors(self.qa.vocab)
            self._embeddings = torch.empty(0) if vectors is None else vectors.matrix(self.qa.vocab)
        embeddings = self._embeddings if self._embeddings.numel() else None
        return replace(self.qa.dims(self.tasks), embeddings=embeddings)

    @property
    def vocab(self) -> list[str]:
        return self.qa.vocab

    @property
    def answers(self) -> list[str]:
        return self.qa.answers

    @property
    def has_test(self) -> bool:
        return "test" in self.qa.splits

    def words(self, ids: Tensor) -> str:
        """1-D word ids as space-separated words, pads dropped."""
        return self.qa.words(ids)

    def train_dataloader(self) -> DataLoader:
        return self.qa.loader("train", batch_size=self.batch_size, shuffle=True, num_workers=self.num_workers,
                              replacement=self.sampler == "replacement")

    def val_dataloader(self) -> DataLoader:
        return self.qa.loader("val", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader | list:
        if not self.has_test:
            return []
        return self.qa.loader("test", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def state_dict(self) -> dict[str, Any]:
        return self.qa.state() if self._qa is not None else dict(self._state or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._state = dict(state_dict)
        self._embeddings = None  # the checkpoint's vocabulary orders the rows
        if self._qa is not None:
            self._qa = self._qa.adopt(self._state)
