"""The caption family's one datamodule: captioned images from a pluggable source, as ids, batched, checkpointed.

A source (`DigitCanvas`, `CocoFolder`, or any class with the `CaptionSource` members) gives images, captions as
words, optionally each word's box, and the vocabulary it would build; this module maps the words to ids and serves
the loaders, the same for all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader

from attnmem.core.dims import CaptionDims
from attnmem.data.caption.tensors import Captioned, caption_len, loader, to_tensors
from attnmem.data.seq2seq.tensors import BOS, EOS, PAD

__all__ = ["CaptionDataModule", "CaptionSource"]


class CaptionSource(Protocol):
    """Where the captioned images of a caption datamodule come from (`data.source`)."""

    data_files: list[Path]  # what the run's manifest hashes; empty for generated data
    test_lengths: list[int]  # each adds the split `test{k}` of captions of that length (test dataloader k)

    def splits(self) -> dict[str, Captioned]:
        """The images and captions of each split: "train" and "val" always, "test" (and "test1", ...) if any."""

    def vocab(self, captions: list[list[str]]) -> list[str]:
        """id -> word, the specials first, when no checkpoint gives it; `captions` are the training ones."""


class CaptionDataModule(L.LightningDataModule):
    """Images and their captions from `source`, the words as ids of one vocabulary (a checkpoint's wins).

    A batch is `image (B, C, H, W)`, `tgt (B, Lt)` (bos … eos, padded) and, where the source knows them (the
    digits generator), `boxes (B, Lt-1, 4)`, the pixel box of each word's object (`data/caption/tensors.py`).
    """

    family: ClassVar[str] = "caption"
    family_module: ClassVar[str] = "attnmem.tasks.caption.CaptionTask"

    def __init__(self, *, source: CaptionSource, batch_size: int = 64) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {batch_size}")
        self.source, self.batch_size = source, batch_size
        self.data_files = list(source.data_files)
        self.splits: dict[str, dict[str, Tensor]] = {}
        self.itos: list[str] = []

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        splits = self.source.splits()
        self.data_files = list(self.source.data_files)
        if not self.itos:
            self.itos = self.source.vocab(splits["train"].captions)
        self.splits = {name: to_tensors(split, self.itos) for name, split in splits.items()}

    @property
    def dims(self) -> CaptionDims:
        _, channels, height, width = self.splits["train"]["image"].shape
        return CaptionDims(
            vocab_size=len(self.itos),
            channels=channels,
            height=height,
            width=width,
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            max_caption_len=max(caption_len(s) for s in self.splits.values()),
            test_lengths=list(self.source.test_lengths),
            itos=list(self.itos),
        )

    @property
    def has_test(self) -> bool:
        return "test" in self.splits

    def train_dataloader(self) -> DataLoader:
        return loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return loader(self.splits["val"], self.batch_size, shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        names = ["test", *(f"test{k + 1}" for k in range(len(self.source.test_lengths)))]
        return [loader(self.splits[name], self.batch_size, shuffle=False) for name in names]

    def state_dict(self) -> dict[str, Any]:
        return {"itos": self.itos}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # a checkpoint's vocabulary wins over the one the source would give
        itos = list(state_dict.get("itos") or [])
        if itos and itos != self.itos:
            built, self.itos, self.splits = bool(self.splits), itos, {}
            if built:
                self.setup()
