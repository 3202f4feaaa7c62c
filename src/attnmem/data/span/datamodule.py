"""The span family's one datamodule: questions from a pluggable source, tokenised, batched, checkpointed.

A source (`SquadFiles`, `SpanGenerator`, or any class with the `SpanSource` members) says where the
questions come from; this module turns them into examples, a vocabulary and loaders, the same for all.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypedDict

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import SpanDims
from attnmem.core.errors import UserError
from attnmem.core.glove import Vectors
from attnmem.data.span.tensors import (
    CHAR_VOCAB_SIZE,
    SpanData,
    SpanExample,
    SpanRecord,
    build_examples,
    build_vocab,
    words,
)

log = logging.getLogger(__name__)


class SpanSource(Protocol):
    """Where the questions of a span datamodule come from (`data.source`)."""

    data_files: list[Path]  # what the run's manifest hashes; empty for generated data

    def prepare_data(self) -> None:
        """Stop with one line when the source cannot be read (a missing file)."""

    def splits(self) -> dict[str, list[SpanRecord]]:
        """The questions of each split: "train" and "val" always, "test" when the source has one."""

    def vectors(self, words: Collection[str]) -> Vectors | None:
        """The pretrained vectors of those `words` that have one, or None for randomly initialised embeddings."""


class _Sizes(TypedDict):
    """The keyword arguments of `build_examples` a datamodule fixes."""

    max_context_len: int
    max_question_len: int
    lowercase: bool


class SpanDataModule(L.LightningDataModule):
    """Span QA from `source`: contexts tokenised keeping character offsets, the first answer trained on.

    The vocabulary holds the training questions' words seen `min_count` times and, when the source has
    pretrained vectors, every word of every split that has one (frozen in the model, so a word met only in
    validation keeps its meaning; the others are `<unk>`); a checkpoint's vocabulary wins over it. Contexts
    are cut to `max_context_len` tokens, questions to `max_question_len`. With `word_len` > 0 (what a model
    reading characters sets through its yaml, `conf/inputs/chars.yaml`) batches also hold the character ids
    `context_chars (B, Lc, W)` and `question_chars (B, Lq, W)`, and `dims.char_vocab_size` counts them.
    """

    family: ClassVar[str] = "span"
    family_module: ClassVar[str] = "attnmem.tasks.span.SpanTask"

    def __init__(
        self,
        *,
        source: SpanSource,
        max_context_len: int = 400,
        max_question_len: int = 40,
        lowercase: bool = True,
        min_count: int = 1,
        batch_size: int = 32,
        num_workers: int = 0,
        word_len: int = 0,
    ) -> None:
        super().__init__()
        limits = {
            "max_context_len": (max_context_len, 1),
            "max_question_len": (max_question_len, 1),
            "min_count": (min_count, 1),
            "batch_size": (batch_size, 1),
            "num_workers": (num_workers, 0),
            "word_len": (word_len, 0),
        }
        for name, (value, low) in limits.items():
            if value < low:
                raise ValueError(f"data.{name} must be >= {low}, got {value}")
        self.source = source
        self.sizes: _Sizes = {
            "max_context_len": max_context_len, "max_question_len": max_question_len, "lowercase": lowercase
        }
        self.min_count, self.batch_size, self.num_workers = min_count, batch_size, num_workers
        self.word_len = word_len
        self.data_files = list(source.data_files)
        self._data: SpanData | None = None
        self._state: dict[str, Any] | None = None
        self._embedding_weight: Tensor | None = None

    def prepare_data(self) -> None:
        self.source.prepare_data()

    def setup(self, stage: str | None = None) -> None:
        if self._data is not None:
            return
        records = self.source.splits()
        examples = {split: build_examples(r, split=split, **self.sizes) for split, r in records.items()}
        for split, kept in examples.items():
            if not kept:
                raise UserError(self._empty(split, len(records[split])))
        seen = set((self._state or {}).get("vocab", [])[2:]).union(*map(words, examples.values()))
        vectors = self.source.vectors(seen)
        vocab = build_vocab(examples["train"], self.min_count, () if vectors is None else vectors.table)
        data = SpanData(vocab, examples, self.word_len)
        self._data = data.adopt(self._state) if self._state is not None else data
        if vectors is not None:
            self._embedding_weight = vectors.matrix(self._data.vocab)
            self._log_vectors(vectors, words(examples["train"]))

    def _log_vectors(self, vectors: Vectors, train_words: set[str]) -> None:
        """How many words have a pretrained vector, and how many of those occur outside training only."""
        vocab = self.data.vocab[2:]
        found = [w for w in vocab if w in vectors.table]
        log.warning(
            "data.source.embeddings: %d of %d vocabulary words have a vector (%d of them outside the training "
            "split only), the other %d get zero vectors",
            len(found),
            len(vocab),
            sum(w not in train_words for w in found),
            len(vocab) - len(found),
        )

    def _empty(self, split: str, read: int) -> str:
        """The line for a split left without a question: where its questions came from, and why none is left."""
        files = ", ".join(map(str, self.data_files)) or "data.source"
        if read == 0:
            return f"the {split} split has no question ({files}): its articles hold no answerable question"
        return (
            f"the {split} split has no usable question ({files}): all {read} skipped, their answers lie past "
            f"data.max_context_len={self.sizes['max_context_len']} tokens or not on token edges; "
            "raise data.max_context_len or check the answers"
        )

    @property
    def data(self) -> SpanData:
        """The built data; `setup()` must have run."""
        if self._data is None:
            raise RuntimeError("call setup() before using the datamodule's data")
        return self._data

    @property
    def dims(self) -> SpanDims:
        chars = CHAR_VOCAB_SIZE if self.word_len else 0
        return SpanDims(vocab_size=len(self.data.vocab), embeddings=self._embedding_weight, char_vocab_size=chars)

    @property
    def has_test(self) -> bool:
        return "test" in self.data.examples

    def examples(self, split: str) -> list[SpanExample]:
        """The examples a batch's `index` points into."""
        return self.data.examples[split]

    def train_dataloader(self) -> DataLoader:
        return self.data.loader("train", batch_size=self.batch_size, shuffle=True, num_workers=self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self.data.loader("val", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        return self.data.loader("test", batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers)

    def state_dict(self) -> dict[str, Any]:
        return self.data.state() if self._data is not None else dict(self._state or {})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._state = dict(state_dict) or None
        if self._data is not None and self._state is not None:
            self._data = self._data.adopt(self._state)
