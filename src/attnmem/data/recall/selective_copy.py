"""Selective copying (Gu & Dao 2023, "Mamba", §4.1 and Appendix E.1), a recall source.

`num_tokens` data tokens, drawn uniformly with replacement from `0 .. vocab_size - 3`, stand at random positions
(in order) among blank tokens (`vocab_size - 2`, the paper's white "noise" token) in the first
`seq_len - num_tokens - 1` positions; a marker (`vocab_size - 1`) follows, then `num_tokens` blanks, at which the
model must output the data tokens in order. Only those last `num_tokens` positions are scored: unlike the plain
copying task, where the data sit at fixed positions, the spacing varies, so a time-invariant model cannot solve it
by a fixed shift. The paper's setting: seq_len 4096, vocab_size 16 (the noise token included), 16 data tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmem.data.recall.checks import IGNORE, check_range, distinct


@dataclass(frozen=True)
class SelectiveCopy:
    """Mamba's selective copying as a recall source (`data.source`): `generate(n, seed)` gives `(inputs, targets)`."""

    vocab_size: int = 16  # data tokens 0 .. V-3, the blank V-2, the marker V-1
    seq_len: int = 4096  # the input length T: the scattered data, the marker, the outputs
    num_tokens: int = 16  # n: the data tokens to copy

    def check(self) -> None:
        """A one-line `ValueError` naming the first option out of its range (`generate` checks first; the
        datamodule, at setup: outside Hydra's instantiation, which would wrap it in a traceback)."""
        check_range("vocab_size", self.vocab_size, 4, why=" (two data tokens or more, the blank and the marker)")
        check_range("seq_len", self.seq_len, 3, why=" (a data token, the marker, its output)")
        check_range("num_tokens", self.num_tokens, 1, (self.seq_len - 1) // 2,
                    why=f" for seq_len={self.seq_len} (2 * num_tokens + 1 <= seq_len: the tokens among the blanks, "
                        "the marker, the outputs)")

    @property
    def blank(self) -> int:
        """The noise token's id."""
        return self.vocab_size - 2

    @property
    def marker(self) -> int:
        """The id of the marker after which the model outputs the data tokens."""
        return self.vocab_size - 1

    def generate(self, num_examples: int, seed: int) -> tuple[Tensor, Tensor]:
        """`inputs (N, T)` and `targets (N, T)`: the data tokens in order at the last n positions, -100 elsewhere."""
        self.check()
        g = torch.Generator().manual_seed(seed)
        n, context = self.num_tokens, self.seq_len - self.num_tokens - 1
        data = torch.randint(self.vocab_size - 2, (num_examples, n), generator=g)  # (N, n)
        positions = distinct(g, num_examples, context, n).sort(dim=1).values  # (N, n), ascending
        inputs = torch.full((num_examples, self.seq_len), self.blank, dtype=torch.long)
        inputs[:, :context].scatter_(1, positions, data)
        inputs[:, context] = self.marker
        targets = torch.full_like(inputs, IGNORE)
        targets[:, context + 1 :] = data
        return inputs, targets
