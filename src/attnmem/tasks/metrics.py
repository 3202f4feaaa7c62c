"""Per-epoch sums of named fields, optionally per slice, reduced across processes: what every family logs from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar, cast

import torch
from torch import Tensor, nn
from torchmetrics import Metric

Name = TypeVar("Name")  # what names a slice: a set's name, a bAbI task number


class Sums(Metric):
    """Running sums of named `fields` per slice (a bAbI task, a test set, a source length), read once per epoch.

    The hot path is one in-place add (`add`) or index_add (`add_rows`) per step, without torchmetrics'
    update wrapper and without logging. `read` reduces across processes (sums; the `minima` by min),
    returns one column per field and starts the next epoch from zero.
    """

    full_state_update = False
    total: Tensor  # (slices, fields), the state `add_state` registers

    def __init__(self, fields: Sequence[str], slices: int = 1, minima: Sequence[str] = ()) -> None:
        super().__init__()
        self.fields, self.minima = tuple(fields), tuple(minima)
        self.add_state("total", torch.zeros(slices, len(self.fields), dtype=torch.float64), dist_reduce_fx="sum")
        for name in self.minima:
            self.add_state(name, torch.tensor(float("inf"), dtype=torch.float64), dist_reduce_fx="min")

    def add(self, values: Tensor, slot: int = 0) -> None:
        """Add one value per field (`values (F,)`, in `fields` order) to slice `slot`."""
        self.total[slot].add_(values)

    def add_rows(self, slots: Tensor, rows: Tensor) -> None:
        """Add each row of `rows (B, F)` to its slice `slots (B,)`."""
        self.total.index_add_(0, slots, rows.to(self.total.dtype))

    def lower(self, name: str, value: Tensor) -> None:
        """Lower the running minimum `name` to `value` where that is smaller."""
        state = getattr(self, name)
        torch.minimum(state, value, out=state)

    def update(self, values: Tensor, slot: int = 0) -> None:
        """torchmetrics' entry point (counted by its wrapper); the hot path calls `add` itself."""
        self.add(values, slot)

    def compute(self) -> dict[str, Tensor]:
        """torchmetrics' entry point: the columns, synced across processes by its wrapper."""
        return self._columns()

    def read(self) -> dict[str, Tensor]:
        """The epoch's sums over all processes, a `(slices,)` column per field, and the minima; then zeroed."""
        self.sync()  # a no-op in a single process
        columns = self._columns()
        self.reset()
        return columns

    def _columns(self) -> dict[str, Tensor]:
        return dict(zip(self.fields, self.total.unbind(-1))) | {name: getattr(self, name) for name in self.minima}


class SumsDict(nn.ModuleDict):
    """A ModuleDict of `Sums` by name (a family's `<split>_sums`), its items typed as `Sums`."""

    def __init__(self, sums: Mapping[str, Sums]) -> None:
        super().__init__(sums)

    def __getitem__(self, key: str) -> Sums:
        return cast(Sums, super().__getitem__(key))  # every item is a Sums: the constructor takes only those


def counted(columns: dict[str, Tensor], names: Sequence[Name]) -> list[tuple[Name, dict[str, Tensor]]]:
    """`(name, {field: value})` of each slice, named in slice order, whose `count` is above 0; minima as they are."""
    return [
        (name, {f: c[i] if c.dim() else c for f, c in columns.items()})
        for i, name in enumerate(names)
        if columns["count"][i] > 0
    ]
