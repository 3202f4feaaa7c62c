"""A folder of corpus files as an embeddings source: the files, their documents, and the seeded validation split."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import ClassVar

from attnmem.core.errors import UserError
from attnmem.data.catalog import fetch_hint


def held_out(documents: Iterable[str], split: str, fraction: float, seed: int) -> Iterator[str]:
    """The documents of `split`: "val" a seeded `fraction` of them (each drawn in turn), "train" the rest."""
    rng = random.Random(f"corpus/{seed}")
    for document in documents:
        if (rng.random() < fraction) == (split == "val"):
            yield document


class FolderCorpus:
    """The files matching `pattern` in `data_dir` (sorted); validation is a seeded `val_fraction` of their documents.

    A subclass says what one document of its files is (`read`), which files it reads by default, and what they
    look like (`expected`).
    """

    default_pattern: ClassVar[str]  # the files read when `pattern` is not given
    expected: ClassVar[str]  # the hint of the error for a folder without a matching file

    def __init__(
        self, *, data_dir: str, pattern: str | None = None, val_fraction: float = 0.05, split_seed: int = 0
    ) -> None:
        if not 0 < val_fraction < 1:
            raise ValueError(f"data.source.val_fraction must be in (0, 1), got {val_fraction}")
        self.data_dir, self.pattern = Path(data_dir).expanduser(), pattern or self.default_pattern
        self.val_fraction, self.split_seed = val_fraction, split_seed
        self.where = f"data.source.data_dir={self.data_dir}"
        self.data_files: list[Path] = []

    def prepare_data(self) -> None:
        """Stop with one line when the folder is missing or holds no matching file."""
        if not self.data_dir.is_dir():
            raise UserError(f"{self.where}: no such folder{fetch_hint(self.data_dir)}")
        self.data_files = sorted(p for p in self.data_dir.glob(self.pattern) if p.is_file())
        if not self.data_files:
            raise UserError(f"{self.where}: no file matches data.source.pattern={self.pattern}: {self.expected}")

    def read(self, path: Path) -> Iterator[str]:
        """The documents of one file."""
        raise NotImplementedError

    def all_documents(self) -> Iterator[str]:
        """Every document of every matching file, in order."""
        if not self.data_files:
            self.prepare_data()
        for path in self.data_files:
            yield from self.read(path)

    def documents(self, split: str) -> Iterator[str]:
        """The documents of `split`."""
        return held_out(self.all_documents(), split, self.val_fraction, self.split_seed)
