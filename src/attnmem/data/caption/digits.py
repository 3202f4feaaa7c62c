"""Generated captioned images: handwritten digits on a canvas, captioned left to right ("three seven one")."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from attnmem.core.errors import UserError
from attnmem.data.caption.images import vision
from attnmem.data.caption.tensors import Box, Captioned, build_vocab

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
SIDE = 8  # scikit-learn's digits are 8 x 8 pixels


def split_pools(labels: np.ndarray, fractions: tuple[float, float], seed: int) -> dict[str, np.ndarray]:
    """Indices of the digit images of each pool ("train", "val", "test"): a seeded permutation cut by the val and
    test `fractions`, so no image of one pool is drawn in another."""
    order = np.random.default_rng(seed).permutation(len(labels))
    val, test = (round(f * len(labels)) for f in fractions)
    return {"val": order[:val], "test": order[val : val + test], "train": order[val + test :]}


def place(rng: np.random.Generator, count: int, height: int, width: int) -> list[Box]:
    """`count` non-overlapping SIDE x SIDE boxes left to right: uniform gaps between them, each at a random row."""
    cuts = np.sort(rng.integers(0, width - SIDE * count + 1, count))  # the free columns left of each digit
    boxes = []
    for k, free in enumerate(cuts.tolist()):
        top, left = int(rng.integers(0, height - SIDE + 1)), free + SIDE * k
        boxes.append((top, left, top + SIDE, left + SIDE))
    return boxes


class DigitCanvas:
    """Seeded captions of digit images on a canvas, a caption source (`data.source`).

    scikit-learn's 1,797 8 x 8 handwritten digits (`load_digits`, shipped with the package) are split into train,
    validation and test pools first (`val_fraction`, `test_fraction`), so test captions show digits never seen in
    training. An example places 1 .. n digits of its split's pool side by side on a `height` x `width` canvas, at
    random gaps and rows, captioned by the digits left to right as words; `boxes` keeps each digit's pixel box.
    Caption lengths are uniform in `lengths` for train, validation and test; each of `test_lengths` adds a test set
    of captions of that many digits (test dataloader k > 0, `test/len{n}/...`), from the test pool.
    """

    data_files: list[Path] = []

    def __init__(self, *, lengths: Sequence[int] = (3, 3), test_lengths: Sequence[int] = (), height: int = 16,
                 width: int = 48, num_train: int = 1000, num_val: int = 200, num_test: int = 200,
                 val_fraction: float = 0.15, test_fraction: float = 0.15, seed: int = 0) -> None:
        low, high = lengths
        if not 1 <= low <= high:
            raise ValueError(f"data.source.lengths must be [min, max] with 1 <= min <= max, got {list(lengths)}")
        if min(num_train, num_val, num_test) < 1:
            raise ValueError("data.source.num_train, num_val and num_test must be >= 1")
        if not (0 < val_fraction and 0 < test_fraction and val_fraction + test_fraction < 1):
            raise ValueError("data.source.val_fraction and test_fraction must be > 0 and sum to less than 1")
        longest = max([high, *test_lengths])
        if height < SIDE or width < SIDE * longest:
            raise UserError(
                f"data.source.height={height}, data.source.width={width}: a canvas too small for {longest} digits "
                f"of {SIDE}x{SIDE} pixels side by side (data.source.lengths / test_lengths): set "
                f"data.source.width>={SIDE * longest} and data.source.height>={SIDE}"
            )
        self.lengths, self.test_lengths = (low, high), list(test_lengths)
        self.height, self.width, self.seed = height, width, seed
        self.sizes = {"train": num_train, "val": num_val, "test": num_test}
        self.fractions = (val_fraction, test_fraction)

    def splits(self) -> dict[str, Captioned]:
        """train, val, test (caption lengths in `lengths`) and test1 .. (one per `test_lengths`, the test pool)."""
        digits = vision("sklearn.datasets").load_digits()
        images, labels = digits.images / 16.0, digits.target  # (1797, 8, 8) in [0, 1]
        pools = split_pools(labels, self.fractions, self.seed)
        plan = [(name, pools[name], n, self.lengths) for name, n in self.sizes.items()]
        plan += [(f"test{k + 1}", pools["test"], self.sizes["test"], (n, n)) for k, n in enumerate(self.test_lengths)]
        return {
            name: self._draw(np.random.default_rng([self.seed, i]), images, labels, pool, n, span)
            for i, (name, pool, n, span) in enumerate(plan)
        }

    def _draw(self, rng: np.random.Generator, images: np.ndarray, labels: np.ndarray, pool: np.ndarray, n: int,
              span: tuple[int, int]) -> Captioned:
        canvas = np.zeros((n, 1, self.height, self.width), dtype=np.float32)  # (N, 1, H, W)
        captions, boxes = [], []
        for i in range(n):
            chosen = rng.choice(pool, size=int(rng.integers(span[0], span[1] + 1)))
            row = place(rng, len(chosen), self.height, self.width)
            for digit, (top, left, bottom, right) in zip(chosen, row):
                canvas[i, 0, top:bottom, left:right] = images[digit]
            captions.append([WORDS[labels[d]] for d in chosen])
            boxes.append(row)
        return Captioned(torch.from_numpy(canvas), captions, boxes)

    def vocab(self, captions: list[list[str]]) -> list[str]:
        """The specials and the ten digit words, whatever the training captions."""
        return build_vocab([WORDS])
