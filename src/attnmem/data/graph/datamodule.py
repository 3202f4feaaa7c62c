"""The graph family's one datamodule: a whole graph from a pluggable source, served as one batch per step."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.core.dims import GraphDims
from attnmem.data.graph.graph import Graph

__all__ = ["GraphDataModule", "GraphSource"]


class GraphSource(Protocol):
    """Where a graph datamodule's graph comes from (`Karate`, `BlockModel`, `GraphFiles`, `Cora`): `data.source`."""

    data_files: list[Path]  # the files the last `load` read, for the run's manifest

    def prepare(self) -> None:
        """Fetch what `load` needs (called once, on the first process)."""

    def load(self) -> Graph:
        """The graph, its labels and its split masks."""


class _Repeated(Dataset):
    """The same batch `times` times: full-batch training takes `times` optimizer steps per epoch."""

    def __init__(self, batch: dict[str, Tensor], times: int) -> None:
        self.batch, self.times = batch, times

    def __len__(self) -> int:
        return self.times

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return self.batch


class GraphDataModule(L.LightningDataModule):
    """Semi-supervised node classification on one graph (Kipf & Welling 2017): every batch is the whole graph.

    A batch holds `features (N, F)`, `edge_index (2, E)` (both directions, no self-loops: the models add
    them), `labels (N,)` (-1 where unknown) and `train_mask`, `val_mask`, `test_mask (N,)`; the family
    module scores each split on its nodes. An epoch is `steps_per_epoch` full-batch steps, then validation.
    """

    family: ClassVar[str] = "graph"
    family_module: ClassVar[str] = "attnmem.tasks.graph.GraphTask"

    def __init__(self, *, source: GraphSource, steps_per_epoch: int = 10, num_workers: int = 0) -> None:
        super().__init__()
        if steps_per_epoch < 1:
            raise ValueError(f"data.steps_per_epoch must be >= 1, got {steps_per_epoch}")
        if num_workers < 0:
            raise ValueError(f"data.num_workers must be >= 0, got {num_workers}")
        self.source, self.steps_per_epoch, self.num_workers = source, steps_per_epoch, num_workers
        self._graph: Graph | None = None

    def prepare_data(self) -> None:
        self.source.prepare()

    def setup(self, stage: str | None = None) -> None:
        if self._graph is None:
            self._graph = self.source.load()

    @property
    def graph(self) -> Graph:
        """The loaded graph; `setup()` must have run."""
        if self._graph is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return self._graph

    @property
    def data_files(self) -> list[Path]:
        """The files the source read (none for generated data), for the run's manifest."""
        return self.source.data_files

    @property
    def dims(self) -> GraphDims:
        graph = self.graph
        return GraphDims(
            num_features=graph.features.shape[1],
            num_classes=len(graph.classes),
            num_nodes=len(graph.labels),
            classes=list(graph.classes),
        )

    @property
    def has_test(self) -> bool:
        return bool(self.graph.masks["test"].any())

    def _loader(self, times: int) -> DataLoader:
        return DataLoader(
            _Repeated(self.graph.batch(), times),
            batch_size=None,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.steps_per_epoch)

    def val_dataloader(self) -> DataLoader:
        return self._loader(1)

    def test_dataloader(self) -> DataLoader | list:
        return self._loader(1) if self.has_test else []
