"""Induction heads (Gu & Dao 2023, "Mamba", §4.1 and Appendix E.1; Olsson et al. 2022), a recall source.

A sequence of tokens drawn uniformly from `0 .. vocab_size - 2` holds a trigger token (`vocab_size - 1`) once at a
random position p (p <= seq_len - 3); the last position holds the trigger again, where the model must output the
token that followed the first one (position p + 1). That last position is the only one scored. The paper trains
at seq_len 256 with vocab_size 16 and tests on longer sequences (up to 2^20).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmem.data.recall.checks import IGNORE, check_range


@dataclass(frozen=True)
class InductionHeads:
    """Mamba's induction heads as a recall source (`data.source`): `generate(n, seed)` gives `(inputs, targets)`."""

    vocab_size: int = 16  # tokens 0 .. V-2, the trigger V-1
    seq_len: int = 256  # the input length T, the second trigger last

    def check(self) -> None:
        """A one-line `ValueError` naming the first option out of its range (`generate` checks first; the
        datamodule, at setup: outside Hydra's instantiation, which would wrap it in a traceback)."""
        check_range("vocab_size", self.vocab_size, 3, why=" (two tokens or more, and the trigger)")
        check_range("seq_len", self.seq_len, 3, why=" (the trigger, the token after it, the trigger again)")

    @property
    def trigger(self) -> int:
        """The trigger token's id."""
        return self.vocab_size - 1

    def generate(self, num_examples: int, seed: int) -> tuple[Tensor, Tensor]:
        """`inputs (N, T)` and `targets (N, T)`: the token after the first trigger at the last position, -100
        elsewhere."""
        self.check()
        g = torch.Generator().manual_seed(seed)
        inputs = torch.randint(self.vocab_size - 1, (num_examples, self.seq_len), generator=g)  # (N, T)
        first = torch.randint(self.seq_len - 2, (num_examples, 1), generator=g)  # (N, 1): p in [0, T-3]
        inputs.scatter_(1, first, self.trigger)
        inputs[:, -1] = self.trigger
        targets = torch.full_like(inputs, IGNORE)
        targets[:, -1] = inputs.gather(1, first + 1).squeeze(1)
        return inputs, targets
