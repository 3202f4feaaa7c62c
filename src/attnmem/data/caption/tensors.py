"""Captioned images as tensors, whatever their source: the word ids, the padding, the batches.

Word ids: `<pad>`=0, `<bos>`=1, `<eos>`=2, `<unk>`=3, the words from 4 (the seq2seq family's specials). A
batch is `image (B, C, H, W)` in [0, 1], `tgt (B, Lt)` = `[bos, y1 .. yn, eos, pad ...]` and, where the source
knows where each word's object lies, `boxes (B, Lt-1, 4)`: the pixel box (top, left, bottom, right; bottom and
right exclusive) of the object of word t (the one step t predicts), -1 past the caption and on its eos.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.data.seq2seq.tensors import BOS, EOS, PAD, SPECIALS, UNK, pad

__all__ = ["Captioned", "build_vocab", "caption_len", "loader", "to_tensors"]

Box = tuple[int, int, int, int]  # top, left, bottom, right in pixels (bottom, right exclusive)


@dataclass
class Captioned:
    """One split of a caption source: images, one caption (words) per image, and each word's box if known."""

    images: Tensor  # (N, C, H, W) in [0, 1]
    captions: list[list[str]]
    boxes: list[list[Box]] | None = None  # per image, one box per word


def build_vocab(captions: list[list[str]], min_count: int = 1) -> list[str]:
    """id -> word: the specials, then the words of `captions` seen at least `min_count` times, most frequent first."""
    counts = Counter(w for caption in captions for w in caption)
    return [*SPECIALS, *sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))]


def to_tensors(split: Captioned, itos: list[str]) -> dict[str, Tensor]:
    """`image`, `tgt` (bos, words, eos) and, when the split has them, `boxes` (N, Lt-1, 4) of one split."""
    index = {w: i for i, w in enumerate(itos)}
    ids = [[BOS, *(index.get(w, UNK) for w in caption), EOS] for caption in split.captions]
    data = {"image": split.images.float(), "tgt": pad(ids)}
    if split.boxes is not None:
        boxes = torch.full((len(ids), data["tgt"].shape[1] - 1, 4), -1, dtype=torch.long)
        for i, row in enumerate(split.boxes):
            if row:
                boxes[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        data["boxes"] = boxes
    return data


class CaptionDataset(Dataset):
    """Rows of the split's tensors; a batch of indices comes back as one dict, `tgt` and `boxes` cut to its
    longest caption."""

    def __init__(self, data: dict[str, Tensor]) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data["image"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        index = torch.as_tensor(indices)
        batch = {k: v[index] for k, v in self.data.items()}
        width = max(2, int((batch["tgt"] != PAD).sum(1).max()))
        batch["tgt"] = batch["tgt"][:, :width]
        if "boxes" in batch:
            batch["boxes"] = batch["boxes"][:, : width - 1]
        return batch


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _as_is(batch: _Batch) -> _Batch:
    return batch


def loader(data: dict[str, Tensor], batch_size: int, *, shuffle: bool) -> DataLoader:
    """A plain DataLoader of dict batches, shuffled from torch's RNG."""
    return DataLoader(CaptionDataset(data), batch_size=batch_size, shuffle=shuffle, collate_fn=_as_is)


def caption_len(data: dict[str, Tensor]) -> int:
    """The longest caption of a split, in words (bos and eos excluded)."""
    return int((data["tgt"] != PAD).sum(1).max()) - 2

