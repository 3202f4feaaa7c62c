"""Generated sequence-to-sequence token tasks (reverse, sort, copy_tokens, addition) and the shared tensors.

Every example is a source and a target of token ids. Special ids are the same on both sides:
`<pad>`=0, `<bos>`=1, `<eos>`=2, `<unk>`=3, regular tokens from 4. A batch is `src (B, Ls)` right-padded
(no bos/eos) and `tgt (B, Lt)` = `[bos, y1 .. yn, eos, pad ...]`, both cut to the batch's longest row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import lightning as L
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from attnmem.core.dims import Seq2SeqDims

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]

Pair = tuple[list[int], list[int]]  # source tokens, target tokens (regular ids, no specials)


def reverse(tokens: list[int]) -> list[int]:
    """The source backwards."""
    return tokens[::-1]


def sort(tokens: list[int]) -> list[int]:
    """The source in ascending token order."""
    return sorted(tokens)


def copy_tokens(tokens: list[int]) -> list[int]:
    """The source unchanged."""
    return list(tokens)


def addition_pair(rng: np.random.Generator, length: int, base: int) -> Pair:
    """tensor2tensor's `algorithmic_addition_decimal`: `n1 + n2` as `length` symbols, digits least significant
    first, `+` as symbol `base`; the target is the sum's digits, least significant first."""
    first = int(rng.integers(1, length - 1))  # digits of n1; n2 gets the rest after the `+`
    n1, n2 = rng.integers(0, base, first).tolist(), rng.integers(0, base, length - 1 - first).tolist()
    total = sum(d * base**i for i, d in enumerate(n1)) + sum(d * base**i for i, d in enumerate(n2))
    digits = []
    while True:
        total, digit = divmod(total, base)
        digits.append(digit)
        if total == 0:
            return [*n1, base, *n2], digits


TASKS: dict[str, Callable[[list[int]], list[int]]] = {"reverse": reverse, "sort": sort, "copy_tokens": copy_tokens}


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


def _as_is(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    return batch


def loader(data: dict[str, Tensor], batch_size: int, *, shuffle: bool) -> DataLoader:
    """A plain DataLoader (Lightning may swap its sampler for ddp) of dict batches, shuffled from torch's RNG."""
    return DataLoader(PairDataset(data), batch_size=batch_size, shuffle=shuffle, collate_fn=_as_is)


def lengths(data: dict[str, Tensor], key: str) -> int:
    """The longest row of `data[key]`, padding excluded."""
    return int((data[key] != PAD).sum(1).max())


def check_positive(**values: int) -> None:
    """ValueError naming the first `data.<name>` below 1."""
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"data.{name} must be >= 1, got {value}")


class GeneratedDataModule(L.LightningDataModule):
    """Seeded token tasks: `reverse`, `sort`, `copy_tokens` (tokens drawn uniformly from `vocab_size` symbols) and
    `addition` (decimal, tensor2tensor style: `vocab_size` is the base, plus a `+` symbol).

    Source lengths are uniform in `train_lengths` for train, validation and test; each length in `test_lengths`
    adds a test set of that length only (test dataloader k > 0, reported as `test/len{L}/...`).
    """

    family: ClassVar[str] = "seq2seq"
    family_module: ClassVar[str] = "attnmem.tasks.seq2seq.Seq2SeqTask"

    def __init__(
        self,
        *,
        task: str = "reverse",
        vocab_size: int = 10,
        train_lengths: Sequence[int] = (1, 20),
        test_lengths: Sequence[int] = (),
        num_train: int = 10000,
        num_val: int = 500,
        num_test: int = 500,
        batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if task not in (*TASKS, "addition"):
            raise ValueError(f"data.task must be one of {(*TASKS, 'addition')}, got {task!r}")
        check_positive(
            vocab_size=vocab_size, num_train=num_train, num_val=num_val, num_test=num_test, batch_size=batch_size
        )
        if len(train_lengths) != 2 or not 1 <= train_lengths[0] <= train_lengths[1]:
            raise ValueError(f"data.train_lengths must be [min, max] with 1 <= min <= max, got {list(train_lengths)}")
        least = 3 if task == "addition" else 1  # addition needs a digit, the `+` and a digit
        if min([train_lengths[0], *test_lengths]) < least:
            raise ValueError(
                f"data.train_lengths and data.test_lengths must be >= {least} for data.task={task}, got "
                f"{list(train_lengths)} and {list(test_lengths)}"
            )
        if task == "addition" and vocab_size < 2:
            raise ValueError(f"data.vocab_size is the base of addition: it must be >= 2, got {vocab_size}")
        self.task, self.vocab_size = task, vocab_size
        self.train_lengths, self.test_lengths = (
            (int(train_lengths[0]), int(train_lengths[1])),
            [int(n) for n in test_lengths],
        )
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.batch_size, self.seed = batch_size, seed
        self.data_files: list = []  # generated: nothing to hash
        self.splits: dict[str, dict[str, Tensor]] = {}
        self.itos = SPECIALS + [str(i) for i in range(vocab_size)] + (["+"] if task == "addition" else [])

    def _pairs(self, key: int, count: int, low: int, high: int) -> list[Pair]:
        rng = np.random.default_rng([self.seed, key])
        sizes = rng.integers(low, high + 1, count).tolist()
        if self.task == "addition":
            pairs = [addition_pair(rng, n, self.vocab_size) for n in sizes]
        else:
            fn = TASKS[self.task]
            pairs = [(src, fn(src)) for src in (rng.integers(0, self.vocab_size, n).tolist() for n in sizes)]
        offset = len(SPECIALS)
        return [([i + offset for i in s], [i + offset for i in t]) for s, t in pairs]

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        for key, split in enumerate(("train", "val", "test")):
            self.splits[split] = tensors(self._pairs(key, self.sizes[split], *self.train_lengths))
        for k, n in enumerate(self.test_lengths):
            self.splits[f"test{k + 1}"] = tensors(self._pairs(3 + k, self.sizes["test"], n, n))

    @property
    def dims(self) -> Seq2SeqDims:
        return seq2seq_dims(self.splits, self.itos, self.itos, self.test_lengths)

    @property
    def has_test(self) -> bool:
        return True

    def train_dataloader(self) -> DataLoader:
        return loader(self.splits["train"], self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return loader(self.splits["val"], self.batch_size, shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        names = ["test", *(f"test{k + 1}" for k in range(len(self.test_lengths)))]
        return [loader(self.splits[name], self.batch_size, shuffle=False) for name in names]


def seq2seq_dims(
    splits: dict[str, dict[str, Tensor]], src_itos: list[str], tgt_itos: list[str], test_lengths: list[int],
    *,
    bleu: bool = False,
) -> Seq2SeqDims:
    """What a seq2seq model and task need of the data."""
    return Seq2SeqDims(
        src_vocab_size=len(src_itos),
        tgt_vocab_size=len(tgt_itos),
        pad_id=PAD,
        bos_id=BOS,
        eos_id=EOS,
        max_src_len=max(lengths(s, "src") for s in splits.values()),
        max_tgt_len=max(lengths(s, "tgt") for s in splits.values()),
        test_lengths=list(test_lengths),
        src_itos=list(src_itos),
        tgt_itos=list(tgt_itos),
        bleu=bleu,
    )
