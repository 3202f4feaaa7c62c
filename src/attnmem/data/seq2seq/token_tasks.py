"""Generated sequence-to-sequence token tasks (reverse, sort, copy_tokens, addition), a seq2seq source.

Tokens are the symbols `0 .. vocab_size-1` (and `+` for addition); their ids follow the specials, in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from attnmem.data.seq2seq.tensors import SPECIALS, TextPair, Vocab

Pair = tuple[list[int], list[int]]  # source symbols, target symbols (0 .. vocab_size, no specials)


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


class TokenTasks:
    """Seeded token tasks as a seq2seq source (`data.source`): `reverse`, `sort`, `copy_tokens` (tokens drawn
    uniformly from `vocab_size` symbols) and `addition` (decimal, tensor2tensor style: `vocab_size` is the base,
    plus a `+` symbol).

    Source lengths are uniform in `train_lengths` for train, validation and test; each length in `test_lengths`
    adds a test set of that length only (test dataloader k > 0, reported as `test/len{L}/...`).
    """

    bleu = False

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
        seed: int = 0,
    ) -> None:
        if task not in (*TASKS, "addition"):
            raise ValueError(f"data.source.task must be one of {(*TASKS, 'addition')}, got {task!r}")
        sizes = {"vocab_size": vocab_size, "num_train": num_train, "num_val": num_val, "num_test": num_test}
        for name, value in sizes.items():
            if value < 1:
                raise ValueError(f"data.source.{name} must be >= 1, got {value}")
        _check_lengths(task, train_lengths, test_lengths)
        if task == "addition" and vocab_size < 2:
            raise ValueError(f"data.source.vocab_size is the base of addition: it must be >= 2, got {vocab_size}")
        self.task, self.vocab_size, self.seed = task, vocab_size, seed
        self.train_lengths = (int(train_lengths[0]), int(train_lengths[1]))
        self.test_lengths = [int(n) for n in test_lengths]
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.data_files: list[Path] = []  # generated: nothing to hash
        self.symbols = [str(i) for i in range(vocab_size)] + (["+"] if task == "addition" else [])

    def _pairs(self, key: int, count: int, low: int, high: int) -> list[TextPair]:
        rng = np.random.default_rng([self.seed, key])
        sizes = rng.integers(low, high + 1, count).tolist()
        if self.task == "addition":
            pairs = [addition_pair(rng, n, self.vocab_size) for n in sizes]
        else:
            fn = TASKS[self.task]
            pairs = [(src, fn(src)) for src in (rng.integers(0, self.vocab_size, n).tolist() for n in sizes)]
        return [([self.symbols[i] for i in s], [self.symbols[i] for i in t]) for s, t in pairs]

    def pairs(self) -> dict[str, list[TextPair]]:
        """Train, val and test at `train_lengths`, then `test1`, `test2`, ... at each of `test_lengths`."""
        splits = {
            split: self._pairs(key, self.sizes[split], *self.train_lengths) for key, split in enumerate(self.sizes)
        }
        for k, n in enumerate(self.test_lengths):
            splits[f"test{k + 1}"] = self._pairs(3 + k, self.sizes["test"], n, n)
        return splits

    def vocab(self, train: list[TextPair]) -> Vocab:
        """The specials, then every symbol, on both sides (the same whatever the training pairs)."""
        itos = SPECIALS + self.symbols
        return {"src": list(itos), "tgt": list(itos)}


def _check_lengths(task: str, train_lengths: Sequence[int], test_lengths: Sequence[int]) -> None:
    """ValueError naming `data.source.train_lengths`/`test_lengths` when they do not fit the task."""
    if len(train_lengths) != 2 or not 1 <= train_lengths[0] <= train_lengths[1]:
        raise ValueError(
            f"data.source.train_lengths must be [min, max] with 1 <= min <= max, got {list(train_lengths)}"
        )
    least = 3 if task == "addition" else 1  # addition needs a digit, the `+` and a digit
    if min([train_lengths[0], *test_lengths]) < least:
        raise ValueError(
            f"data.source.train_lengths and data.source.test_lengths must be >= {least} for "
            f"data.source.task={task}, got {list(train_lengths)} and {list(test_lengths)}"
        )
