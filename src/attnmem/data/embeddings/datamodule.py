"""The embeddings family's one datamodule: a corpus from a pluggable source, its vocabulary, streamed windows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import EmbeddingsDims
from attnmem.core.errors import UserError
from attnmem.data.embeddings.corpus import Vocabulary, encode, keep_probabilities, noise_distribution
from attnmem.data.embeddings.windows import Windows

__all__ = ["CorpusSource", "EmbeddingsDataModule"]


class CorpusSource(Protocol):
    """Where an embeddings datamodule's text comes from (`TextFolder`, `BabiCorpus`, `SquadContexts`,
    `GeneratedBabiCorpus`)."""

    data_files: list[Path]  # what the run's manifest hashes
    where: str  # the option that names the text, for errors ("data.source.data_dir=...")

    def prepare_data(self) -> None:
        """Stop with one line when the text cannot be read (a missing file or folder)."""

    def documents(self, split: str) -> Iterable[str]:
        """The documents of "train" or "val", read one at a time."""


class EmbeddingsDataModule(L.LightningDataModule):
    """Windows of 2`window`+1 words over a corpus, with `negatives` noise words each (NNLM, C&W, word2vec).

    The vocabulary is the training text's words seen `min_count` times, the `max_vocab` most frequent
    (a checkpoint's vocabulary wins); other words are dropped from the text, as word2vec does. `subsample`
    is Mikolov's t (null: no subsampling), applied to training only; validation scores at most
    `val_windows` windows with fixed negatives, so `val/loss` compares across epochs.
    """

    family: ClassVar[str] = "embeddings"
    family_module: ClassVar[str] = "attnmem.tasks.embeddings.EmbeddingsTask"

    def __init__(
        self,
        *,
        source: CorpusSource,
        window: int = 2,
        negatives: int = 5,
        min_count: int = 5,
        max_vocab: int | None = 20000,
        subsample: float | None = 1e-4,
        val_windows: int = 20000,
        batch_size: int = 512,
        seed: int = 0,
    ) -> None:
        super().__init__()
        for name, value in {
            "window": window,
            "negatives": negatives,
            "min_count": min_count,
            "val_windows": val_windows,
            "batch_size": batch_size,
        }.items():
            if value < 1:
                raise ValueError(f"data.{name} must be >= 1, got {value}")
        if max_vocab is not None and max_vocab < 1:
            raise ValueError(f"data.max_vocab must be >= 1 or null, got {max_vocab}")
        if subsample is not None and subsample <= 0:
            raise ValueError(f"data.subsample must be > 0 (Mikolov's t, e.g. 1e-4) or null, got {subsample}")
        self.source, self.window, self.num_negatives = source, window, negatives
        self.min_count, self.max_vocab, self.subsample = min_count, max_vocab, subsample
        self.val_windows, self.batch_size, self.seed = val_windows, batch_size, seed
        self.vocab: Vocabulary | None = None
        self.streams: dict[str, Tensor] = {}

    @property
    def data_files(self) -> list[Path]:
        return self.source.data_files

    def prepare_data(self) -> None:
        self.source.prepare_data()

    def setup(self, stage: str | None = None) -> None:
        if self.streams:
            return
        if self.vocab is None:
            self.vocab = Vocabulary.build(
                self.source.documents("train"),
                min_count=self.min_count,
                max_vocab=self.max_vocab,
                where=self.source.where,
            )
        for split in ("train", "val"):
            self.streams[split] = encode(self.source.documents(split), self.vocab, self.window)
        if not self.streams["val"].any():
            raise UserError(
                f"{self.source.where}: the validation text has no word of the vocabulary: "
                "raise data.source.val_fraction or give more text"
            )

    @property
    def dims(self) -> EmbeddingsDims:
        if self.vocab is None:
            raise RuntimeError("call setup() before reading the datamodule's dims")
        return EmbeddingsDims(vocab_size=len(self.vocab), window=self.window, itos=list(self.vocab.itos))

    @property
    def has_test(self) -> bool:
        return False

    def _loader(self, split: str) -> DataLoader:
        if not self.streams or self.vocab is None:  # setup builds both
            raise RuntimeError("call setup() before using the datamodule's data")
        windows = Windows(
            self.streams[split],
            window=self.window,
            keep=keep_probabilities(self.vocab.counts, self.subsample),
            noise=noise_distribution(self.vocab.counts),
            negatives=self.num_negatives,
            batch_size=self.batch_size,
            seed=self.seed,
            shuffle=split == "train",
            limit=None if split == "train" else self.val_windows,
        )
        return DataLoader(windows, batch_size=None)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train")

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> list:
        return []

    def state_dict(self) -> dict[str, Any]:
        return self.vocab.state() if self.vocab is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        vocab = Vocabulary(list(state_dict["itos"]), list(state_dict["counts"]))
        if vocab != self.vocab:  # the text again in the checkpoint's ids (Lightning restores after setup)
            self.vocab, built = vocab, bool(self.streams)
            self.streams = {}
            if built:
                self.setup()
