"""Random ±1 patterns and the probes that should retrieve them: the data of the `patterns` family.

K patterns of N units are drawn i.i.d. (+1 with probability `bias`), or read from a `.npy` file;
each split holds `probes_per_pattern` probes per stored pattern, made by flipping a fraction
`noise` of its bits and zeroing (masking) a further fraction `mask` (pattern completion).
Every batch carries the whole memory, `patterns (K, N)`, next to `probes (B, N)` and
`targets (B,)`, the index of the pattern each probe came from. With `partner_size` M (or
`pairs_path`) each pattern x also has a partner y, and batches carry `pairs (K, M)` for the
hetero-associative memories (x → y, x ⇄ y).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, TypeVar

import lightning as L
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.core.dims import PatternsDims
from attnmem.core.errors import UserError

SPLITS = ("train", "val", "test")


def random_patterns(num_patterns: int, size: int, *, bias: float = 0.5, generator: torch.Generator) -> Tensor:
    """K random patterns of N units in {-1, +1}, each unit +1 with probability `bias`: (K, N)."""
    plus = torch.rand(num_patterns, size, generator=generator) < bias
    return plus.float() * 2 - 1


def make_probes(patterns: Tensor, targets: Tensor, *, noise: float, mask: float, generator: torch.Generator) -> Tensor:
    """Copies of `patterns[targets]` with round(noise·N) bits flipped and round(mask·N) others set to 0: (B, N)."""
    probes = patterns[targets].clone()  # (B, N)
    b, n = probes.shape
    flips, masked = round(noise * n), round(mask * n)
    # one random permutation per probe: its first `flips` units flip, the next `masked` are hidden
    order = torch.rand(b, n, generator=generator).argsort(-1)  # (B, N)
    probes.scatter_(1, order[:, :flips], -probes.gather(1, order[:, :flips]))
    probes.scatter_(1, order[:, flips : flips + masked], 0.0)
    return probes


def load_patterns(path: Path, option: str = "data.path") -> Tensor:
    """Patterns from a `.npy` file of shape (K, N) holding ±1 or 0/1 values, as ±1: (K, N); errors name `option`."""
    if not path.is_file():
        raise UserError(f"{option}={path}: no such file")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as err:
        raise UserError(f"{option}={path}: not a .npy array ({err})") from None
    if array.ndim != 2 or min(array.shape) < 1:
        raise UserError(f"{option}={path}: patterns must be a 2-D array (K, N), got shape {array.shape}")
    values = set(np.unique(array).tolist())
    allowed = {0, 1} if values <= {0, 1} else {-1, 1}
    bad = sorted(values - allowed)
    if bad:
        raise UserError(f"{option}={path}: pattern values must be all ±1 or all 0/1, found {bad[0]}")
    patterns = torch.from_numpy(array.astype(np.float32))
    return patterns * 2 - 1 if allowed == {0, 1} else patterns


class ProbeDataset(Dataset):
    """Probes and targets indexed a batch at a time; each batch also carries the stored patterns."""

    def __init__(self, patterns: Tensor, probes: Tensor, targets: Tensor, pairs: Tensor | None = None) -> None:
        self.patterns, self.probes, self.targets, self.pairs = patterns, probes, targets, pairs

    def __len__(self) -> int:
        return len(self.targets)

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        index = torch.as_tensor(indices, dtype=torch.long)
        batch = {"probes": self.probes[index], "targets": self.targets[index], "patterns": self.patterns}
        return batch | ({"pairs": self.pairs} if self.pairs is not None else {})


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _batch_as_is(batch: _Batch) -> _Batch:
    return batch


class PatternsDataModule(L.LightningDataModule):
    """Stored ±1 patterns and noisy or masked probes of them (Hopfield 1982; Amit et al. 1985).

    K = `num_patterns`, or round(`load`·N) when it is null; with `path` the patterns are read from
    a `.npy` file instead (N and K are the file's). `partner_size` M gives each pattern a random ±1
    partner y (`pairs_path`: read from a `.npy` of (K, M)), drawn after the probes, so the patterns and
    probes of a seed are the same with or without partners. Seeded by `seed`, apart from the run's seed.
    """

    family: ClassVar[str] = "patterns"
    family_module: ClassVar[str] = "attnmem.tasks.patterns.PatternsTask"

    def __init__(self, *, size: int = 100, load: float = 0.05, num_patterns: int | None = None, bias: float = 0.5,
                 noise: float = 0.1, mask: float = 0.0, probes_per_pattern: int = 1, path: str | None = None,
                 batch_size: int = 1000, seed: int = 0, num_workers: int = 0, partner_size: int | None = None,
                 pairs_path: str | None = None) -> None:
        super().__init__()
        if size < 2:
            raise ValueError(f"data.size must be >= 2 units, got {size}")
        for name, value in {"noise": noise, "mask": mask, "bias": bias}.items():
            if not 0 <= value <= 1:
                raise ValueError(f"data.{name} must be in [0, 1], got {value}")
        if noise + mask > 1:
            raise ValueError(f"data.noise + data.mask must be <= 1, got {noise} + {mask}")
        if num_patterns is None and load <= 0 and path is None:
            raise UserError(f"data.load must be > 0 (or set data.num_patterns), got {load}")
        if num_patterns is not None and num_patterns < 1:
            raise ValueError(f"data.num_patterns must be >= 1 or null, got {num_patterns}")
        for name, value in {"probes_per_pattern": probes_per_pattern, "batch_size": batch_size}.items():
            if value < 1:
                raise ValueError(f"data.{name} must be >= 1, got {value}")
        if partner_size is not None and partner_size < 1:
            raise ValueError(f"data.partner_size must be >= 1 or null, got {partner_size}")
        self.size, self.num_patterns = size, num_patterns if num_patterns is not None else round(load * size)
        if self.num_patterns < 1 and path is None:
            raise UserError(f"data.load={load} stores no pattern at data.size={size}: raise the load or the size")
        self.bias, self.noise, self.mask, self.probes_per_pattern = bias, noise, mask, probes_per_pattern
        self.path = Path(path) if path is not None else None
        self.batch_size, self.seed, self.num_workers = batch_size, seed, num_workers
        self.partner_size, self.pairs_path = partner_size, Path(pairs_path) if pairs_path is not None else None
        self.data_files: list[Path] = [p for p in (self.path, self.pairs_path) if p is not None]
        self.patterns: Tensor | None = None
        self.pairs: Tensor | None = None  # (K, M) the partners y, when asked for
        self.splits: dict[str, dict[str, Tensor]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.patterns is not None:
            return
        generator = torch.Generator().manual_seed(self.seed)
        if self.path is not None:
            self.patterns = load_patterns(self.path)
            self.num_patterns, self.size = self.patterns.shape
        else:
            self.patterns = random_patterns(self.num_patterns, self.size, bias=self.bias, generator=generator)
        targets = torch.arange(self.num_patterns).repeat(self.probes_per_pattern)  # (K·r,)
        for split in SPLITS:  # each split its own noise, drawn in a fixed order
            probes = make_probes(self.patterns, targets, noise=self.noise, mask=self.mask, generator=generator)
            self.splits[split] = {"probes": probes, "targets": targets}
        self.pairs = self._partners(generator)

    def _partners(self, generator: torch.Generator) -> Tensor | None:
        """The partner y of each stored pattern: (K, M), from `pairs_path` or drawn; None without partners."""
        if self.pairs_path is not None:
            pairs = load_patterns(self.pairs_path, "data.pairs_path")
            if len(pairs) != self.num_patterns:
                raise UserError(f"data.pairs_path={self.pairs_path}: {len(pairs)} partners for {self.num_patterns} "
                                "stored patterns: give one row per pattern (data.num_patterns or data.path)")
            return pairs
        if self.partner_size is None:
            return None
        return random_patterns(self.num_patterns, self.partner_size, bias=self.bias, generator=generator)

    @property
    def dims(self) -> PatternsDims:
        if self.patterns is None:
            raise RuntimeError("call setup() before reading the datamodule's dims")
        partner_size = self.pairs.shape[-1] if self.pairs is not None else 0
        return PatternsDims(size=self.size, num_patterns=self.num_patterns, partner_size=partner_size)

    @property
    def has_test(self) -> bool:
        return True

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        if self.patterns is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        data = ProbeDataset(self.patterns, **self.splits[split], pairs=self.pairs)
        return DataLoader(data, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers,
                          collate_fn=_batch_as_is, persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
