"""Sequence-to-sequence examples as tensors, whatever their source: ids, padding, batches, dims.

Every example is a source and a target of token ids. Special ids are the same on both sides:
`<pad>`=0, `<bos>`=1, `<eos>`=2, `<unk>`=3, regular tokens from 4. A batch is `src (B, Ls)` right-padded
(no bos/eos) and `tgt (B, Lt)` = `[bos, y1 .. yn, eos, pad ...]`, both cut to the batch's longest row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger(__name__)

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]

TextPair = tuple[list[str], list[str]]  # source tokens, target tokens (no specials)
Vocab = dict[str, list[str]]  # "src"/"tgt" -> id -> token, specials first


def to_ids(pairs: list[TextPair], vocab: Vocab, name: str) -> list[tuple[list[int], list[int]]]:
    """Ids of every token, unknown ones `<unk>`; logs how many were unknown."""
    src_index, tgt_index = ({t: i for i, t in enumerate(vocab[side])} for side in ("src", "tgt"))
    ids = [([src_index.get(t, UNK) for t in s], [tgt_index.get(t, UNK) for t in t_]) for s, t_ in pairs]
    unknown = sum(i == UNK for s, t in ids for i in (*s, *t))
    if unknown:
        log.info("%s: %d unknown token(s) mapped to <unk>", name, unknown)
    return ids


def pad(rows: Sequence[Sequence[int]], width: int | None = None) -> Tensor:
    """Right-padded (N, width) long tensor of id rows (width: the longest row by default)."""
    width = width or max((len(r) for r in rows), default=1)
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def tensors(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, Tensor]:
    """`src (N, Ls)` and `tgt (N, Lt)` = bos, target, eos, from pairs of id lists (ids already offset)."""
    return {"src": pad([s for s, _ in pairs]), "tgt": pad([[BOS, *t, EOS] for _, t in pairs])}


class PairDataset(Dataset):
    """Rows of `src`/`tgt` tensors; a batch of indices comes back as one dict, cut to its longest row."""

    def __init__(self, data: dict[str, Tensor]) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data["src"])

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, Tensor]:
        index = torch.as_tensor(indices)
        batch = {k: v[index] for k, v in self.data.items()}
        # cut the padding columns no row of this batch uses
        return {k: v[:, : max(1, int((v != PAD).sum(1).max()))] for k, v in batch.items()}


_Batch = TypeVar("_Batch")  # what the dataset's __getitems__ returns: DataLoader passes it to collate_fn


def _as_is(batch: _Batch) -> _Batch:
    return batch


def loader(data: dict[str, Tensor], batch_size: int, *, shuffle: bool) -> DataLoader:
    """A plain DataLoader (Lightning may swap its sampler for ddp) of dict batches, shuffled from torch's RNG."""
    return DataLoader(PairDataset(data), batch_size=batch_size, shuffle=shuffle, collate_fn=_as_is)


def lengths(data: dict[str, Tensor], key: str) -> int:
    """The longest row of `data[key]`, padding excluded."""
    return int((data[key] != PAD).sum(1).max())
